package codec

import (
	"bytes"
	"math"
	"reflect"
	"testing"
	"time"
)

// TestSymbolOf finds every symbol at its index, and nothing for strings
// that only look like one (same length and first letter, another case,
// longer than any).
func TestSymbolOf(t *testing.T) {
	for i, s := range symbols {
		if got := symbolOf(s); got != byte(i+1) {
			t.Errorf("symbolOf(%q) = %d, want %d", s, got, i+1)
		}
	}
	for _, s := range []string{"nope", "pasS", "Pass", "rejecT", "x", "permerrors", "trusted_forwarders_and_more", "ü", "0", "\xff"} {
		if got := symbolOf(s); got != 0 {
			t.Errorf("symbolOf(%q) = %d, want 0", s, got)
		}
	}
	// A record with a value that is no symbol still round-trips.
	e := Enc(nil).Sym("pass").Sym("Pass").Sym("")
	d := NewDec(e)
	if a, b, c := d.Sym(), d.Sym(), d.Sym(); a != "pass" || b != "Pass" || c != "" || !d.Done() {
		t.Errorf("decoded %q %q %q", a, b, c)
	}
	if len(e) != 1+1+len("Pass")+1+1 {
		t.Errorf("symbols take %d bytes, want one each", len(e))
	}
}

// sample is one value of every primitive, as a test writes them.
type sample struct {
	u     uint64
	i     int64
	s     string
	o, on *string
	sym   string
	f     float64
	n, nn *uint32
	t, tz time.Time
	list  []string
	ip4   string
	ip6   string
	ipTxt string
	none  string
}

func (v *sample) encode(e Enc) Enc {
	e = e.Uvarint(v.u).Varint(v.i).Str(v.s).Opt(v.o).Opt(v.on).Sym(v.sym).F64(v.f).OptU32(v.n).OptU32(v.nn)
	return e.Time(v.t).Time(v.tz).Strs(v.list).Addr(v.ip4).Addr(v.ip6).Addr(v.ipTxt).Addr(v.none)
}

func decodeSample(d *Dec) sample {
	return sample{u: d.Uvarint(), i: d.Varint(), s: d.Str(), o: d.Opt(), on: d.Opt(), sym: d.Sym(), f: d.F64(),
		n: d.OptU32(), nn: d.OptU32(), t: d.Time(), tz: d.Time(), list: d.Strs(),
		ip4: d.Addr(), ip6: d.Addr(), ipTxt: d.Addr(), none: d.Addr()}
}

func fullSample() sample {
	return sample{u: math.MaxUint64, i: math.MinInt64 + 1, s: "héllo", o: new("opt"), sym: "quarantine", f: -0.0931,
		n: new(uint32(math.MaxUint32)), t: time.Unix(1700000000, 0).UTC(), list: []string{"a", "", "c"},
		ip4: "192.0.2.1", ip6: "2001:db8::1", ipTxt: "::ffff:192.0.2.1", none: ""}
}

// TestRoundTrip ensures every primitive reads back what was written, with
// both kinds of decoder, and that the decoder ends exactly at the end.
func TestRoundTrip(t *testing.T) {
	want := fullSample()
	raw := want.encode(nil)
	for name, d := range map[string]Dec{"copying": NewDec(raw), "string": NewStringDec(raw)} {
		got := decodeSample(&d)
		if !d.Done() || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: decoded %+v (done %v)\nwant %+v", name, got, d.Done(), want)
		}
	}
}

