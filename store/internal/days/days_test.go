package days

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store/internal/codec"
)

// TestOf ensures a day number is the UTC day, whatever the zone of the
// time, that times before 1970 are day 0, and that Start and Date give it
// back.
func TestOf(t *testing.T) {
	paris := time.FixedZone("CET", 3600)
	for _, c := range []struct {
		t    time.Time
		day  uint32
		date string
	}{
		{time.Unix(0, 0), 0, "1970-01-01"},
		{time.Date(2026, 11, 20, 23, 59, 59, 0, time.UTC), 20777, "2026-11-20"},
		{time.Date(2026, 11, 21, 0, 30, 0, 0, paris), 20777, "2026-11-20"},
		{time.Date(1969, 12, 31, 12, 0, 0, 0, time.UTC), 0, "1970-01-01"},
	} {
		if got := Of(c.t); got != c.day || Date(got) != c.date || !Start(got).Equal(time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC).AddDate(0, 0, int(got)-20777)) {
			t.Errorf("Of(%v) = %d (%s), want %d (%s)", c.t, got, Date(got), c.day, c.date)
		}
	}
	if k := Key([]byte("ab"), 0x01020304); string(k) != "ab\x01\x02\x03\x04" {
		t.Errorf("Key = %q", k)
	}
}

// TestScan ensures a scan reads the prefix's days from..to only, in
// order, with keys that carry a suffix, stops at fn's error, and refuses a
// key of another length.
func TestScan(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "days.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("b"))
		if err != nil {
			return err
		}
		for _, p := range []string{"a", "b", "c"} {
			for day := uint32(10); day < 20; day++ {
				for seq := range 2 {
					if err := b.Put(append(Key([]byte(p), day), byte(seq)), []byte(fmt.Sprintf("%s%d%d", p, day, seq))); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	scan := func(prefix string, suffix int, from, to uint32, stop string) ([]string, error) {
		var got []string
		err := db.View(func(tx *bolt.Tx) error {
			return Scan(tx.Bucket([]byte("b")).Cursor(), []byte(prefix), suffix, from, to, func(day uint32, k, v []byte) error {
				if Of(Start(day)) != day || string(k[:len(prefix)]) != prefix {
					return fmt.Errorf("key %x for day %d", k, day)
				}
				got = append(got, string(v))
				if string(v) == stop {
					return errors.New("stop")
				}
				return nil
			})
		})
		return got, err
	}
	got, err := scan("b", 1, 12, 13, "")
	if want := []string{"b120", "b121", "b130", "b131"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("days 12..13 of b: %q, %v; want %q", got, err, want)
	}
	if got, err := scan("c", 1, 18, 40, ""); err != nil || len(got) != 4 {
		t.Errorf("past the last day: %q, %v", got, err)
	}
	if got, err := scan("a", 1, 30, 40, ""); err != nil || len(got) != 0 {
		t.Errorf("after every day: %q, %v", got, err)
	}
	if got, err := scan("a", 1, 10, 19, "a110"); err == nil || err.Error() != "stop" || len(got) != 3 {
		t.Errorf("stopped by fn: %q, %v", got, err)
	}
	if _, err := scan("b", 0, 12, 13, ""); !errors.Is(err, codec.ErrCorrupt) {
		t.Errorf("keys longer than prefix | day: %v", err)
	}
}
