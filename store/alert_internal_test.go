package store

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/alert"
	"github.com/dmarcd/dmarcd/store/internal/days"
)

// TestSourceIndexForgetsRolledBackCommits ensures sources learnt in a
// commit that rolled back are not remembered, in the file or in the cache,
// while those of a committed one are, across ingesters.
func TestSourceIndexForgetsRolledBackCommits(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "x.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	domain := NewID()
	day := days.Of(time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC))
	learn := func(ip string, keep bool) error {
		return db.bolt.Update(func(tx *bolt.Tx) error {
			x := newSourceIndex(db, tx)
			x.learn(domain, day, []uint64{hashIP(ip)})
			if err := x.flush(tx); err != nil {
				return err
			}
			if !keep {
				return errors.New("roll back")
			}
			return nil
		})
	}
	seenIP := func(ip string) bool {
		var ok bool
		_ = db.bolt.View(func(tx *bolt.Tx) error {
			ok = seen(newSourceIndex(db, tx), domain, day+3, hashIP(ip))
			return nil
		})
		return ok
	}
	if err := learn("192.0.2.1", true); err != nil {
		t.Fatal(err)
	}
	if err := learn("192.0.2.2", false); err == nil {
		t.Fatal("the rolled back commit succeeded")
	}
	if !seenIP("192.0.2.1") || seenIP("192.0.2.2") {
		t.Errorf("seen: committed %v, rolled back %v", seenIP("192.0.2.1"), seenIP("192.0.2.2"))
	}
	// The cache must agree with the file: a fresh cache says the same.
	db.alerts.sources = sourceCache{}
	if !seenIP("192.0.2.1") || seenIP("192.0.2.2") {
		t.Errorf("from the file: committed %v, rolled back %v", seenIP("192.0.2.1"), seenIP("192.0.2.2"))
	}
	// Outside the window (day+3 looks back 30 days) nothing is seen.
	_ = db.bolt.View(func(tx *bolt.Tx) error {
		if seen(newSourceIndex(db, tx), domain, day+31, hashIP("192.0.2.1")) {
			t.Error("seen 31 days later")
		}
		return nil
	})
}

// seen reports whether h is in a set of the domain in the window of a
// report of day under the default rules: the 30 days before, and day.
func seen(x *sourceIndex, domainID string, day uint32, h uint64) bool {
	from, to := alert.DefaultRules().SourceWindow(day)
	return seenIn(x.window(domainID, from, to), h)
}

// TestDaySetCap ensures a day's set stops growing at its cap.
func TestDaySetCap(t *testing.T) {
	s := noSet.clone()
	for i := range maxDaySetIPs + 10 {
		s.add(uint64(i))
	}
	w, raw := s.written()
	if w.size() != maxDaySetIPs || len(raw) != 8*maxDaySetIPs || !decodeDaySet(raw).has(uint64(maxDaySetIPs-1)) {
		t.Errorf("set of %d, %d bytes", w.size(), len(raw))
	}
	if decodeDaySet([]byte{1, 2, 3}).size() != 0 {
		t.Error("a damaged value decoded to a set")
	}
}

// TestSourceIndexSeesItsOwnCommit ensures sources learnt earlier in a
// commit count as seen for later reports of that commit, also after the
// window of a later day was looked at, and that noSet stays empty.
func TestSourceIndexSeesItsOwnCommit(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "x.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	domain := NewID()
	const day = 20000
	x, y := hashIP("192.0.2.1"), hashIP("192.0.2.2")
	err = db.bolt.Update(func(tx *bolt.Tx) error {
		idx := newSourceIndex(db, tx)
		if seen(idx, domain, day, x) { // builds the window of day
			t.Error("seen before it was learnt")
		}
		idx.learn(domain, day-1, []uint64{x})
		idx.learn(domain, day, []uint64{y})
		if !seen(idx, domain, day, x) || !seen(idx, domain, day, y) || !seen(idx, domain, day+29, x) {
			t.Error("a source learnt in this commit is not seen")
		}
		if seen(idx, domain, day+30, x) {
			t.Error("seen out of the window")
		}
		return idx.flush(tx)
	})
	if err != nil {
		t.Fatal(err)
	}
	if noSet.size() != 0 || noSet.raw != nil {
		t.Errorf("noSet changed: %+v", noSet)
	}
	_ = db.bolt.View(func(tx *bolt.Tx) error {
		idx := newSourceIndex(db, tx)
		if !seen(idx, domain, day+1, x) || !seen(idx, domain, day+1, y) {
			t.Error("the committed sets are not seen")
		}
		// From 20 days on, day-1 and day are in the merged older part.
		if !seen(idx, domain, day+20, x) || !seen(idx, domain, day+20, y) || !seen(idx, domain, day+30, y) {
			t.Error("the committed sets are not seen through the union")
		}
		if seen(idx, domain, day+30, x) || seen(idx, domain, day+31, y) || seen(idx, domain, day+20, hashIP("x")) {
			t.Error("seen through the union out of the window")
		}
		return nil
	})
}

// TestHashSet ensures the hash set holds each value once, 0 included,
// through its growth.
func TestHashSet(t *testing.T) {
	var s hashSet
	want := map[uint64]bool{}
	for i := range 5000 {
		h := uint64(i) * 0x9E3779B97F4A7C15 // spread, with collisions mod the table
		if i%7 == 0 {
			h = uint64(i % 3) // small values and 0, repeated
		}
		s.add(h)
		want[h] = true
	}
	if s.n != len(want) {
		t.Fatalf("n = %d, want %d", s.n, len(want))
	}
	for h := range want {
		if !s.has(h) {
			t.Fatalf("lost %d", h)
		}
	}
	if s.has(12345) || s.has(^uint64(0)) {
		t.Error("has a value never added")
	}
	got := s.appendTo(nil)
	if len(got) != len(want) {
		t.Errorf("appendTo gave %d values, want %d", len(got), len(want))
	}
	var empty hashSet
	if empty.has(0) || empty.has(1) || len(empty.appendTo(nil)) != 0 {
		t.Error("the empty set has values")
	}
}
