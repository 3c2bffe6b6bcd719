package reports

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store/internal/codec"
)

// codecDay is codecSources merged by IP, as a day's segments are, seen
// over three spans, with a second IPv4 source below the first.
func codecDay() DaySources {
	day := DaySources{}
	for i, s := range codecSources() {
		cp := *s
		cp.FirstSeen = cp.FirstSeen.Add(time.Duration(i%3) * time.Hour)
		day.Add(&cp)
	}
	low := *day["192.0.2.1"]
	low.SourceIP = "1.2.3.4"
	day.Add(&low)
	return day
}

// decodeAll decodes a segment into a day, by IP.
func decodeAll(t testing.TB, raw []byte) DaySources {
	t.Helper()
	day := DaySources{}
	if err := DecodeSourceSegment(raw, day.Add); err != nil {
		t.Fatal(err)
	}
	return day
}

// TestSealedSourceSegmentRoundTrip: a sealed segment decodes to the same
// sources as the plain segment of the same day, every field and address
// form; it is smaller for a day of many alike sources; cut anywhere or
// with a lying length it is an error, never a panic.
func TestSealedSourceSegmentRoundTrip(t *testing.T) {
	day := codecDay()
	plain := AppendSourceSegment(nil, day)
	sealed := AppendSealedSourceSegment(nil, day)
	if !SourceSegmentSealed(sealed) || SourceSegmentSealed(plain) {
		t.Fatalf("sealed: %v, plain: %v", SourceSegmentSealed(sealed), SourceSegmentSealed(plain))
	}
	if got, want := decodeAll(t, sealed), decodeAll(t, plain); !reflect.DeepEqual(got, want) {
		t.Fatalf("sealed segment:\n got %v\nwant %v", got, want)
	}
	for n := range len(sealed) {
		if err := DecodeSourceSegment(sealed[:n], func(*SourceRollup) {}); !errors.Is(err, errCorrupt) {
			t.Fatalf("cut at %d of %d: %v", n, len(sealed), err)
		}
	}
	// A length beyond what the frame can hold, or not the frame's.
	for _, n := range []uint64{maxSealedPayload + 1, 1 << 40, 0, 1} {
		bad := binary.AppendUvarint([]byte{sealedSegVersion}, n)
		_, k := binary.Uvarint(sealed[1:])
		bad = append(bad, sealed[1+k:]...)
		if err := DecodeSourceSegment(bad, func(*SourceRollup) {}); !errors.Is(err, errCorrupt) {
			t.Errorf("claimed length %d: %v", n, err)
		}
	}
	// Garbage where the frame should be.
	if err := DecodeSourceSegment(append([]byte{sealedSegVersion, 40}, bytes.Repeat([]byte{0xfd}, 40)...), func(*SourceRollup) {}); !errors.Is(err, errCorrupt) {
		t.Errorf("garbage frame: %v", err)
	}

	// A busy day: thousands of sources of a few networks.
	big := DaySources{}
	rng := rand.New(rand.NewPCG(1, 2))
	cc, org := "US", "Example Mail Inc"
	asn := uint32(64501)
	for i := range 5000 {
		s := &SourceRollup{SourceIP: fmt.Sprintf("198.51.%d.%d", i/250, i%250), Messages: int64(1 + rng.IntN(50)),
			CountryCode: &cc, ASN: &asn, ASOrg: &org, FirstSeen: day[OtherSources].FirstSeen, LastSeen: day[OtherSources].LastSeen,
			Evidence: []Evidence{{EvidenceSPF, "example.com", 3, 3}}}
		s.DMARCPass = s.Messages
		big[s.SourceIP] = s
	}
	plain, sealed = AppendSourceSegment(nil, big), AppendSealedSourceSegment(nil, big)
	if len(sealed) >= len(plain)/2 {
		t.Errorf("5,000 sources: sealed %d bytes, plain %d", len(sealed), len(plain))
	}
	if got, want := decodeAll(t, sealed), decodeAll(t, plain); !reflect.DeepEqual(got, want) {
		t.Fatal("5,000 sources: the sealed segment decodes to other sources")
	}
}

// testDayRollup is a day roll-up of random records and sources of every
// address form.
func testDayRollup(seed uint64, sources int) *DayRollup {
	rng := rand.New(rand.NewPCG(seed, 3))
	r := NewDayRollup()
	results := []Verdict{"pass", "fail", "none"}
	disps := []string{"none", "quarantine", "reject"}
	for i := range 200 {
		cc, name, org := fmt.Sprintf("C%d", i%7), fmt.Sprintf("Country %d", i%7), fmt.Sprintf("AS org %d", i%5)
		asn := uint32(64500 + i%5)
		rec := &Record{Count: int64(1 + rng.IntN(20)), DKIM: results[rng.IntN(3)], SPF: results[rng.IntN(3)], Disposition: disps[rng.IntN(3)]}
		if i%4 > 0 {
			rec.Geo = &Geo{CountryCode: &cc, CountryName: &name, ASN: &asn, ASOrg: &org}
		}
		r.Sum.Add(rec)
		r.Reports++
	}
	forms := []string{OtherSources, "not an address", "2001:DB8::2", "::ffff:192.0.2.7", "2001:db8::1"}
	for i := range sources {
		ip := fmt.Sprintf("203.0.%d.%d", i/256, i%256)
		if i < len(forms) {
			ip = forms[i]
		}
		c := SourceCount{Messages: int64(1 + rng.IntN(100))}
		c.Pass = c.Messages / 2
		c.Fail = c.Messages - c.Pass
		if i%3 > 0 {
			cc, org := "SE", fmt.Sprintf("Net %d", i%9)
			asn := uint32(i % 9)
			c.CC, c.ASOrg, c.ASN = &cc, &org, &asn
		}
		r.Src.Add(ip, c)
	}
	return r
}

