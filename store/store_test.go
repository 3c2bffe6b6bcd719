package store_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// mustOpen opens (or creates) the database at path, closing it when the test ends.
func mustOpen(tb testing.TB, path string, opts *store.Options) *store.DB {
	tb.Helper()
	db, err := store.Open(path, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = db.Close() })
	return db
}

// TestOpen ensures Open creates a file at the current schema version and can reopen it.
func TestOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dmarcd.db")
	t.Run("OK", func(t *testing.T) {
		db, err := store.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := store.BoltOf(db).Path(); got != path {
			t.Errorf("the file is %q, want %q", got, path)
		}
		v, err := store.SchemaVersionOf(db)
		if err != nil || v != store.SchemaVersion {
			t.Errorf("SchemaVersion() = %d, %v; want %d", v, err, store.SchemaVersion)
		}
		if _, err := db.CreateOrganization("acme", store.PlanStarter); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if perm := info.Mode().Perm(); perm != 0o600 {
			t.Errorf("file mode = %v, want 0600", perm)
		}
	})
	t.Run("Reopen", func(t *testing.T) {
		db := mustOpen(t, path, nil)
		if n, err := db.CountOrganizations(); err != nil || n != 1 {
			t.Errorf("CountOrganizations() = %d, %v; want 1", n, err)
		}
	})
	t.Run("ReadOnly", func(t *testing.T) {
		db := mustOpen(t, path, &store.Options{ReadOnly: true})
		if _, err := db.FindOrganization("acme"); err != nil {
			t.Errorf("FindOrganization: %v", err)
		}
		if _, err := db.CreateOrganization("other", store.PlanStarter); err == nil {
			t.Error("CreateOrganization on a read-only database succeeded")
		}
		if err := db.Check(); err != nil {
			t.Errorf("Check: %v", err)
		}
	})
	t.Run("ErrReadOnlyMissing", func(t *testing.T) {
		if _, err := store.Open(filepath.Join(t.TempDir(), "none.db"), &store.Options{ReadOnly: true}); err == nil {
			t.Error("read-only Open of a missing file succeeded")
		}
	})
}

// TestOpenLocked ensures a second Open of a held file gives up with ErrLocked.
func TestOpenLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dmarcd.db")
	mustOpen(t, path, nil)
	_, err := store.Open(path, &store.Options{Timeout: 10 * time.Millisecond})
	if !errors.Is(err, store.ErrLocked) {
		t.Fatalf("second Open: err = %v, want ErrLocked", err)
	}
	if err := store.VerifyFile(path); !errors.Is(err, store.ErrLocked) {
		t.Errorf("VerifyFile of a held file: err = %v, want ErrLocked", err)
	}
}

// TestOpenForeignBolt ensures Open refuses a bbolt file of another program instead of adding buckets to it.
func TestOpenForeignBolt(t *testing.T) {
	path := foreignBoltFile(t)
	_, err := store.Open(path, nil)
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Open: err = %v, want ErrInvalid", err)
	}
}