// TestTruncated ensures every truncation of a value fails, sticks (later
// reads give zero values) and never panics.
func TestTruncated(t *testing.T) {
	v := fullSample()
	raw := v.encode(nil)
	for i := range raw {
		d := NewStringDec(raw[:i])
		decodeSample(&d)
		if d.Ok() {
			t.Errorf("truncated to %d of %d bytes: decoded", i, len(raw))
		}
		if d.Uvarint() != 0 || d.Str() != "" || d.Len() != 0 {
			t.Errorf("truncated to %d bytes: reads after the failure are not zero", i)
		}
	}
	// A length past the end fails instead of allocating.
	d := NewDec(Enc(nil).Uvarint(1 << 40))
	if n := d.Count(); n != 0 || d.Ok() {
		t.Errorf("Count of a huge length = %d, ok %v", n, d.Ok())
	}
	// A symbol index past the table fails.
	d = NewDec([]byte{byte(len(symbols) + 1)})
	if s := d.Sym(); s != "" || d.Ok() {
		t.Errorf("Sym past the table = %q, ok %v", s, d.Ok())
	}
	// An unknown address tag fails.
	d = NewDec([]byte{7})
	if a := d.Addr(); a != "" || d.Ok() {
		t.Errorf("Addr of tag 7 = %q, ok %v", a, d.Ok())
	}
}

// TestAddrForm ensures an address takes its bytes when netip writes it so
// and its text otherwise, so that what comes back is what went in.
func TestAddrForm(t *testing.T) {
	for ip, size := range map[string]int{"192.0.2.1": 5, "2001:db8::1": 17, "2001:DB8::1": 2 + len("2001:DB8::1"),
		"fe80::1%eth0": 2 + len("fe80::1%eth0"), "not an ip": 2 + len("not an ip"), "": 1} {
		raw := Enc(nil).Addr(ip)
		d := NewDec(raw)
		if got := d.Addr(); got != ip || !d.Done() || len(raw) != size {
			t.Errorf("%q: %q in %d bytes, want %d", ip, got, len(raw), size)
		}
	}
}

// TestSub ensures a sub-decoder reads its own bytes only, shares the
// value's string, and hands its slab back.
func TestSub(t *testing.T) {
	inner := Enc(nil).Opt(new("a")).Opt(new("b"))
	raw := Enc(nil).Uvarint(uint64(len(inner)))
	raw = append(raw, inner...)
	raw = raw.Str("after")
	d := NewStringDec(raw)
	sub, ok := d.Sub()
	if !ok {
		t.Fatal("Sub failed")
	}
	a, b := sub.Opt(), sub.Opt()
	if *a != "a" || *b != "b" || !sub.Done() {
		t.Fatalf("sub decoded %q %q, done %v", *a, *b, sub.Done())
	}
	d.Adopt(&sub)
	if s := d.Str(); s != "after" || !d.Done() {
		t.Errorf("after the sub value: %q", s)
	}
	short := NewDec(Enc(nil).Uvarint(9))
	if _, ok := short.Sub(); ok {
		t.Error("Sub past the end succeeded")
	}
}

// TestRawReads ensures RawStr and RawOpt return bytes of the value itself.
func TestRawReads(t *testing.T) {
	raw := Enc(nil).Str("xyz").Opt(nil).Opt(new(""))
	d := NewDec(raw)
	s := d.RawStr()
	if string(s) != "xyz" || &s[0] != &raw[1] {
		t.Errorf("RawStr = %q, not in the value", s)
	}
	if o := d.RawOpt(); o != nil {
		t.Errorf("absent RawOpt = %q", o)
	}
	if o := d.RawOpt(); o == nil || len(o) != 0 || !d.Done() {
		t.Errorf("empty RawOpt = %v", o)
	}
}

// FuzzDec ensures no sequence of reads panics or allocates past the input
// on damaged bytes, and that what decodes round-trips.
func FuzzDec(f *testing.F) {
	v := fullSample()
	f.Add([]byte(v.encode(nil)))
	f.Add([]byte{})
	f.Add([]byte(Enc(nil).Uvarint(1 << 62)))
	f.Fuzz(func(t *testing.T, raw []byte) {
		d := NewStringDec(raw)
		got := decodeSample(&d)
		if !d.Ok() {
			return
		}
		// What decodes re-encodes in the canonical form (a varint of one
		// length, a symbol as its byte), which decodes to the same bytes
		// again: compare encodings, which NaN does not upset.
		again := got.encode(nil)
		d2 := NewDec(again)
		got2 := decodeSample(&d2)
		if !d2.Done() || !bytes.Equal(got2.encode(nil), again) {
			t.Fatalf("%x decoded to %+v, whose encoding %x does not round-trip", raw, got, again)
		}
	})
}
