package store

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestPrefixEnd ensures prefixEnd returns the first key after every key with the prefix.
func TestPrefixEnd(t *testing.T) {
	for _, tc := range []struct {
		in, want []byte
	}{
		{[]byte("ab"), []byte("ac")},
		{[]byte{'a', 0xff}, []byte{'b'}},
		{[]byte{0xff, 0xff}, nil},
		{nil, nil},
	} {
		if got := prefixEnd(tc.in); !bytes.Equal(got, tc.want) {
			t.Errorf("prefixEnd(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestOrgTimeIDKey ensures index keys sort by organization, then time, then id, and give their id back.
func TestOrgTimeIDKey(t *testing.T) {
	org := NewID()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := orgTimeIDKey(org, t0, NewID())
	b := orgTimeIDKey(org, t0.Add(time.Second), NewID())
	if bytes.Compare(a, b) >= 0 {
		t.Error("a later time does not sort after an earlier one")
	}
	id := NewID()
	if got := idFromOrgTimeIDKey(orgTimeIDKey(org, t0, id)); got != id {
		t.Errorf("id from key = %q, want %q", got, id)
	}
	if got := idFromOrgTimeIDKey([]byte("short")); got != "" {
		t.Errorf("id from short key = %q, want empty", got)
	}
	if got := timeKey(time.Unix(-5, 0)); got != 0 {
		t.Errorf("timeKey before 1970 = %d, want 0", got)
	}
}

// TestLastWithPrefix ensures the reverse scan starts at the last key of the prefix, whatever follows it.
func TestLastWithPrefix(t *testing.T) {
	bdb, err := bolt.Open(filepath.Join(t.TempDir(), "x.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	err = bdb.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("b"))
		if err != nil {
			return err
		}
		for _, k := range []string{"a1", "a2", "b1", "b2", "c1", "\xff\xff1"} {
			if err := b.Put([]byte(k), nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		prefix, want string
	}{
		{"a", "a2"}, {"b", "b2"}, {"c", "c1"}, {"d", ""}, {"0", ""}, {"\xff\xff", "\xff\xff1"},
	} {
		_ = bdb.View(func(tx *bolt.Tx) error {
			got := lastWithPrefix(tx.Bucket([]byte("b")).Cursor(), []byte(tc.prefix))
			if string(got) != tc.want {
				t.Errorf("lastWithPrefix(%q) = %q, want %q", tc.prefix, got, tc.want)
			}
			return nil
		})
	}
}

// TestMigrationsMatchSchemaVersion ensures SchemaVersion and the migration list agree.
func TestMigrationsMatchSchemaVersion(t *testing.T) {
	if len(migrations) != SchemaVersion {
		t.Errorf("len(migrations) = %d, SchemaVersion = %d", len(migrations), SchemaVersion)
	}
}
