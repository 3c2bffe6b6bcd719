package reports

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store/internal/codec"
)

// appendSourceEntryV1 writes an entry as version 1 segments had it, for
// the tests of reading them.
func appendSourceEntryV1(e codec.Enc, s *SourceRollup) codec.Enc {
	e = e.Str(s.SourceIP).Varint(s.Messages).Varint(s.DMARCPass).Varint(s.SPFAligned).Varint(s.DKIMAligned)
	e = e.Varint(s.Disposition.None).Varint(s.Disposition.Quarantine).Varint(s.Disposition.Reject)
	e = e.Opt(s.CountryCode).OptU32(s.ASN).Opt(s.ASOrg)
	e = e.Uvarint(uint64(len(s.Auth)))
	for _, a := range s.Auth {
		e = e.Sym(a.Kind).Str(a.Domain).Sym(a.Result).Varint(a.Messages)
	}
	return e
}

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
			s.Auth = []AuthDomainCount{{Kind: "spf", Domain: "example.com", Result: "pass", Messages: 3},
				{Kind: "dkim", Domain: "mail.example.net", Result: "fail", Messages: 2}}
		case 1:
			s.ASOrg = &other
			s.Auth = []AuthDomainCount{{Kind: "dkim", Domain: "", Result: "weird-result", Messages: 1}}
		}
		out = append(out, s)
	}
	return out
}

// TestSourceSegmentRoundTrip writes sources in a version 2 block and in a
// version 1 segment and reads both back the same: addresses of every
// form (v4, v6, mapped, the row of other sources, text that is no
// canonical address), missing geolocation, an empty auth domain, a
// result that is no symbol.
func TestSourceSegmentRoundTrip(t *testing.T) {
	srcs := codecSources()
	first, last := srcs[0].FirstSeen.Unix(), srcs[0].LastSeen.Unix()
	var tab strTable
	v2 := appendBlockV2(codec.Enc{segV2}, &tab, first, last, len(srcs), func(i int, s *SourceRollup) { *s = *srcs[i] })
	v1 := appendBlockHeader(codec.Enc{codecVersion}, first, last, len(srcs))
	for _, s := range srcs {
		v1 = appendSourceEntryV1(v1, s)
	}
	for name, raw := range map[string][]byte{"v2": v2, "v1": v1} {
		var got []*SourceRollup
		if err := DecodeSourceSegment(raw, func(s *SourceRollup) { got = append(got, s) }); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(got) != len(srcs) {
			t.Fatalf("%s: %d sources, want %d", name, len(got), len(srcs))
		}
		for i := range srcs {
			if !reflect.DeepEqual(got[i], srcs[i]) {
				t.Errorf("%s source %d:\n got %+v\nwant %+v", name, i, *got[i], *srcs[i])
			}
		}
	}
	if len(v2) >= len(v1) {
		t.Errorf("version 2 takes %d bytes, version 1 %d: the table should make it smaller", len(v2), len(v1))
	}
	// Cut anywhere, a segment is an error, never a panic or a wrong source.
	for n := 1; n < len(v2); n++ {
		err := DecodeSourceSegment(v2[:n], func(*SourceRollup) {})
		if err != nil && !errors.Is(err, errCorrupt) {
			t.Fatalf("cut at %d: %v", n, err)
		}
	}
	if err := DecodeSourceSegment([]byte{9}, func(*SourceRollup) {}); !errors.Is(err, errCorrupt) {
		t.Errorf("unknown version: %v", err)
	}
}

// TestMergeReadsVersion1 merges a day's segment written in version 1 (as
// a database from before holds them) with new entries, as the commit that
// merges a day's segments does: every source is summed, and the merged
// segment is written in version 2.
func TestMergeReadsVersion1(t *testing.T) {
	srcs := codecSources()
	first, last := srcs[0].FirstSeen.Unix(), srcs[0].LastSeen.Unix()
	old := appendBlockHeader(codec.Enc{codecVersion}, first, last, len(srcs))
	for _, s := range srcs {
		old = appendSourceEntryV1(old, s)
	}
	var tab strTable
	add := SourceEntries{n: 2, body: appendBlockV2(codec.Enc{segV2}, &tab, first, last, 2, func(i int, s *SourceRollup) { *s = *srcs[i] })}
	day := DaySources{}
	if err := DecodeSourceSegment(old, day.Add); err != nil {
		t.Fatal(err)
	}
	if err := DecodeSourceSegment(add.Frame(), day.Add); err != nil {
		t.Fatal(err)
	}
	merged := AppendSourceSegment(nil, day)
	if merged[0] != segV2 {
		t.Errorf("merged segment of version %d", merged[0])
	}
	got := map[string]int64{}
	if err := DecodeSourceSegment(merged, func(s *SourceRollup) { got[s.SourceIP] += s.Messages }); err != nil {
		t.Fatal(err)
	}
	for i, s := range srcs {
		want := s.Messages
		if i < 2 {
			want *= 2
		}
		if got[s.SourceIP] != want {
			t.Errorf("%q: %d messages, want %d", s.SourceIP, got[s.SourceIP], want)
		}
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

// FuzzSourceSegment ensures the decoder of per-source segments (version 1
// and 2) never panics or allocates without bound on damaged bytes, and
// that the sources it accepts, merged by IP as a commit merges a day,
// encode to a segment that decodes to the same sums.
func FuzzSourceSegment(f *testing.F) {
	srcs := codecSources()
	day := DaySources{}
	for _, s := range srcs {
		cp := *s
		day.Add(&cp)
	}
	f.Add([]byte(AppendSourceSegment(nil, day)))
	first, last := srcs[0].FirstSeen.Unix(), srcs[0].LastSeen.Unix()
	old := appendBlockHeader(codec.Enc{codecVersion}, first, last, len(srcs))
	for _, s := range srcs {
		old = appendSourceEntryV1(old, s)
	}
	f.Add([]byte(old))
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
