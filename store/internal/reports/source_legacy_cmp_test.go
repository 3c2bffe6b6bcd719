package reports

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// TestSourcesMatchLegacy feeds the same records to Sources and to the
// per-source roll-up as it was before its rows were made compact
// (legacySources, source_legacy_test.go) and requires the same encoded
// segment, byte for byte, and the same counts: reports small and past the
// prune threshold (maxDraftSourceIPs), with sources distinct and repeated
// within and across compactions, geolocation whole, partial (a source's
// first record without a country, a later one with it) and absent, more
// evidence domains than a source keeps, domains in upper case and past
// ASCII, and many distinct AS names and domains. Each report is fed twice
// to Sources of one pool, so the second one runs in the slices the first
// released.
func TestSourcesMatchLegacy(t *testing.T) {
	for _, tc := range []struct {
		name       string
		records    int
		distinct   float64 // share of records from a source of their own
		pool       int     // how many sources the others come from
		domains    int     // evidence domains to pick from
		asns       int     // AS numbers (and names) to pick from
		maxCount   int
		seedOffset uint64
	}{
		{"tiny", 5, 0.5, 3, 4, 2, 3, 1},
		{"small repeated", 300, 0.1, 20, 30, 5, 9, 2},
		{"one compaction", compactEvery + 17, 0.6, 500, 12, 40, 20, 3},
		{"past the prune threshold", 70_000, 0.85, 3000, 40, 300, 50, 4},
		{"many domains and ASes", 50_000, 0.9, 2000, 60_000, 20_000, 4, 5},
		{"ties", 40_000, 1, 1, 8, 3, 1, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := &SourcePool{}
			for run := range 2 {
				recs := legacyCmpRecords(tc.records, tc.distinct, tc.pool, tc.domains, tc.asns, tc.maxCount, tc.seedOffset)
				var ref legacySources
				s := Sources{Pool: pool}
				for i := range recs {
					ref.Add(&recs[i])
					s.Add(&recs[i])
				}
				ref.Compact()
				s.Compact()
				begin := time.Date(2026, 11, 5, 0, 0, 0, 0, time.UTC)
				want := ref.Encode(begin, begin.Add(24*time.Hour))
				got := s.Encode(begin, begin.Add(24*time.Hour))
				if got.Len() != want.Len() || !bytes.Equal(got.Frame(), want.Frame()) {
					t.Fatalf("run %d: %d sources in %d bytes, want %d in %d bytes (the segments differ)", run, got.Len(), got.Size(), want.Len(), want.Size())
				}
				if gc, wc := countsText(s.Counts()), countsText(ref.Counts()); !reflect.DeepEqual(gc, wc) {
					t.Fatalf("run %d: counts differ: %d sources, want %d", run, len(gc), len(wc))
				}
				if pruned := ref.rows[0].ip == OtherSources; pruned != (tc.records > maxDraftSourceIPs) {
					t.Fatalf("%d records, %d sources: pruned %v", tc.records, want.Len(), pruned)
				}
				s.Release()
			}
		})
	}
}

// countsText spells out counts with their geolocation's values, not its
// pointers.
func countsText(cs []IPCount) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = fmt.Sprintf("%s %d %d %d %v %v %v", c.IP, c.Messages, c.Pass, c.Fail, deref(c.CC), deref(c.ASN), deref(c.ASOrg))
	}
	return out
}

