package reports

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store/internal/codec"
)

func codecSources() []*SourceRollup {
	cc, org, other := "SE", "Example AB", "Other Net"
	asn := uint32(64500)
	first := time.Date(2026, 11, 5, 0, 0, 0, 0, time.UTC)
	last := first.Add(24*time.Hour - time.Second)
	mk := func(ip string, n int64) *SourceRollup {
		return &SourceRollup{SourceIP: ip, Messages: n, DMARCPass: n / 2, SPFAligned: n / 3, DKIMAligned: n / 4,
			Disposition: DispositionCount{None: n - 2, Quarantine: 1, Reject: 1}, FirstSeen: first, LastSeen: last}
	}
	var out []*SourceRollup
	for i, ip := range []string{"192.0.2.1", "2001:db8::1", "::ffff:192.0.2.7", OtherSources, "not an address",
		"2001:DB8::2", "fe80::1%eth0", "10.0.0.255"} {
		s := mk(ip, int64(10+i))
		switch i % 3 {
		case 0:
			s.CountryCode, s.ASN, s.ASOrg = &cc, &asn, &org
			s.Evidence = []Evidence{{Kind: EvidenceSPF, Domain: "example.com", Messages: 3, Pass: 3},
				{Kind: EvidenceDKIM, Domain: "mail.example.net", Messages: 2}}
		case 1:
			s.ASOrg = &other
			s.Evidence = []Evidence{{Kind: EvidenceDKIM, Domain: "", Messages: 1, Pass: 1}}
		}
		out = append(out, s)
	}
	return out
}

