// Package codec is the binary layout of the values the store writes and
// reads by the hundred thousand (reports, records, roll-ups): integers as
// varints, strings as their length and bytes, optional values behind a
// presence byte, and the enumerated values reports repeat ("pass",
// "none"...) as one-byte symbols. It is pure: an Enc appends to a byte
// slice, a Dec reads one back. What the store builds of these is in
// package reports; which buckets hold it, in store/schema.go.
//
// Primitives: integers are varints; a string is uvarint length + bytes; an
// optional string is 0 (nil) or 1 followed by the string; a "symbol" (an
// enumerated value such as "pass") is one byte indexing symbols, or 0
// followed by the string when it is not in the table. The order of the
// symbols is part of the stored format.
package codec

import (
	"encoding/binary"
	"errors"
	"math"
	"net/netip"
	"time"
)

// Version is the first byte of every value written with this layout, so
// that a later layout can be told apart (and migrated).
const Version = 1

// ErrCorrupt reports a stored value that does not decode.
var ErrCorrupt = errors.New("store: corrupt stored value")

// symbols are the enumerated values reports repeat on every record. The
// order is part of the stored format: append only.
var symbols = [...]string{
	"", "none", "pass", "fail", "quarantine", "reject", "softfail", "neutral",
	"temperror", "permerror", "policy", "mfrom", "helo", "forwarded",
	"local_policy", "mailing_list", "other", "sampled_out", "trusted_forwarder",
	"r", "s", "unknown",
}

// symbolTable finds a symbol by its length and first letter, which tell
// every one of them apart: a lookup per field of every record written
// costs one comparison, not a map's hash. collision marks a slot two
// symbols would share (none today), which then falls back to comparing
// with each.
var symbolTable = func() (t [24]['z' - 'a' + 1]byte) {
	for i, s := range symbols[1:] {
		slot := &t[len(s)][s[0]-'a']
		if *slot != 0 {
			*slot = collision
			continue
		}
		*slot = byte(i + 2)
	}
	return t
}()

const collision = 0xff

// symbolOf returns the index of s in symbols plus one, or 0 when s is no
// symbol.
func symbolOf(s string) byte {
	if s == "" {
		return 1
	}
	if len(s) >= len(symbolTable) || s[0] < 'a' || s[0] > 'z' {
		return 0
	}
	i := symbolTable[len(s)][s[0]-'a']
	switch {
	case i == 0:
		return 0
	case i == collision:
		for k, sym := range symbols {
			if sym == s {
				return byte(k + 1)
			}
		}
		return 0
	case symbols[i-1] == s:
		return i
	}
	return 0
}

// Enc is a value being encoded: each method appends one item and returns
// the longer slice, as append does.
type Enc []byte

// Uvarint appends v.
func (e Enc) Uvarint(v uint64) Enc { return binary.AppendUvarint(e, v) }

// Varint appends v.
func (e Enc) Varint(v int64) Enc { return binary.AppendVarint(e, v) }

// Str appends s: its length and bytes.
func (e Enc) Str(s string) Enc {
	e = binary.AppendUvarint(e, uint64(len(s)))
	return append(e, s...)
}

// Opt appends an optional string.
func (e Enc) Opt(s *string) Enc {
	if s == nil {
		return append(e, 0)
	}
	return append(e, 1).Str(*s)
}

// Sym appends s as a symbol: one byte when it is in the table.
func (e Enc) Sym(s string) Enc {
	if i := symbolOf(s); i != 0 {
		return append(e, i)
	}
	return append(e, 0).Str(s)
}

// F64 appends f, 8 bytes little-endian.
func (e Enc) F64(f float64) Enc { return binary.LittleEndian.AppendUint64(e, math.Float64bits(f)) }

// OptU32 appends an optional number.
func (e Enc) OptU32(v *uint32) Enc {
	if v == nil {
		return append(e, 0)
	}
	return append(e, 1).Uvarint(uint64(*v))
}

// Time appends t in Unix seconds; the zero time has a value of its own.
func (e Enc) Time(t time.Time) Enc {
	if t.IsZero() {
		return e.Varint(math.MinInt64)
	}
	return e.Varint(t.Unix())
}

// Strs appends a list of strings: its length, then each.
func (e Enc) Strs(list []string) Enc {
	e = e.Uvarint(uint64(len(list)))
	for _, s := range list {
		e = e.Str(s)
	}
	return e
}

// Addr appends a source address: its 4 or 16 bytes when it is an address
// in the form netip writes it (as every one stored is), else its text; ""
// (no address) is one byte.
func (e Enc) Addr(ip string) Enc {
	if ip == "" {
		return append(e, 0)
	}
	a, err := netip.ParseAddr(ip)
	switch {
	case err != nil || a.Zone() != "":
	case a.Is4():
		b := a.As4()
		return append(append(e, 4), b[:]...)
	case a.String() == ip:
		b := a.As16()
		return append(append(e, 16), b[:]...)
	}
	return append(e, 0xff).Str(ip)
}

// Dec reads what Enc wrote. The first failure sticks: later reads return
// zero values and Ok reports false, so decoders check once at the end.
//
// A decoder made by NewStringDec copies the value into one string and
// returns substrings of it, and hands out optional strings from one slab:
// a record then costs a few allocations instead of one per field.
type Dec struct {
	b    []byte
	bad  bool
	s    string   // the whole value, when set
	n    int      // len of the whole value
	slab []string // backing store of optional strings
}

// NewDec returns a decoder of raw whose strings are copied one by one.
func NewDec(raw []byte) Dec { return Dec{b: raw} }

