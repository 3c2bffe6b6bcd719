package reports

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestReportSourcesMatchesOneRollupPerSource checks the rows of
// Sources, summed in batches, against the plain way of keeping a
// report's sources: one SourceRollup per IP, each record merged into it as
// it comes. Reports with every source distinct, with sources repeated
// across compactions, with more auth results than a source keeps, and
// with records without geolocation must give the same sources.
func TestReportSourcesMatchesOneRollupPerSource(t *testing.T) {
	cc, org := "SE", "Example AB"
	asn := uint32(64500)
	for _, tc := range []struct {
		name          string
		records, ips  int
		authDomains   int
		geoEveryOther bool
	}{
		{"distinct", 50, 1 << 20, 2, false},
		{"repeated", 500, 40, 3, false},
		{"repeated across compactions", 3 * compactEvery, 700, 2, true},
		{"many auth results", 300, 5, 30, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Twice: the second report sums its rows in the slices the
			// first one released (its rows and the spare ones of sum).
			for range 2 {
				rng := rand.New(rand.NewPCG(7, uint64(tc.records)))
				var s Sources
				want := map[string]*SourceRollup{}
				for i := range tc.records {
					ip := fmt.Sprintf("10.0.%d.%d", rng.IntN(tc.ips)>>8&255, rng.IntN(tc.ips)&255)
					if tc.ips > 1<<16 {
						ip = fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&255, i&255)
					}
					r := &Record{SourceIP: ip, Count: int64(1 + rng.IntN(9)), Disposition: []string{"none", "quarantine", "reject"}[rng.IntN(3)],
						DKIM: []Verdict{"pass", "fail"}[rng.IntN(2)], SPF: []Verdict{"pass", "fail"}[rng.IntN(2)]}
					if !tc.geoEveryOther || i%2 == 1 {
						r.Geo = &Geo{CountryCode: &cc, ASN: &asn, ASOrg: &org}
					}
					for range 1 + rng.IntN(2) {
						r.AuthResults.DKIM = append(r.AuthResults.DKIM, DKIMAuth{Domain: fmt.Sprintf("d%d.example", rng.IntN(tc.authDomains)), Result: "pass"})
					}
					r.AuthResults.SPF = append(r.AuthResults.SPF, SPFAuth{Domain: fmt.Sprintf("s%d.example", rng.IntN(tc.authDomains)), Result: "fail"})
					s.Add(r)
					// The reference: the record as a one-record roll-up, merged.
					one := &SourceRollup{SourceIP: ip}
					n := r.Count
					spf, dkim := r.SPF == "pass", r.DKIM == "pass"
					one.Messages, one.DMARCPass, one.SPFAligned, one.DKIMAligned = n, ifPass(spf || dkim, n), ifPass(spf, n), ifPass(dkim, n)
					switch r.Disposition {
					case "quarantine":
						one.Disposition.Quarantine = n
					case "reject":
						one.Disposition.Reject = n
					default:
						one.Disposition.None = n
					}
					if r.Geo != nil {
						one.CountryCode, one.ASN, one.ASOrg = r.Geo.CountryCode, r.Geo.ASN, r.Geo.ASOrg
					}
					for _, a := range r.AuthResults.DKIM {
						one.Evidence = legacyAddRecordEvidence(one.Evidence, 0, EvidenceDKIM, a.Domain, a.Result, n)
					}
					for _, a := range r.AuthResults.SPF {
						one.Evidence = legacyAddRecordEvidence(one.Evidence, 0, EvidenceSPF, a.Domain, a.Result, n)
					}
					if g := want[ip]; g != nil {
						g.Merge(one)
					} else {
						want[ip] = one
					}
				}
				s.Compact()
				day := time.Date(2026, 11, 5, 0, 0, 0, 0, time.UTC)
				got := map[string]*SourceRollup{}
				if err := DecodeSourceSegment(s.Encode(day, day.Add(time.Hour)).body, func(r *SourceRollup) {
					if got[r.SourceIP] != nil {
						t.Fatalf("source %s encoded twice", r.SourceIP)
					}
					r.FirstSeen, r.LastSeen = time.Time{}, time.Time{}
					got[r.SourceIP] = r
				}); err != nil {
					t.Fatal(err)
				}
				if len(got) != len(want) {
					t.Fatalf("%d sources, want %d", len(got), len(want))
				}
				for ip, w := range want {
					if !reflect.DeepEqual(got[ip], w) {
						t.Fatalf("source %s:\n got %+v\nwant %+v", ip, got[ip], w)
					}
				}
				counts := map[string]SourceCount{}
				for _, c := range s.Counts() {
					counts[c.IP] = c.SourceCount
				}
				if len(counts) != len(want) {
					t.Fatalf("%d sources counted, want %d", len(counts), len(want))
				}
				for ip, w := range want {
					if c, ok := counts[ip]; !ok || c.Messages != w.Messages || c.Pass != w.DMARCPass || c.Fail != w.Messages-w.DMARCPass {
						t.Fatalf("counts of %s: %+v, want %d messages, %d passing", ip, c, w.Messages, w.DMARCPass)
					}
				}
				s.Release()
			}
		})
	}
}

