package store_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
)

// fillQuarantine opens a database at path and keeps n entries of size
// bytes each; it returns their ids.
func fillQuarantine(t *testing.T, db *store.DB, n, size int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		e, err := quarantine(t, db, junk(fmt.Sprint(i), size), 0)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ID)
	}
	return ids
}

// TestCompactFileShrinks ensures compacting a file after deleting half its
// data gives the space back, keeps every remaining entry, passes
// tx.Check, reports progress, and that a file held by another process is
// refused (ErrLocked) and left as it was.
func TestCompactFileShrinks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dmarcd.db")
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids := fillQuarantine(t, db, 200, 100_000)
	for _, id := range ids[:100] {
		if err := db.DeleteQuarantine(id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := store.CompactFile(path, 50*time.Millisecond, nil); !errors.Is(err, store.ErrLocked) {
		t.Fatalf("compact of a file in use: %v, want ErrLocked", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	var calls int
	var last [2]int64
	st, err := store.CompactFile(path, time.Second, func(done, total int64) { calls++; last = [2]int64{done, total} })
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	if st.Before < 20_000_000 || st.After > st.Before*6/10 || fi.Size() != st.After {
		t.Errorf("compaction %d -> %d bytes (file %d), want about half", st.Before, st.After, fi.Size())
	}
	if calls == 0 || last[0] != last[1] || last[1] <= 0 {
		t.Errorf("progress: %d calls, last %v", calls, last)
	}
	if _, err := os.Stat(path + ".compacting"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary file left: %v", err)
	}
	if err := store.VerifyFile(path); err != nil {
		t.Fatalf("compacted file: %v", err)
	}
	db, err = store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Check(); err != nil {
		t.Errorf("tx.Check after compaction: %v", err)
	}
	for _, id := range ids[100:] {
		if _, raw, err := db.FindQuarantine(id); err != nil || len(raw) != 100_000 {
			t.Fatalf("entry %s after compaction: %d bytes, %v", id, len(raw), err)
		}
	}
	if _, total, _ := db.ListQuarantine(store.Page{Page: 1, Limit: 1}); total != 100 {
		t.Errorf("%d entries after compaction, want 100", total)
	}
}

// TestCompactFileBadInput ensures a file that is not a dmarcd database is
// refused and left unchanged.
func TestCompactFileBadInput(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dmarcd.db")
	if err := os.WriteFile(path, []byte("not a database"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := store.CompactFile(path, time.Second, nil); err == nil {
		t.Fatal("compacted a file that is no database")
	}
	if b, _ := os.ReadFile(path); string(b) != "not a database" {
		t.Errorf("file changed to %q", b)
	}
	if _, err := store.CompactFile(filepath.Join(t.TempDir(), "missing.db"), time.Second, nil); err == nil {
		t.Error("compacted a missing file")
	}
}
