package storetest

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/dmarcd/dmarcd/store"
)

// Reads returns what the store answers about every aggregate report of
// every organization, keyed by what was asked: each listing page (whole
// organization and per domain, followed by cursor, with totals and
// cursors), each report with its statistics and records, each domain's
// statistics and its sources per day (summed by source and sorted, as a
// day may be stored in several segments). A file read by two versions of
// the code, or before and after a change of its layout, must give the
// same map: the migration tests compare it with what the older code
// answered (testdata/schema9_reads.go) or with itself before sealing.
// It uses only the store's public reads, so an older checkout runs it too.
func Reads(db *store.DB) (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	put := func(key string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		out[key] = b
		return nil
	}
	orgs, err := db.ListOrganizations()
	if err != nil {
		return nil, err
	}
	doms, err := db.AllDomains()
	if err != nil {
		return nil, err
	}
	from, to := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, org := range orgs {
		scopes := []string{""}
		for _, d := range doms {
			if d.OrgID == org.ID {
				scopes = append(scopes, d.ID)
			}
		}
		for _, domainID := range scopes {
			f := store.ReportFilter{DomainID: domainID, Page: store.Page{Page: 1, Limit: 7}}
			for n := 0; ; n++ {
				p, err := db.ListReportsPage(org.ID, f)
				if err != nil {
					return nil, err
				}
				ids := make([]string, 0, len(p.Reports))
				for _, r := range p.Reports {
					ids = append(ids, r.ID)
				}
				if err := put(fmt.Sprintf("list %s %s page %d", org.Name, domainID, n), map[string]any{
					"reports": p.Reports, "total": p.Total, "next": base64.StdEncoding.EncodeToString(p.Next)}); err != nil {
					return nil, err
				}
				if domainID == "" {
					for _, id := range ids {
						if err := putReport(db, org.ID, id, put); err != nil {
							return nil, err
						}
					}
				}
				if p.Next == nil {
					break
				}
				f.After = p.Next
			}
		}
		for _, d := range doms {
			if d.OrgID != org.ID {
				continue
			}
			st, err := db.DomainStatistics(org.ID, d.ID, from, to)
			if err != nil {
				return nil, err
			}
			if err := put("statistics "+d.Name, st); err != nil {
				return nil, err
			}
			type daySource struct {
				Day time.Time
				store.SourceRollup
			}
			byKey := map[string]*daySource{}
			err = db.EachSourceDay(org.ID, d.ID, from, to, func(day time.Time, s *store.SourceRollup) {
				k := day.Format(time.DateOnly) + " " + s.SourceIP
				if have := byKey[k]; have != nil {
					have.Merge(s)
					return
				}
				c := *s
				c.Evidence = slices.Clone(s.Evidence)
				byKey[k] = &daySource{Day: day, SourceRollup: c}
			})
			if err != nil {
				return nil, err
			}
			all := make([]*daySource, 0, len(byKey))
			for _, s := range byKey {
				slices.SortFunc(s.Evidence, func(x, y store.Evidence) int {
					return cmp.Or(cmp.Compare(x.Kind, y.Kind), cmp.Compare(x.Domain, y.Domain))
				})
				all = append(all, s)
			}
			slices.SortFunc(all, func(x, y *daySource) int {
				return cmp.Or(x.Day.Compare(y.Day), cmp.Compare(x.SourceIP, y.SourceIP))
			})
			if err := put("sources "+d.Name, all); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// putReport adds report id's detail, statistics and records.
func putReport(db *store.DB, orgID, id string, put func(string, any) error) error {
	rep, err := db.FindReport(orgID, id)
	if err != nil {
		return err
	}
	st, err := db.ReportStatistics(orgID, id)
	if err != nil {
		return err
	}
	var recs []*store.Record
	if err := db.ReportRecords(orgID, id, func(r *store.Record) error { recs = append(recs, r); return nil }); err != nil {
		return err
	}
	return put("report "+id, []any{rep, st, recs})
}