// TestReportSourcesReusedAfterFinish: a finished report hands its rows to
// the next one, so what it keeps for the day roll-up (counts) must not
// point into them: the next report's sources, written over the same rows,
// must leave the first report's counts as they were.
func TestReportSourcesReusedAfterFinish(t *testing.T) {
	pool := &SourcePool{} // a DB's: what hands the rows on
	mk := func(prefix, cc, org string, asn uint32) []IPCount {
		s := Sources{Pool: pool}
		for i := range 50 {
			s.Add(&Record{SourceIP: fmt.Sprintf("%s.%d", prefix, i), Count: int64(i + 1), Disposition: "none", DKIM: "pass",
				Geo: &Geo{CountryCode: &cc, ASN: &asn, ASOrg: &org}})
		}
		s.Compact()
		out := s.Counts()
		s.Release()
		return out
	}
	first := mk("192.0.2", "SE", "First AB", 64500)
	for range 3 {
		mk("198.51.100", "US", "Second Inc", 64501)
	}
	if len(first) != 50 {
		t.Fatalf("%d sources, want 50", len(first))
	}
	for _, c := range first {
		if c.CC == nil || *c.CC != "SE" || c.ASOrg == nil || *c.ASOrg != "First AB" || c.ASN == nil || *c.ASN != 64500 ||
			len(c.IP) < 8 || c.IP[:8] != "192.0.2." {
			t.Fatalf("first report's source changed by the next ones: %s %v %v %v", c.IP, deref(c.CC), deref(c.ASOrg), deref(c.ASN))
		}
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestReportSourcesDistinct: the hash table finds a source repeated
// anywhere among many distinct ones, and none where there is none, also
// when its table is reused at another size.
func TestReportSourcesDistinct(t *testing.T) {
	var s Sources
	for _, n := range []int{1, 2, 50, 5000, 3} {
		s.rows = s.rows[:0]
		for i := range n {
			s.rows = append(s.rows, srcRow{ip: fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&255, i&255)})
		}
		if !s.distinct() {
			t.Fatalf("%d distinct sources taken for repeated", n)
		}
		for _, at := range []int{0, n / 2, n - 1} {
			s.rows = append(s.rows, srcRow{ip: s.rows[at].ip})
			if s.distinct() {
				t.Fatalf("%d sources: row %d repeated at the end not found", n, at)
			}
			s.rows = s.rows[:n]
		}
	}
}

// pruneReference is prune as it was before it reused the spare slices:
// new slices for everything, the reference of TestPruneReusesSlices.
func pruneReference(s *Sources, keep int) {
	var other srcRow
	rest := make([]srcRow, 0, len(s.rows))
	for _, r := range s.rows {
		if r.ip == OtherSources {
			other = r
		} else {
			rest = append(rest, r)
		}
	}
	slices.SortFunc(rest, func(a, b srcRow) int {
		return cmp.Or(cmp.Compare(b.messages, a.messages), strings.Compare(a.ip, b.ip))
	})
	auths := make([]srcEvidence, 0, len(s.auths))
	for _, a := range s.auths[other.a0:other.a1] {
		auths = addSrcEvidence(auths, 0, a)
	}
	for _, o := range rest[min(keep, len(rest)):] {
		other.sumCounts(&o)
		for _, a := range s.auths[o.a0:o.a1] {
			auths = addSrcEvidence(auths, 0, a)
		}
	}
	other.ip, other.geo = OtherSources, 0
	other.a0, other.a1 = 0, int32(len(auths))
	kept := rest[:min(keep, len(rest))]
	rows := make([]srcRow, 0, len(kept)+1)
	rows = append(rows, other)
	for _, r := range kept {
		a := int32(len(auths))
		auths = append(auths, s.auths[r.a0:r.a1]...)
		r.a0, r.a1 = a, int32(len(auths))
		rows = append(rows, r)
	}
	s.rows, s.auths, s.summed = rows, auths, len(rows)
}

// expandRows lists s's rows with their auth results, for comparing two
// Sources whose auth results sit at different offsets.
func expandRows(s *Sources) []string {
	out := make([]string, len(s.rows))
	for i, r := range s.rows {
		auths := s.auths[r.a0:r.a1]
		r.a0, r.a1 = 0, 0
		out[i] = fmt.Sprintf("%+v %+v", r, auths)
	}
	return out
}

// TestPruneReusesSlices ensures prune, which writes into the spare slices
// and the rows' own array, gives what pruning into new slices gave, also
// when the rows then grow over the slices it reused and are pruned again
// (a report of many distinct sources prunes every few thousand records),
// and when sources repeat across prunes (sum then swaps the slices too).
func TestPruneReusesSlices(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	var s, ref Sources
	record := func(i int) *Record {
		ip := fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
		if rng.IntN(4) == 0 {
			ip = fmt.Sprintf("192.0.2.%d", rng.IntN(200)) // repeats, across prunes
		}
		r := &Record{SourceIP: ip, Count: int64(1 + rng.IntN(50)), Disposition: "none", DKIM: "pass", SPF: "fail"}
		r.AuthResults.DKIM = []DKIMAuth{{Domain: fmt.Sprintf("d%d.example", rng.IntN(20)), Result: "pass"}}
		r.AuthResults.SPF = []SPFAuth{{Domain: fmt.Sprintf("s%d.example", rng.IntN(20)), Result: "fail"}}
		return r
	}
	const keep = 300
	for round := range 6 {
		for i := range 700 + rng.IntN(400) {
			r := record(round<<12 + i)
			s.Add(r)
			ref.Add(r)
		}
		if !s.distinct() {
			s.sum()
		}
		if !ref.distinct() {
			ref.sum()
		}
		prune := len(s.rows) > keep
		if prune {
			s.prune(keep)
			pruneReference(&ref, keep)
		}
		s.summed, ref.summed = len(s.rows), len(ref.rows)
		got, want := expandRows(&s), expandRows(&ref)
		if !slices.Equal(got, want) {
			for i := range min(len(got), len(want)) {
				if got[i] != want[i] {
					t.Fatalf("round %d (pruned %v), row %d of %d (want %d):\n got %s\nwant %s", round, prune, i, len(got), len(want), got[i], want[i])
				}
			}
			t.Fatalf("round %d: %d rows, want %d", round, len(got), len(want))
		}
	}
}

// evidence appends row r's evidence to out, as Evidence.
func (s *Sources) evidence(out []Evidence, r *srcRow) []Evidence {
	for _, a := range s.auths[r.a0:r.a1] {
		kind := EvidenceDKIM
		if a.key&evKeySPF != 0 {
			kind = EvidenceSPF
		}
		out = append(out, Evidence{Kind: kind, Domain: s.doms.list[a.key>>1], Messages: a.messages, Pass: a.pass})
	}
	return out
}
