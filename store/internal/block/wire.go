package block

import (
	"cmp"
	"encoding/binary"
	"math"
	"slices"
)

// dict numbers the strings of a block. Strings are counted first (add),
// then numbered by how often they are used, most first (freeze), so that
// the common ones ("pass", the domain) take a one-byte reference.
type dict struct {
	count map[string]int
	ref   map[string]uint64
	list  []string
}

func newDict() *dict { return &dict{count: make(map[string]int)} }

func (d *dict) add(s string) { d.count[s]++ }

func (d *dict) addOpt(s *string) {
	if s != nil {
		d.count[*s]++
	}
}

func (d *dict) freeze() {
	d.list = make([]string, 0, len(d.count))
	for s := range d.count {
		d.list = append(d.list, s)
	}
	slices.SortFunc(d.list, func(a, b string) int {
		if c := cmp.Compare(d.count[b], d.count[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	d.ref = make(map[string]uint64, len(d.list))
	for i, s := range d.list {
		d.ref[s] = uint64(i + 1)
	}
}

// of is the reference of s: k for the k-th string (0 is nil).
func (d *dict) of(s string) uint64 { return d.ref[s] }

func (d *dict) opt(s *string) uint64 {
	if s == nil {
		return 0
	}
	return d.ref[*s]
}

// appendTo writes the table: its length, then each string.
func (d *dict) appendTo(b []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(d.list)))
	for _, s := range d.list {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

// col is a column being written.
type col []byte

func (c *col) uv(v uint64) { *c = binary.AppendUvarint(*c, v) }
func (c *col) sv(v int64)  { *c = binary.AppendVarint(*c, v) }
func (c *col) b(v byte)    { *c = append(*c, v) }

// appendCols writes each column as its length and bytes.
func appendCols(b []byte, cols []col) []byte {
	for _, c := range cols {
		b = binary.AppendUvarint(b, uint64(len(c)))
		b = append(b, c...)
	}
	return b
}

// rd reads a payload or a column. The first failure sticks: later reads
// return zero values, so a decoder checks ok once it is done.
type rd struct {
	b   []byte
	bad bool
}

func (r *rd) fail() { r.bad, r.b = true, nil }

func (r *rd) uv() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *rd) sv() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *rd) byte1() byte {
	if len(r.b) == 0 {
		r.fail()
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *rd) bytes(n uint64) []byte {
	if n > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	s := r.b[:n]
	r.b = r.b[n:]
	return s
}

// f64 reads 8 bytes little-endian as a float's bits.
func (r *rd) f64() float64 {
	b := r.bytes(8)
	if b == nil {
		return 0
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(b))
}

// count reads a length of items that each take at least min bytes of
// what is left, so that a corrupt count cannot make a decoder allocate
// more than the payload justifies.
func (r *rd) count(min uint64) int {
	n := r.uv()
	if min > 0 && n > uint64(len(r.b))/min {
		r.fail()
		return 0
	}
	if n > 1<<31 {
		r.fail()
		return 0
	}
	return int(n)
}

// sub reads a column: its length and bytes.
func (r *rd) sub() rd { return rd{b: r.bytes(r.uv()), bad: r.bad} }

// strTable is a decoded dictionary: each string once, and ptrs[k] points
// at the k-th (ptrs[0] is nil), so records with the same optional string
// share one pointer.
type strTable struct {
	strs []string
	ptrs []*string
}

func readStrTable(r *rd) strTable {
	n := r.count(1)
	t := strTable{strs: make([]string, n+1), ptrs: make([]*string, n+1)}
	for i := 1; i <= n; i++ {
		t.strs[i] = string(r.bytes(r.uv()))
		t.ptrs[i] = &t.strs[i]
	}
	return t
}

// str reads a reference to a string that must be there.
func (t *strTable) str(r *rd) string {
	k := r.uv()
	if k == 0 || k >= uint64(len(t.strs)) {
		r.fail()
		return ""
	}
	return t.strs[k]
}

// opt reads a reference to an optional string.
func (t *strTable) opt(r *rd) *string {
	k := r.uv()
	if k >= uint64(len(t.ptrs)) {
		r.fail()
		return nil
	}
	return t.ptrs[k]
}
