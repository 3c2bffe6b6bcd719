package store

import (
	"encoding/binary"
	"errors"
	"math"
	"time"
)

// Reports, records and roll-ups are stored in a compact binary form rather
// than JSON: a large report has a million records, and statistics and CSV
// exports decode them in bulk. Every value starts with a format version
// byte, so that a later layout can be told apart (and migrated).
//
// Primitives: integers are varints; a string is uvarint length + bytes; an
// optional string is 0 (nil) or 1 followed by the string; a "symbol" (an
// enumerated value such as "pass") is one byte indexing symbols, or 0
// followed by the string when it is not in the table.

// codecVersion is the first byte of every value written here.
const codecVersion = 1

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

// errCorrupt reports a stored value that does not decode.
var errCorrupt = errors.New("store: corrupt stored value")

type enc []byte

func (e enc) uvarint(v uint64) enc { return binary.AppendUvarint(e, v) }
func (e enc) varint(v int64) enc   { return binary.AppendVarint(e, v) }

func (e enc) str(s string) enc {
	e = binary.AppendUvarint(e, uint64(len(s)))
	return append(e, s...)
}

func (e enc) opt(s *string) enc {
	if s == nil {
		return append(e, 0)
	}
	return append(e, 1).str(*s)
}

func (e enc) sym(s string) enc {
	if i := symbolOf(s); i != 0 {
		return append(e, i)
	}
	return append(e, 0).str(s)
}

func (e enc) f64(f float64) enc { return binary.LittleEndian.AppendUint64(e, math.Float64bits(f)) }

func (e enc) optU32(v *uint32) enc {
	if v == nil {
		return append(e, 0)
	}
	return append(e, 1).uvarint(uint64(*v))
}

func (e enc) time(t time.Time) enc {
	if t.IsZero() {
		return e.varint(math.MinInt64)
	}
	return e.varint(t.Unix())
}

// dec reads what enc wrote. The first failure sticks: later reads return
// zero values and ok reports false, so decoders check once at the end.
//
// A decoder made by newStringDec copies the value into one string and
// returns substrings of it, and hands out optional strings from one slab:
// a record then costs a few allocations instead of one per field.
type dec struct {
	b    []byte
	bad  bool
	s    string   // the whole value, when set
	n    int      // len of the whole value
	slab []string // backing store of optional strings
}

func newStringDec(raw []byte) *dec {
	return &dec{b: raw, s: string(raw), n: len(raw)}
}

func (d *dec) ok() bool { return !d.bad }

func (d *dec) fail() { d.bad, d.b = true, nil }

func (d *dec) byte() byte {
	if len(d.b) == 0 {
		d.fail()
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *dec) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a length that must fit in what is left (each item takes at
// least one byte), so a corrupt value cannot make us allocate gigabytes.
func (d *dec) count() int {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return 0
	}
	return int(n)
}

func (d *dec) str() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
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

func (d *dec) opt() *string {
	if d.byte() == 0 {
		return nil
	}
	return d.ptr(d.str())
}

// ptr returns a pointer to a copy of s, from the slab when there is one.
func (d *dec) ptr(s string) *string {
	if d.s == "" {
		return &s
	}
	if len(d.slab) == cap(d.slab) {
		d.slab = make([]string, 0, 8)
	}
	d.slab = append(d.slab, s)
	return &d.slab[len(d.slab)-1]
}

func (d *dec) sym() string {
	i := d.byte()
	if i == 0 {
		return d.str()
	}
	if int(i) > len(symbols) {
		d.fail()
		return ""
	}
	return symbols[i-1]
}

func (d *dec) f64() float64 {
	if len(d.b) < 8 {
		d.fail()
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.b))
	d.b = d.b[8:]
	return v
}

func (d *dec) optU32() *uint32 {
	if d.byte() == 0 {
		return nil
	}
	v := d.uvarint()
	if v > math.MaxUint32 {
		d.fail()
	}
	u := uint32(v)
	return &u
}

func (d *dec) time() time.Time {
	s := d.varint()
	if s == math.MinInt64 {
		return time.Time{}
	}
	return time.Unix(s, 0).UTC()
}

// Geo presence bits of an encoded record.
const (
	geoPresent = 1 << iota
	geoCountryCode
	geoCountryName
	geoCity
	geoLatitude
	geoLongitude
	geoASN
	geoASOrg
)

// appendRecord encodes r (its DMARC field is derived, not stored).
func appendRecord(dst []byte, r *Record) []byte {
	e := enc(dst)
	e = append(e, codecVersion)
	e = e.str(r.SourceIP).varint(r.Count).sym(r.Disposition).sym(string(r.DKIM)).sym(string(r.SPF))
	e = e.str(r.HeaderFrom).opt(r.EnvelopeFrom).opt(r.EnvelopeTo)
	e = e.uvarint(uint64(len(r.Reasons)))
	for i := range r.Reasons {
		e = e.sym(r.Reasons[i].Type).opt(r.Reasons[i].Comment)
	}
	e = e.uvarint(uint64(len(r.AuthResults.DKIM)))
	for i := range r.AuthResults.DKIM {
		a := &r.AuthResults.DKIM[i]
		e = e.str(a.Domain).opt(a.Selector).sym(a.Result)
	}
	e = e.uvarint(uint64(len(r.AuthResults.SPF)))
	for i := range r.AuthResults.SPF {
		a := &r.AuthResults.SPF[i]
		e = e.str(a.Domain).opt(a.Scope).sym(a.Result)
	}
	return appendGeo(e, r.Geo)
}