// TestMigrations ensures Open runs exactly the migrations a file lacks, records the version, and refuses newer files.
func TestMigrations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dmarcd.db")
	mustClose(t, mustOpenRaw(t, path, store.Migrations()))

	var ran []int
	migs := store.Migrations()
	// Two migrations after the program's own.
	v1, v2 := store.SchemaVersion+1, store.SchemaVersion+2
	for _, n := range []int{v1, v2} {
		migs = append(migs, func(tx *bolt.Tx) error {
			ran = append(ran, n)
			b, err := tx.CreateBucketIfNotExists([]byte("migrated"))
			if err != nil {
				return err
			}
			return b.Put([]byte{byte(n)}, []byte("done"))
		})
	}
	t.Run("OK", func(t *testing.T) {
		db := mustOpenRaw(t, path, migs)
		defer mustClose(t, db)
		if want := []int{v1, v2}; !equalInts(ran, want) {
			t.Errorf("migrations run = %v, want %v", ran, want)
		}
		if v, err := store.SchemaVersionOf(db); err != nil || v != v2 {
			t.Errorf("SchemaVersion() = %d, %v; want %d", v, err, v2)
		}
		err := store.BoltOf(db).View(func(tx *bolt.Tx) error {
			if b := tx.Bucket([]byte("migrated")); b == nil || b.Get([]byte{byte(v2)}) == nil {
				t.Error("the last migration left no trace")
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	t.Run("NothingToRun", func(t *testing.T) {
		ran = nil
		mustClose(t, mustOpenRaw(t, path, migs))
		if len(ran) != 0 {
			t.Errorf("migrations run again: %v", ran)
		}
	})
	t.Run("ErrFailedMigration", func(t *testing.T) {
		failing := append(migs[:len(migs):len(migs)], func(tx *bolt.Tx) error {
			if err := tx.Bucket([]byte("migrated")).Put([]byte{byte(v2 + 1)}, []byte("half")); err != nil {
				return err
			}
			return errors.New("boom")
		})
		if _, err := store.OpenWithMigrations(path, nil, failing); err == nil {
			t.Fatal("Open with a failing migration succeeded")
		}
		db := mustOpenRaw(t, path, migs)
		defer mustClose(t, db)
		if v, _ := store.SchemaVersionOf(db); v != v2 {
			t.Errorf("SchemaVersion() after failed migration = %d, want %d", v, v2)
		}
	})
	t.Run("ErrNewerFile", func(t *testing.T) {
		_, err := store.Open(path, nil)
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Open of a newer file: err = %v, want ErrInvalid", err)
		}
		if err := store.VerifyFile(path); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("VerifyFile of a newer file: err = %v, want ErrInvalid", err)
		}
	})
	t.Run("ErrReadOnlyOlder", func(t *testing.T) {
		_, err := store.OpenWithMigrations(path, &store.Options{ReadOnly: true}, append(migs[:len(migs):len(migs)], migs[0]))
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("read-only Open of an older file: err = %v, want ErrInvalid", err)
		}
	})
}

func mustOpenRaw(tb testing.TB, path string, migs []store.Migration) *store.DB {
	tb.Helper()
	db, err := store.OpenWithMigrations(path, nil, migs)
	if err != nil {
		tb.Fatal(err)
	}
	return db
}

func mustClose(tb testing.TB, db *store.DB) {
	tb.Helper()
	if err := db.Close(); err != nil {
		tb.Fatal(err)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestCheck ensures Check passes on a used database.
func TestCheck(t *testing.T) {
	db := storetest.Open(t)
	org := storetest.MustOrganization(t, db, "acme", store.PlanUnlimited)
	storetest.MustAPIKey(t, db, org.ID, store.ScopeFull)
	storetest.MustDomain(t, db, org.ID, "example.com")
	if err := db.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
}

// TestBackup ensures a hot backup verifies and, opened, holds the same organizations, keys and domains.
func TestBackup(t *testing.T) {
	db := storetest.Open(t)
	org := storetest.MustOrganization(t, db, "acme", store.PlanBusiness)
	key, secret := storetest.MustAPIKey(t, db, org.ID, store.ScopeRead)
	dom := storetest.MustDomain(t, db, org.ID, "example.com")

	var buf bytes.Buffer
	n, err := db.Backup(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) || n == 0 {
		t.Fatalf("Backup returned %d, wrote %d bytes", n, buf.Len())
	}
	path := filepath.Join(t.TempDir(), "copy.db")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := store.VerifyFile(path); err != nil {
		t.Fatalf("VerifyFile: %v", err)
	}
	cp := mustOpen(t, path, nil)
	gotOrg, err := cp.FindOrganization("acme")
	if err != nil || *gotOrg != *org {
		t.Errorf("organization in copy = %+v, %v; want %+v", gotOrg, err, org)
	}
	gotKey, gotKeyOrg, err := cp.Authenticate(secret)
	if err != nil || gotKey.ID != key.ID || gotKeyOrg.ID != org.ID {
		t.Errorf("Authenticate in copy = %+v, %+v, %v", gotKey, gotKeyOrg, err)
	}
	gotDom, err := cp.FindDomainByReportingEmail(dom.ReportingEmail)
	if err != nil || gotDom.ID != dom.ID || gotDom.Name != "example.com" {
		t.Errorf("domain in copy = %+v, %v", gotDom, err)
	}
}

// TestVerifyFile ensures VerifyFile rejects what is not a dmarcd database.
func TestVerifyFile(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "text.db")
	if err := os.WriteFile(text, bytes.Repeat([]byte("not a database\n"), 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
	}{
		{"ErrNotBolt", text},
		{"ErrEmptyFile", empty},
		{"ErrMissing", filepath.Join(dir, "missing.db")},
		{"ErrNoMetaBucket", foreignBoltFile(t)},
		{"ErrNoVersion", boltFileWithMeta(t, -1)},
		{"ErrVersionTooNew", boltFileWithMeta(t, store.SchemaVersion+1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := store.VerifyFile(tc.path); err == nil {
				t.Error("VerifyFile succeeded")
			}
		})
	}
	t.Run("ErrInvalidKind", func(t *testing.T) {
		if err := store.VerifyFile(foreignBoltFile(t)); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("err = %v, want ErrInvalid", err)
		}
	})
	t.Run("OK", func(t *testing.T) {
		if err := store.VerifyFile(boltFileWithMeta(t, store.SchemaVersion)); err != nil {
			t.Errorf("VerifyFile: %v", err)
		}
	})
}

// foreignBoltFile returns a bbolt file with a bucket but no meta bucket.
func foreignBoltFile(tb testing.TB) string {
	tb.Helper()
	return makeBoltFile(tb, func(tx *bolt.Tx) error {
		_, err := tx.CreateBucket([]byte("something_else"))
		return err
	})
}

// boltFileWithMeta returns a bbolt file with a meta bucket holding version v (none when v < 0).
func boltFileWithMeta(tb testing.TB, v int) string {
	tb.Helper()
	return makeBoltFile(tb, func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucket(store.MetaBucket); err != nil {
			return err
		}
		if v < 0 {
			return nil
		}
		return store.PutSchemaVersion(tx, v)
	})
}

func makeBoltFile(tb testing.TB, fill func(*bolt.Tx) error) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "bolt.db")
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if err := bdb.Update(fill); err != nil {
		tb.Fatal(err)
	}
	if err := bdb.Close(); err != nil {
		tb.Fatal(err)
	}
	return path
}

