package store

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	"slices"
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
	if w.size() != maxDaySetIPs || len(raw) != 1+4*maxDaySetIPs || !decodeDaySet(raw).has(uint64(maxDaySetIPs-1)) {
		t.Errorf("set of %d, %d bytes", w.size(), len(raw))
	}
	for _, bad := range [][]byte{{1, 2, 3}, {setVersion32, 1, 2}, {0x21, 1, 2, 3, 4}, {1, 2, 3, 4, 5}} {
		if decodeDaySet(bad).size() != 0 {
			t.Errorf("the damaged value %x decoded to a set", bad)
		}
	}
}

// TestDaySetOldForm ensures a set of 8-byte hashes, as files before schema
// 10 hold, reads as their top halves: the sources it holds are still seen,
// and written back it takes 4 bytes a source.
func TestDaySetOldForm(t *testing.T) {
	fnv := func(ip string) uint64 { // the 64-bit hash schema 9 stored
		h := uint64(14695981039346656037)
		for i := 0; i < len(ip); i++ {
			h ^= uint64(ip[i])
			h *= 1099511628211
		}
		return h
	}
	ips := []string{"192.0.2.1", "2001:db8::1", "198.51.100.7", "203.0.113.200"}
	var old []uint64
	for _, ip := range ips {
		old = append(old, fnv(ip))
	}
	slices.Sort(old)
	var raw []byte
	for _, h := range old {
		raw = binary.BigEndian.AppendUint64(raw, h)
	}
	s := decodeDaySet(raw)
	for _, ip := range ips {
		if !s.has(hashIP(ip)) {
			t.Errorf("%s not seen in the old set", ip)
		}
	}
	if s.has(hashIP("192.0.2.2")) {
		t.Error("an unknown source seen in the old set")
	}
	c := s.clone()
	c.add(hashIP("192.0.2.2"))
	w, out := c.written()
	if len(out) != 1+4*(len(ips)+1) || out[0] != setVersion32 {
		t.Fatalf("written back as %d bytes %x", len(out), out[:1])
	}
	again := decodeDaySet(out)
	for _, ip := range append(ips, "192.0.2.2") {
		if !w.has(hashIP(ip)) || !again.has(hashIP(ip)) {
			t.Errorf("%s lost in the rewritten set", ip)
		}
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