// sameDayRollup fails unless a and b hold the same reports, sums and
// sources.
func sameDayRollup(t testing.TB, what string, a, b *DayRollup) {
	t.Helper()
	if a.Reports != b.Reports || !reflect.DeepEqual(a.Sum.Summary(), b.Sum.Summary()) || !reflect.DeepEqual(a.Src, b.Src) {
		t.Fatalf("%s: the roll-ups differ:\n%d %+v\n%d %+v", what, a.Reports, a.Sum.Summary(), b.Reports, b.Sum.Summary())
	}
}

// TestSealedDayRollupRoundTrip: the sealed day roll-up decodes to what
// the plain one does, has the same head (what the day totals and the
// disposition chart read), is smaller, and any cut is an error.
func TestSealedDayRollupRoundTrip(t *testing.T) {
	for _, n := range []int{0, 3, MaxDaySources} {
		r := testDayRollup(uint64(n), n)
		plain := AppendDayRollup(nil, r)
		sealed, err := SealDayRollup(plain)
		if err != nil {
			t.Fatal(err)
		}
		if !DayRollupSealed(sealed) || DayRollupSealed(plain) {
			t.Fatal("version bytes")
		}
		fromPlain, err := DecodeDayRollup(plain)
		if err != nil {
			t.Fatal(err)
		}
		fromSealed, err := DecodeDayRollup(sealed)
		if err != nil {
			t.Fatal(err)
		}
		sameDayRollup(t, fmt.Sprint(n, " sources"), fromSealed, fromPlain)
		sameDayRollup(t, fmt.Sprint(n, " sources, as built"), fromSealed, r)
		hp, err := DayRollupHead(plain)
		if err != nil {
			t.Fatal(err)
		}
		hs, err := DayRollupHead(sealed)
		if err != nil || !bytes.Equal(hp, hs) || !bytes.Equal(hp, plain[:len(hp)]) {
			t.Fatalf("heads: plain %x, sealed %x (%v)", hp, hs, err)
		}
		// Sealing a sealed roll-up gives the same bytes.
		again, err := SealDayRollup(sealed)
		if err != nil || !bytes.Equal(again, sealed) {
			t.Fatalf("sealed twice: %v, equal %v", err, bytes.Equal(again, sealed))
		}
		if n == MaxDaySources && len(sealed) >= len(plain)/2 {
			t.Errorf("%d sources: sealed %d bytes, plain %d", n, len(sealed), len(plain))
		}
		for cut := range len(sealed) {
			if _, err := DecodeDayRollup(sealed[:cut]); !errors.Is(err, errCorrupt) {
				t.Fatalf("%d sources, cut at %d of %d: %v", n, cut, len(sealed), err)
			}
		}
	}
	if _, err := DayRollupHead([]byte{9, 1, 2}); !errors.Is(err, errCorrupt) {
		t.Errorf("unknown version: %v", err)
	}
}

// FuzzSealedRollups ensures that damaged bytes given to the decoders of
// both sealed forms are an error, never a panic or an unbounded
// allocation, and that what they accept seals again to the same.
func FuzzSealedRollups(f *testing.F) {
	f.Add([]byte(AppendSealedSourceSegment(nil, codecDay())))
	f.Add([]byte(AppendSealedDayRollup(nil, testDayRollup(1, 7))))
	f.Add([]byte(AppendSealedDayRollup(nil, testDayRollup(2, 0))))
	f.Add([]byte{sealedSegVersion, 0})
	f.Fuzz(func(t *testing.T, raw []byte) {
		if day := (DaySources{}); DecodeSourceSegment(raw, day.Add) == nil {
			again := decodeAll(t, AppendSealedSourceSegment(nil, day))
			if !reflect.DeepEqual(again, decodeAll(t, AppendSourceSegment(nil, day))) {
				t.Fatalf("segment of %x: sealed and plain differ", raw)
			}
		}
		r, err := DecodeDayRollup(raw)
		if err != nil {
			return
		}
		for _, enc := range []codec.Enc{AppendSealedDayRollup(nil, r), AppendDayRollup(nil, r)} {
			got, err := DecodeDayRollup(enc)
			if err != nil {
				t.Fatalf("roll-up of %x does not decode again: %v", raw, err)
			}
			sameDayRollup(t, fmt.Sprintf("%x", raw), got, r)
		}
	})
}