// TestStoretestClock ensures the storetest clock drives the times the store stamps, at second precision in UTC.
func TestStoretestClock(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch())
	db := storetest.OpenWithClock(t, clock)
	org := storetest.MustOrganization(t, db, "first", store.PlanStarter)
	if !org.CreatedAt.Equal(storetest.Epoch()) {
		t.Errorf("CreatedAt = %v, want %v", org.CreatedAt, storetest.Epoch())
	}
	clock.Advance(90*time.Minute + 500*time.Millisecond)
	org = storetest.MustOrganization(t, db, "second", store.PlanStarter)
	if want := storetest.Epoch().Add(90 * time.Minute); !org.CreatedAt.Equal(want) || org.CreatedAt.Location() != time.UTC {
		t.Errorf("CreatedAt = %v, want %v UTC", org.CreatedAt, want)
	}
	clock.Set(time.Date(2030, 1, 2, 3, 4, 5, 0, time.FixedZone("X", 3600)))
	org = storetest.MustOrganization(t, db, "third", store.PlanStarter)
	if got := org.CreatedAt.Format(time.RFC3339); got != "2030-01-02T02:04:05Z" {
		t.Errorf("CreatedAt = %s, want 2030-01-02T02:04:05Z", got)
	}
}

// TestCorruptFile ensures a damaged copy fails VerifyFile and Open with an error instead of crashing.
func TestCorruptFile(t *testing.T) {
	db := storetest.Open(t)
	org := storetest.MustOrganization(t, db, "acme", store.PlanUnlimited)
	for i := range 40 {
		storetest.MustDomain(t, db, org.ID, fmt.Sprintf("d%d.example", i))
	}
	var buf bytes.Buffer
	if _, err := db.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	const pageSize = 4096 // bbolt's default on this platform; a test of the damage, not of bbolt
	if os.Getpagesize() != pageSize {
		t.Skipf("page size %d", os.Getpagesize())
	}
	detected := 0
	// Garbage in the flags of each page past the two meta pages: free pages
	// may take it unnoticed, pages in use must not.
	for p := 2; p < len(good)/pageSize; p++ {
		bad := bytes.Clone(good)
		bad[p*pageSize+8], bad[p*pageSize+9] = 0x77, 0x77
		path := filepath.Join(t.TempDir(), "bad.db")
		if err := os.WriteFile(path, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		verr := store.VerifyFile(path)
		if verr == nil {
			continue
		}
		detected++
		if !errors.Is(verr, store.ErrInvalid) {
			t.Errorf("page %d: VerifyFile err = %v, want ErrInvalid", p, verr)
		}
		if cp, err := store.Open(path, &store.Options{Timeout: 10 * time.Millisecond}); err == nil {
			if cerr := cp.Check(); cerr == nil {
				t.Errorf("page %d: VerifyFile failed (%v) but Open and Check pass", p, verr)
			}
			_ = cp.Close()
		}
	}
	if detected == 0 {
		t.Error("no damaged page was detected")
	}
	t.Run("ErrTruncated", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "short.db")
		if err := os.WriteFile(path, good[:len(good)/2], 0o600); err != nil {
			t.Fatal(err)
		}
		err := store.VerifyFile(path)
		if err == nil {
			t.Error("VerifyFile of a truncated copy succeeded")
		}
	})
}
