package block

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

// randTable makes n entries of time-ordered ids (a few sharing their
// first half) and values of random lengths, some empty.
func randTable(r *rand.Rand, n int) []TableEntry {
	out := make([]TableEntry, n)
	ms := uint64(1_700_000_000_000)
	for i := range out {
		if r.IntN(3) != 0 {
			ms += uint64(r.IntN(5000))
		}
		var id [16]byte
		binary.BigEndian.PutUint64(id[:8], ms<<16|0x7000|uint64(r.IntN(4)))
		binary.BigEndian.PutUint64(id[8:], r.Uint64())
		val := make([]byte, r.IntN(300))
		for j := range val {
			val[j] = byte(r.IntN(8)) // compressible, as reports are
		}
		out[i] = TableEntry{ID: id, Val: val}
	}
	return out
}

func checkTable(t *testing.T, entries []TableEntry) *Table {
	t.Helper()
	want := map[[16]byte][]byte{}
	for _, e := range entries {
		want[e.ID] = e.Val
	}
	enc, err := EncodeTable([]byte{9}, slices.Clone(entries))
	if err != nil {
		t.Fatal(err)
	}
	if enc[0] != 9 {
		t.Fatal("EncodeTable did not append to dst")
	}
	tab, err := DecodeTable(enc[1:])
	if err != nil {
		t.Fatal(err)
	}
	if tab.Len() != len(want) {
		t.Fatalf("%d entries, want %d", tab.Len(), len(want))
	}
	tag, err := Tag(enc[1:])
	if err != nil || tag != tab.Tag() {
		t.Fatalf("Tag %x %v, decoded %x", tag, err, tab.Tag())
	}
	for i := range tab.Len() {
		if a, b := tab.ID(max(i-1, 0)), tab.ID(i); i > 0 && bytes.Compare(a[:], b[:]) >= 0 {
			t.Fatalf("ids out of order at %d", i)
		}
	}
	for id, v := range want {
		got, ok := tab.Get(id)
		if !ok || !bytes.Equal(got, v) {
			t.Fatalf("Get(%x) = %x, %v; want %x", id, got, ok, v)
		}
	}
	var absent [16]byte
	absent[0] = 0xff
	if _, ok := tab.Get(absent); ok {
		t.Fatal("Get of an absent id found it")
	}
	return tab
}

// TestTableRoundTrip ensures every value comes back under its id, empty
// tables and values included, and that two tables of the same entries
// have different tags.
func TestTableRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for _, n := range []int{0, 1, 2, 17, 1000} {
		checkTable(t, randTable(r, n))
	}
	e := randTable(r, 5)
	a, b := checkTable(t, e), checkTable(t, e)
	if a.Tag() == b.Tag() {
		t.Fatal("two tables share a tag")
	}
	// Entries given in any order; ids equal in their first half.
	e = randTable(r, 50)
	for i := range e {
		binary.BigEndian.PutUint64(e[i].ID[:8], 42)
	}
	r.Shuffle(len(e), func(i, j int) { e[i], e[j] = e[j], e[i] })
	checkTable(t, e)
	e = append(e, TableEntry{ID: e[3].ID})
	if _, err := EncodeTable(nil, e); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("duplicate id: %v", err)
	}
}

// TestTableCorrupt ensures truncated, damaged and foreign values are
// errors wrapping ErrCorrupt, and damaged payloads (under a good
// checksum) are errors or tables that still hold together, never panics.
func TestTableCorrupt(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	enc, err := EncodeTable(nil, randTable(r, 20))
	if err != nil {
		t.Fatal(err)
	}
	for i := range enc {
		if _, err := DecodeTable(enc[:i]); !errors.Is(err, ErrCorrupt) {
			t.Errorf("truncated to %d: %v", i, err)
		}
	}
	for i := range enc {
		b := slices.Clone(enc)
		b[i] ^= 0x10
		if _, err := DecodeTable(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("byte %d changed: %v", i, err)
		}
	}
	if _, err := DecodeTable(append(slices.Clone(enc), 0)); !errors.Is(err, ErrCorrupt) {
		t.Error("trailing byte accepted")
	}
	recs, err := Encode(nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeTable(recs); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a block of records read as a table: %v", err)
	}
	if _, err := Tag(recs); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Tag of a block of records: %v", err)
	}
	h, p, err := open(enc, kindTable)
	if err != nil {
		t.Fatal(err)
	}
	n := int(h[TagLen])
	for i := range p {
		_, _ = decodeTablePayload(p[:i], n)
		for _, x := range []byte{0, 1, 0x7f, 0x80, 0xff} {
			q := slices.Clone(p)
			q[i] = x
			if tab, err := decodeTablePayload(q, n); err == nil {
				for j := range tab.Len() {
					_, _ = tab.Get(tab.ID(j))
				}
			}
		}
	}
	for _, m := range []int{0, n - 1, n + 1, 1 << 30} {
		if _, err := decodeTablePayload(p, m); !errors.Is(err, ErrCorrupt) {
			t.Errorf("payload read as %d entries: %v", m, err)
		}
	}
}

// FuzzTable ensures no input makes the table decoder panic, and that a
// table it accepts answers Get for each of its ids.
func FuzzTable(f *testing.F) {
	r := rand.New(rand.NewPCG(5, 5))
	enc, _ := EncodeTable(nil, randTable(r, 4))
	f.Add(enc)
	_, p, _ := open(enc, kindTable)
	f.Add(p)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if tab, err := DecodeTable(b); err == nil {
			for i := range tab.Len() {
				if _, ok := tab.Get(tab.ID(i)); !ok {
					t.Fatalf("entry %d not found by its id", i)
				}
			}
		}
		_, _ = Tag(b)
		for _, n := range []int{0, 1, 4} {
			if tab, err := decodeTablePayload(b, n); err == nil {
				for i := range tab.Len() {
					if _, ok := tab.Get(tab.ID(i)); !ok {
						t.Fatalf("payload entry %d not found by its id", i)
					}
				}
			}
		}
	})
}