// legacyCmpRecords makes n records, the same for the same arguments.
func legacyCmpRecords(n int, distinct float64, pool, domains, asns, maxCount int, seed uint64) []Record {
	rng := rand.New(rand.NewPCG(seed, uint64(n)))
	countries := []string{"SE", "US", "DE", "", "GB"}
	orgs := make([]string, asns)
	for i := range orgs {
		orgs[i] = fmt.Sprintf("AS Org %d", i)
	}
	domain := func() string {
		d := fmt.Sprintf("d%d.example", rng.IntN(domains))
		switch rng.IntN(20) {
		case 0:
			return ""
		case 1:
			return "D" + d[1:] // upper case: counted with the lower-case one
		case 2:
			return "BÜCHER-" + d
		}
		return d
	}
	out := make([]Record, n)
	for i := range out {
		r := &out[i]
		if rng.Float64() < distinct {
			r.SourceIP = fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
			if i%7 == 0 {
				r.SourceIP = fmt.Sprintf("2001:db8::%x", i)
			}
		} else {
			r.SourceIP = fmt.Sprintf("192.0.%d.%d", rng.IntN(pool)>>8&255, rng.IntN(pool)&255)
		}
		r.Count = int64(1 + rng.IntN(maxCount))
		r.Disposition = []string{"none", "quarantine", "reject", ""}[rng.IntN(4)]
		if rng.IntN(10) == 0 {
			r.HeaderFrom = "example.com" // verdicts derived from the auth results
		} else {
			r.DKIM, r.SPF = []Verdict{"pass", "fail"}[rng.IntN(2)], []Verdict{"pass", "fail", "none"}[rng.IntN(3)]
		}
		switch rng.IntN(6) {
		case 0: // no geolocation
		case 1: // an empty answer
			r.Geo = &Geo{}
		case 2: // a country only
			cc := countries[rng.IntN(len(countries))]
			r.Geo = &Geo{CountryCode: &cc}
		case 3: // an AS number without a name
			asn := uint32(64500 + rng.IntN(asns))
			r.Geo = &Geo{ASN: &asn}
		default:
			k := rng.IntN(asns)
			cc, asn, org := countries[k%len(countries)], uint32(64500+k), orgs[k]
			r.Geo = &Geo{CountryCode: &cc, ASN: &asn, ASOrg: &org}
		}
		for range rng.IntN(4) {
			r.AuthResults.DKIM = append(r.AuthResults.DKIM, DKIMAuth{Domain: domain(), Result: []string{"pass", "fail", "none"}[rng.IntN(3)]})
		}
		for range rng.IntN(3) {
			r.AuthResults.SPF = append(r.AuthResults.SPF, SPFAuth{Domain: domain(), Result: []string{"pass", "softfail"}[rng.IntN(2)]})
		}
	}
	return out
}

// BenchmarkSources adds the records of a report of 100,000 records from
// mostly distinct sources (pruned several times) and encodes its sources,
// beside the roll-up as it was (legacy): ingest must not slow for the
// memory saved.
func BenchmarkSources(b *testing.B) {
	recs := legacyCmpRecords(100_000, 0.9, 3000, 200, 300, 20, 9)
	begin := time.Date(2026, 11, 5, 0, 0, 0, 0, time.UTC)
	b.Run("compact", func(b *testing.B) {
		pool := &SourcePool{}
		b.ReportAllocs()
		for b.Loop() {
			s := Sources{Pool: pool}
			for i := range recs {
				s.Add(&recs[i])
			}
			s.Compact()
			s.Encode(begin, begin)
			s.Release()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
	})
	b.Run("legacy", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var s legacySources
			for i := range recs {
				s.Add(&recs[i])
			}
			s.Compact()
			s.Encode(begin, begin)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
	})
}

// BenchmarkSourcesSmall is BenchmarkSources for reports of 50 records from
// distinct sources of one AS with two auth results each (most reports):
// the per-report costs. Both without a pool, and the new one with it.
func BenchmarkSourcesSmall(b *testing.B) {
	cc, org := "US", "Example Net"
	asn := uint32(64500)
	geo := &Geo{CountryCode: &cc, ASN: &asn, ASOrg: &org}
	recs := make([]Record, 50)
	for i := range recs {
		recs[i] = Record{SourceIP: fmt.Sprintf("209.85.%d.%d", i, 7*i), Count: int64(1 + i%6), Disposition: "none", DKIM: "pass", SPF: "pass", Geo: geo,
			AuthResults: AuthResults{DKIM: []DKIMAuth{{Domain: "example.com", Result: "pass"}}, SPF: []SPFAuth{{Domain: "example.com", Result: "pass"}}}}
		if i%5 == 0 {
			recs[i].AuthResults.DKIM[0].Domain = "sendgrid.net"
		}
	}
	begin := time.Date(2026, 11, 5, 0, 0, 0, 0, time.UTC)
	for _, pool := range []*SourcePool{nil, {}} {
		b.Run(fmt.Sprintf("compact/pool=%v", pool != nil), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s := Sources{Pool: pool}
				for i := range recs {
					s.Add(&recs[i])
				}
				s.Compact()
				s.Counts()
				s.Encode(begin, begin)
				s.Release()
			}
		})
	}
	b.Run("legacy", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var s legacySources
			for i := range recs {
				s.Add(&recs[i])
			}
			s.Compact()
			s.Counts()
			s.Encode(begin, begin)
		}
	})
}
