package reports

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestSummaryAccGroups ensures that a summary's groups are those of a
// direct count by key, below and past the number of groups found by a scan
// (groupScan), whether counted record by record, merged from other
// accumulators or rebuilt from a decoded summary; and that a record's
// pointers may be reused once it is counted.
func TestSummaryAccGroups(t *testing.T) {
	for _, groups := range []int{1, groupScan, groupScan + 1, 3 * groupScan} {
		t.Run(fmt.Sprint(groups), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(groups), 7))
			type count struct{ messages, pass, fail int64 }
			type named struct {
				count
				name *string
			}
			countries := map[string]*named{} // "" = unknown
			asns := map[int64]*named{}       // -1 = unknown
			auths := map[authKey]int64{}
			whole, parts := NewSummaryAcc(), []*SummaryAcc{NewSummaryAcc(), NewSummaryAcc(), NewSummaryAcc()}
			results := []Verdict{"pass", "fail", "none", "temperror"}
			var cc, cname, org string // reused by every record, as ingest does
			var asn uint32
			for i := range 40 * groups {
				r := &Record{Count: int64(1 + rng.IntN(9)), DKIM: results[rng.IntN(len(results))],
					SPF: results[rng.IntN(len(results))], Disposition: "none"}
				ck, ak := "", int64(-1)
				if k := rng.IntN(groups + 1); k < groups { // else unknown
					cc, asn = fmt.Sprintf("C%d", k), uint32(64500+k)
					ck, ak = cc, int64(asn)
					r.Geo = &Geo{CountryCode: &cc, ASN: &asn}
					if rng.IntN(3) > 0 { // names are missing now and then
						cname, org = "Country "+cc, fmt.Sprintf("AS %d", asn)
						r.Geo.CountryName, r.Geo.ASOrg = &cname, &org
					}
				}
				pass := dmarcResult(r.DKIM, r.SPF) == "pass"
				add := func(m *named, name *string) {
					m.messages += r.Count
					if pass {
						m.pass += r.Count
					} else {
						m.fail += r.Count
					}
					if m.name == nil && name != nil {
						m.name = new(*name)
					}
				}
				if countries[ck] == nil {
					countries[ck] = &named{}
				}
				if asns[ak] == nil {
					asns[ak] = &named{}
				}
				var cn, an *string
				if r.Geo != nil {
					cn, an = r.Geo.CountryName, r.Geo.ASOrg
				}
				add(countries[ck], cn)
				add(asns[ak], an)
				auths[authKey{string(r.DKIM), string(r.SPF), dmarcResult(r.DKIM, r.SPF)}] += r.Count
				whole.Add(r)
				parts[i%len(parts)].Add(r)
			}
			cc, cname, org, asn = "XX", "overwritten", "overwritten", 1

			merged := NewSummaryAcc()
			for _, p := range parts {
				merged.Merge(p)
			}
			got := whole.Summary()
			if m := merged.Summary(); !reflect.DeepEqual(m, got) {
				t.Errorf("merged summary differs:\n%+v\nwant %+v", m, got)
			}
			if r := accOf(&got).Summary(); !reflect.DeepEqual(r, got) {
				t.Errorf("summary rebuilt from a decoded one differs:\n%+v\nwant %+v", r, got)
			}
			if len(got.ByCountry) != len(countries) || len(got.ByASN) != len(asns) || len(got.ByAuthResult) != len(auths) {
				t.Fatalf("%d countries, %d networks, %d auth results; want %d, %d, %d",
					len(got.ByCountry), len(got.ByASN), len(got.ByAuthResult), len(countries), len(asns), len(auths))
			}
			for _, g := range got.ByCountry {
				k := ""
				if g.CountryCode != nil {
					k = *g.CountryCode
				}
				want := countries[k]
				if want == nil || (count{g.Messages, g.DMARCPass, g.DMARCFail}) != want.count || !reflect.DeepEqual(g.CountryName, want.name) {
					t.Errorf("country %q: %+v, want %+v", k, g, want)
				}
			}
			for _, g := range got.ByASN {
				k := int64(-1)
				if g.ASN != nil {
					k = int64(*g.ASN)
				}
				want := asns[k]
				if want == nil || (count{g.Messages, g.DMARCPass, g.DMARCFail}) != want.count || !reflect.DeepEqual(g.ASOrg, want.name) {
					t.Errorf("network %d: %+v, want %+v", k, g, want)
				}
			}
			for _, g := range got.ByAuthResult {
				if n := auths[authKey{g.DKIM, g.SPF, g.DMARC}]; g.Messages != n {
					t.Errorf("auth result %+v, want %d messages", g, n)
				}
			}
		})
	}
}