func appendGeo(e enc, g *Geo) enc {
	if g == nil {
		return append(e, 0)
	}
	var flags byte = geoPresent
	for _, f := range []struct {
		set bool
		bit byte
	}{
		{g.CountryCode != nil, geoCountryCode}, {g.CountryName != nil, geoCountryName},
		{g.City != nil, geoCity}, {g.Latitude != nil, geoLatitude},
		{g.Longitude != nil, geoLongitude}, {g.ASN != nil, geoASN}, {g.ASOrg != nil, geoASOrg},
	} {
		if f.set {
			flags |= f.bit
		}
	}
	e = append(e, flags)
	if g.CountryCode != nil {
		e = e.str(*g.CountryCode)
	}
	if g.CountryName != nil {
		e = e.str(*g.CountryName)
	}
	if g.City != nil {
		e = e.str(*g.City)
	}
	if g.Latitude != nil {
		e = e.f64(*g.Latitude)
	}
	if g.Longitude != nil {
		e = e.f64(*g.Longitude)
	}
	if g.ASN != nil {
		e = e.uvarint(uint64(*g.ASN))
	}
	if g.ASOrg != nil {
		e = e.str(*g.ASOrg)
	}
	return e
}

// decodeBlock calls fn for each record of a block value: a version byte,
// then each record as uvarint length + appendRecord bytes. The records'
// strings share one copy of the block.
func decodeBlock(raw []byte, fn func(*Record) error) error {
	d := newStringDec(raw)
	if d.byte() != codecVersion {
		return errCorrupt
	}
	for len(d.b) > 0 {
		n := d.uvarint()
		if !d.ok() || n > uint64(len(d.b)) {
			return errCorrupt
		}
		start := d.n - len(d.b)
		sub := &dec{b: d.b[:n], s: d.s[start : start+int(n)], n: int(n), slab: d.slab}
		r, err := decodeRecordFrom(sub)
		if err != nil {
			return err
		}
		d.b, d.slab = d.b[n:], sub.slab
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// decodeRecordFrom decodes one record, which must fill d exactly.
func decodeRecordFrom(d *dec) (*Record, error) {
	if d.byte() != codecVersion {
		return nil, errCorrupt
	}
	r := &Record{SourceIP: d.str(), Count: d.varint(), Disposition: d.sym(), DKIM: Verdict(d.sym()), SPF: Verdict(d.sym())}
	r.HeaderFrom, r.EnvelopeFrom, r.EnvelopeTo = d.str(), d.opt(), d.opt()
	r.Reasons = make([]Reason, d.count())
	for i := range r.Reasons {
		r.Reasons[i] = Reason{Type: d.sym(), Comment: d.opt()}
	}
	r.AuthResults.DKIM = make([]DKIMAuth, d.count())
	for i := range r.AuthResults.DKIM {
		r.AuthResults.DKIM[i] = DKIMAuth{Domain: d.str(), Selector: d.opt(), Result: d.sym()}
	}
	r.AuthResults.SPF = make([]SPFAuth, d.count())
	for i := range r.AuthResults.SPF {
		r.AuthResults.SPF[i] = SPFAuth{Domain: d.str(), Scope: d.opt(), Result: d.sym()}
	}
	r.Geo = decodeGeo(d)
	if !d.ok() || len(d.b) != 0 {
		return nil, errCorrupt
	}
	dkim, spf, derived := r.aligned()
	r.DMARC, r.DMARCDerived = dmarcResult(verdictOf(dkim), verdictOf(spf)), derived
	return r, nil
}

// verdictOf is "pass" for a pass, else "".
func verdictOf(pass bool) string {
	if pass {
		return "pass"
	}
	return ""
}

func decodeGeo(d *dec) *Geo {
	flags := d.byte()
	if flags&geoPresent == 0 {
		return nil
	}
	// One allocation for the object and its numbers.
	var box struct {
		g        Geo
		lat, lon float64
		asn      uint32
	}
	b := &box
	g := &b.g
	if flags&geoCountryCode != 0 {
		g.CountryCode = d.ptr(d.str())
	}
	if flags&geoCountryName != 0 {
		g.CountryName = d.ptr(d.str())
	}
	if flags&geoCity != 0 {
		g.City = d.ptr(d.str())
	}
	if flags&geoLatitude != 0 {
		b.lat = d.f64()
		g.Latitude = &b.lat
	}
	if flags&geoLongitude != 0 {
		b.lon = d.f64()
		g.Longitude = &b.lon
	}
	if flags&geoASN != 0 {
		v := d.uvarint()
		if v > math.MaxUint32 {
			d.fail()
		}
		b.asn = uint32(v)
		g.ASN = &b.asn
	}
	if flags&geoASOrg != 0 {
		g.ASOrg = d.ptr(d.str())
	}
	return g
}

// dmarcResult is "pass" when the evaluated DKIM or SPF result passed.
func dmarcResult[T ~string](dkim, spf T) string {
	if dkim == "pass" || spf == "pass" {
		return "pass"
	}
	return "fail"
}
