package block

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
)

// kindTable is the kind of a value table (EncodeTable).
const kindTable = 'V'

// TagLen is the length of a table's tag.
const TagLen = 16

// TableEntry is one value of a table, under a 16-byte id.
type TableEntry struct {
	ID  [16]byte
	Val []byte
}

// ErrDuplicate is returned by EncodeTable for two entries of one id.
var ErrDuplicate = errors.New("block: duplicate id in table")

// EncodeTable appends to dst a table of values by id (opaque bytes: the
// store gives its encoded reports), compressed as one zstd frame. The
// header carries a random tag, different for every table written, so
// that a cache can tell a table from another stored later under the same
// key by reading Tag alone. entries is sorted by id in place; two of the
// same id are ErrDuplicate.
func EncodeTable(dst []byte, entries []TableEntry) ([]byte, error) {
	slices.SortFunc(entries, func(a, b TableEntry) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	for i := 1; i < len(entries); i++ {
		if entries[i].ID == entries[i-1].ID {
			return nil, ErrDuplicate
		}
	}
	var hdr []byte
	hdr = binary.LittleEndian.AppendUint64(hdr, rand.Uint64())
	hdr = binary.LittleEndian.AppendUint64(hdr, rand.Uint64())
	hdr = binary.AppendUvarint(hdr, uint64(len(entries)))
	// Columns: the ids' first halves as differences (UUIDv7 ids are
	// time-ordered, and sorted here), their second halves, the lengths,
	// then the values back to back.
	var hi, lo, lens col
	size := 0
	prev := uint64(0)
	for _, e := range entries {
		h := binary.BigEndian.Uint64(e.ID[:8])
		hi.uv(h - prev)
		prev = h
		lo = append(lo, e.ID[8:]...)
		lens.uv(uint64(len(e.Val)))
		size += len(e.Val)
	}
	p := make([]byte, 0, len(hi)+len(lo)+len(lens)+size+16)
	p = appendCols(p, []col{hi, lo, lens})
	for _, e := range entries {
		p = append(p, e.Val...)
	}
	return seal(dst, kindTable, hdr, p), nil
}

// Tag returns the tag of a table, checking its header only (no
// decompression).
func Tag(b []byte) ([TagLen]byte, error) {
	var tag [TagLen]byte
	h, _, err := openHeader(b, kindTable)
	if err != nil {
		return tag, err
	}
	if len(h) < TagLen {
		return tag, corrupt("table header")
	}
	copy(tag[:], h)
	return tag, nil
}

// Table is a decoded value table: immutable, safe for concurrent reads.
type Table struct {
	tag  [TagLen]byte
	hi   []uint64 // the ids' first and last 8 bytes, ascending
	lo   []uint64
	ends []uint32 // ends[i] is the end of value i in data
	data []byte
}

// DecodeTable reads what EncodeTable wrote. A table that does not decode
// is an error wrapping ErrCorrupt.
func DecodeTable(b []byte) (*Table, error) {
	h, p, err := open(b, kindTable)
	if err != nil {
		return nil, err
	}
	hr := rd{b: h}
	tagb := hr.bytes(TagLen)
	n := hr.count(0)
	if hr.bad || len(hr.b) != 0 {
		return nil, corrupt("table header")
	}
	t, err := decodeTablePayload(p, n)
	if err != nil {
		return nil, err
	}
	copy(t.tag[:], tagb)
	return t, nil
}

func decodeTablePayload(p []byte, n int) (*Table, error) {
	r := rd{b: p}
	hi, lo, lens := r.sub(), r.sub(), r.sub()
	if r.bad || uint64(n) > uint64(len(lo.b))/8 || len(lo.b) != 8*n {
		return nil, corrupt("table of %d entries", n)
	}
	t := &Table{hi: make([]uint64, n), lo: make([]uint64, n), ends: make([]uint32, n), data: r.b}
	prev := uint64(0)
	end := uint64(0)
	for i := range n {
		d := hi.uv()
		h := prev + d
		l := binary.BigEndian.Uint64(lo.bytes(8))
		if i > 0 && d == 0 && l <= t.lo[i-1] || h < prev {
			return nil, corrupt("table ids out of order at %d", i)
		}
		prev = h
		t.hi[i], t.lo[i] = h, l
		end += lens.uv()
		if end > uint64(len(t.data)) {
			return nil, corrupt("table value %d past the end", i)
		}
		t.ends[i] = uint32(end)
	}
	if hi.bad || lens.bad || len(hi.b) != 0 || len(lens.b) != 0 || end != uint64(len(t.data)) {
		return nil, corrupt("table columns")
	}
	return t, nil
}

// Tag is the table's tag (see EncodeTable).
func (t *Table) Tag() [TagLen]byte { return t.tag }

// Len is the number of entries.
func (t *Table) Len() int { return len(t.hi) }

// Size is about the memory the table holds, for cache accounting.
func (t *Table) Size() int { return len(t.data) + 20*len(t.hi) + 64 }

// ID is the id of entry i, in ascending order.
func (t *Table) ID(i int) [16]byte {
	var id [16]byte
	binary.BigEndian.PutUint64(id[:8], t.hi[i])
	binary.BigEndian.PutUint64(id[8:], t.lo[i])
	return id
}

// Get returns the value of id, shared (read-only), and whether the table
// has it.
func (t *Table) Get(id [16]byte) ([]byte, bool) {
	h, l := binary.BigEndian.Uint64(id[:8]), binary.BigEndian.Uint64(id[8:])
	i, j := 0, len(t.hi)
	for i < j {
		m := int(uint(i+j) >> 1)
		if t.hi[m] < h || t.hi[m] == h && t.lo[m] < l {
			i = m + 1
		} else {
			j = m
		}
	}
	if i == len(t.hi) || t.hi[i] != h || t.lo[i] != l {
		return nil, false
	}
	start := uint32(0)
	if i > 0 {
		start = t.ends[i-1]
	}
	return t.data[start:t.ends[i]:t.ends[i]], true
}