// NewStringDec returns a decoder of raw whose strings share one copy of
// it.
func NewStringDec(raw []byte) Dec { return Dec{b: raw, s: string(raw), n: len(raw)} }

// Ok reports whether every read so far succeeded.
func (d *Dec) Ok() bool { return !d.bad }

// Fail marks the value corrupt.
func (d *Dec) Fail() { d.bad, d.b = true, nil }

// Len returns how many bytes are left.
func (d *Dec) Len() int { return len(d.b) }

// Done reports whether every read succeeded and nothing is left.
func (d *Dec) Done() bool { return !d.bad && len(d.b) == 0 }

// Byte reads one byte.
func (d *Dec) Byte() byte {
	if len(d.b) == 0 {
		d.Fail()
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// Uvarint reads what Enc.Uvarint wrote.
func (d *Dec) Uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.Fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

// Varint reads what Enc.Varint wrote.
func (d *Dec) Varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.Fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

// Count reads a length that must fit in what is left (each item takes at
// least one byte), so a corrupt value cannot make us allocate gigabytes.
func (d *Dec) Count() int {
	n := d.Uvarint()
	if n > uint64(len(d.b)) {
		d.Fail()
		return 0
	}
	return int(n)
}

// Str reads what Enc.Str wrote.
func (d *Dec) Str() string {
	n := d.Uvarint()
	if n > uint64(len(d.b)) {
		d.Fail()
		return ""
	}
	var s string
	if d.s != "" {
		start := d.n - len(d.b)
		s = d.s[start : start+int(n)]
	} else {
		s = string(d.b[:n])
	}
	d.b = d.b[n:]
	return s
}

// RawStr reads what Enc.Str wrote as bytes of the value, without copying:
// they are valid as long as the value is.
func (d *Dec) RawStr() []byte {
	n := d.Uvarint()
	if n > uint64(len(d.b)) {
		d.Fail()
		return nil
	}
	s := d.b[:n]
	d.b = d.b[n:]
	return s
}

// Opt reads what Enc.Opt wrote.
func (d *Dec) Opt() *string {
	if d.Byte() == 0 {
		return nil
	}
	return d.Ptr(d.Str())
}

// RawOpt reads what Enc.Opt wrote as RawStr does; nil when absent.
func (d *Dec) RawOpt() []byte {
	if d.Byte() == 0 {
		return nil
	}
	if s := d.RawStr(); s != nil {
		return s
	}
	return []byte{}
}

// Ptr returns a pointer to a copy of s, from the slab when there is one.
func (d *Dec) Ptr(s string) *string {
	if d.s == "" {
		return &s
	}
	if len(d.slab) == cap(d.slab) {
		d.slab = make([]string, 0, 8)
	}
	d.slab = append(d.slab, s)
	return &d.slab[len(d.slab)-1]
}

// Sym reads what Enc.Sym wrote.
func (d *Dec) Sym() string {
	i := d.Byte()
	if i == 0 {
		return d.Str()
	}
	if int(i) > len(symbols) {
		d.Fail()
		return ""
	}
	return symbols[i-1]
}

// F64 reads what Enc.F64 wrote.
func (d *Dec) F64() float64 {
	if len(d.b) < 8 {
		d.Fail()
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.b))
	d.b = d.b[8:]
	return v
}

// OptU32 reads what Enc.OptU32 wrote.
func (d *Dec) OptU32() *uint32 {
	if d.Byte() == 0 {
		return nil
	}
	v := d.Uvarint()
	if v > math.MaxUint32 {
		d.Fail()
	}
	u := uint32(v)
	return &u
}

// Time reads what Enc.Time wrote, in UTC.
func (d *Dec) Time() time.Time {
	s := d.Varint()
	if s == math.MinInt64 {
		return time.Time{}
	}
	return time.Unix(s, 0).UTC()
}

// Strs reads what Enc.Strs wrote.
func (d *Dec) Strs() []string {
	out := make([]string, d.Count())
	for i := range out {
		out[i] = d.Str()
	}
	return out
}

// Addr reads what Enc.Addr wrote.
func (d *Dec) Addr() string { return d.AddrAfter(d.Byte()) }

// AddrAfter reads the rest of what Enc.Addr wrote once its tag byte is
// read (a caller that has tags of its own reads it).
func (d *Dec) AddrAfter(tag byte) string {
	switch tag {
	case 0:
		return ""
	case 4:
		if len(d.b) < 4 {
			d.Fail()
			return ""
		}
		a := netip.AddrFrom4([4]byte(d.b[:4]))
		d.b = d.b[4:]
		return a.String()
	case 16:
		if len(d.b) < 16 {
			d.Fail()
			return ""
		}
		a := netip.AddrFrom16([16]byte(d.b[:16]))
		d.b = d.b[16:]
		return a.String()
	case 0xff:
		return d.Str()
	}
	d.Fail()
	return ""
}

// Sub reads a uvarint length and returns a decoder of that many bytes,
// which shares d's copy of the value and its slab; false when they are
// not there (d then fails). Once sub is read, Adopt hands its slab back.
func (d *Dec) Sub() (sub Dec, ok bool) {
	n := d.Uvarint()
	if d.bad || n > uint64(len(d.b)) {
		d.Fail()
		return Dec{}, false
	}
	sub = Dec{b: d.b[:n], n: int(n), slab: d.slab}
	if d.s != "" {
		start := d.n - len(d.b)
		sub.s = d.s[start : start+int(n)]
	}
	d.b = d.b[n:]
	return sub, true
}

// Adopt takes back the slab of a decoder Sub made, so that the next one
// goes on filling it.
func (d *Dec) Adopt(sub *Dec) { d.slab = sub.slab }