// TestSourceSegmentRoundTrip writes sources in a block and reads them
// back the same: addresses of every form (v4, v6, mapped, the row of
// other sources, text that is no canonical address), missing
// geolocation, evidence of both kinds and an empty domain. Segments of
// the layouts before (versions 1 and 2, which schema 8 rebuilt) are
// refused as corrupt, never misread.
func TestSourceSegmentRoundTrip(t *testing.T) {
	srcs := codecSources()
	first, last := srcs[0].FirstSeen.Unix(), srcs[0].LastSeen.Unix()
	var tab strTable
	raw := appendSourceBlock(codec.Enc{segVersion}, &tab, first, last, len(srcs), func(i int, s *SourceRollup) { *s = *srcs[i] })
	var got []*SourceRollup
	if err := DecodeSourceSegment(raw, func(s *SourceRollup) { got = append(got, s) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(srcs) {
		t.Fatalf("%d sources, want %d", len(got), len(srcs))
	}
	for i := range srcs {
		if !reflect.DeepEqual(got[i], srcs[i]) {
			t.Errorf("source %d:\n got %+v\nwant %+v", i, *got[i], *srcs[i])
		}
	}
	// Cut anywhere, a segment is an error, never a panic or a wrong source.
	for n := 1; n < len(raw); n++ {
		err := DecodeSourceSegment(raw[:n], func(*SourceRollup) {})
		if err != nil && !errors.Is(err, errCorrupt) {
			t.Fatalf("cut at %d: %v", n, err)
		}
	}
	for _, version := range []byte{1, 2, 9} {
		old := append([]byte{version}, raw[1:]...)
		if err := DecodeSourceSegment(old, func(*SourceRollup) {}); !errors.Is(err, errCorrupt) {
			t.Errorf("version %d: %v", version, err)
		}
	}
	// An evidence kind that is neither DKIM nor SPF is corrupt: one source
	// whose entry ends with its one piece of evidence (kind, domain
	// reference, messages 3, passes 3: four bytes).
	one := appendSourceBlock(codec.Enc{segVersion}, &tab, first, last, 1, func(_ int, s *SourceRollup) {
		*s = SourceRollup{SourceIP: "192.0.2.1", Messages: 3, Evidence: []Evidence{{EvidenceSPF, "example.com", 3, 3}}}
	})
	if err := DecodeSourceSegment(one, func(*SourceRollup) {}); err != nil || one[len(one)-4] != evKindSPF {
		t.Fatalf("one source: %v, kind byte %d", err, one[len(one)-4])
	}
	one[len(one)-4] = 7
	if err := DecodeSourceSegment(one, func(*SourceRollup) {}); !errors.Is(err, errCorrupt) {
		t.Errorf("evidence kind 7: %v", err)
	}
}

// TestAddEvidence checks how evidence adds up: a domain twice in one
// record counts its messages once (passing when either result passed),
// records and days add up, and past maxSourceEvidence entries a domain
// with more messages than the smallest entry takes its place.
func TestAddEvidence(t *testing.T) {
	var s Sources
	s.addRecordEvidence(0, 0, "Example.COM", "fail", 5)
	s.addRecordEvidence(0, 0, "example.com", "pass", 5)
	s.addRecordEvidence(0, evKeySPF, "example.com", "softfail", 5)
	s.addRecordEvidence(0, evKeySPF, "", "pass", 5)
	out := s.evidence(nil, &srcRow{a1: int32(len(s.auths))})
	want := []Evidence{{EvidenceDKIM, "example.com", 5, 5}, {EvidenceSPF, "example.com", 5, 0}}
	if !reflect.DeepEqual(out, want) || len(s.doms.list) != 1 {
		t.Fatalf("one record: %+v (domains %q), want %+v", out, s.doms.list, want)
	}
	var u Sources
	if u.addRecordEvidence(0, 0, "BÜCHER.Example", "pass", 1); u.evidence(nil, &srcRow{a1: 1})[0].Domain != "bücher.example" {
		t.Errorf("a domain past ASCII: %q", u.doms.list)
	}
	out = addEvidence(out, 0, Evidence{EvidenceDKIM, "example.com", 3, 0})
	if out[0] != (Evidence{EvidenceDKIM, "example.com", 8, 5}) {
		t.Fatalf("two records: %+v", out[0])
	}
	for i := range maxSourceEvidence - 2 {
		out = addEvidence(out, 0, Evidence{EvidenceSPF, fmt.Sprint("d", i, ".example"), int64(10 + i), 1})
	}
	if len(out) != maxSourceEvidence {
		t.Fatalf("%d entries", len(out))
	}
	out = addEvidence(out, 0, Evidence{EvidenceDKIM, "small.example", 1, 1})
	out = addEvidence(out, 0, Evidence{EvidenceDKIM, "sendgrid.net", 6, 6})
	if len(out) != maxSourceEvidence || out[1] != (Evidence{EvidenceDKIM, "sendgrid.net", 6, 6}) {
		t.Errorf("full: %+v, want sendgrid.net in the place of the SPF entry of 5 messages, small.example left out", out)
	}
}

// TestStrTableRefs: a string keeps its reference whether the table looks
// it up in its list (the first strTableScan strings) or in its map (past
// them), and a reset table numbers from 1 again.
func TestStrTableRefs(t *testing.T) {
	var tab strTable
	for round := range 2 {
		tab.reset()
		n := 3*strTableScan + round // past the list, and a different count each round
		for i := range n {
			if got := tab.ref(fmt.Sprint("s", i)); got != uint64(i+1) {
				t.Fatalf("round %d: new string %d got reference %d, want %d", round, i, got, i+1)
			}
		}
		for i := range n {
			if got := tab.ref(fmt.Sprint("s", i)); got != uint64(i+1) {
				t.Fatalf("round %d: string %d seen again got reference %d, want %d", round, i, got, i+1)
			}
		}
		if len(tab.list) != n {
			t.Fatalf("round %d: %d strings in the table, want %d", round, len(tab.list), n)
		}
	}
	if tab.opt(nil) != 0 {
		t.Fatal("no string must have reference 0")
	}
}

// FuzzSourceSegment ensures the decoder of per-source segments never
// panics or allocates without bound on damaged bytes, and that the sources
// it accepts, merged by IP as a commit merges a day, encode to a segment
// that decodes to the same sums.
func FuzzSourceSegment(f *testing.F) {
	day := DaySources{}
	for _, s := range codecSources() {
		cp := *s
		day.Add(&cp)
	}
	f.Add([]byte(AppendSourceSegment(nil, day)))
	f.Fuzz(func(t *testing.T, raw []byte) {
		day := DaySources{}
		if err := DecodeSourceSegment(raw, day.Add); err != nil {
			return
		}
		sums := map[string]int64{}
		for ip, s := range day {
			sums[ip] = s.Messages
		}
		got := map[string]int64{}
		if err := DecodeSourceSegment(AppendSourceSegment(nil, day), func(s *SourceRollup) { got[s.SourceIP] += s.Messages }); err != nil {
			t.Fatalf("segment of %x does not decode: %v", raw, err)
		}
		if !reflect.DeepEqual(got, sums) {
			t.Fatalf("segment of %x: %v, want %v", raw, got, sums)
		}
	})
}
