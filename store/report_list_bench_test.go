package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// BenchmarkListOrgReports measures the organization listing (the Reports
// page and GET /api/v1/reports) of an organization of 1,000 domains with
// a report on each of 30 days: the first page with its total, a page
// resumed from a cursor, and a date-filtered page (which counts every
// report that passes).
func BenchmarkListOrgReports(b *testing.B) {
	db := storetest.Open(b)
	org := storetest.MustOrganization(b, db, "acme", store.PlanUnlimited)
	for i := range 1000 {
		dom := storetest.MustDomain(b, db, org.ID, fmt.Sprintf("d%04d.example", i))
		var batch store.IngestBatch
		for day := range 30 {
			begin := storetest.Epoch().Truncate(24*time.Hour).AddDate(0, 0, -1-day)
			d, err := db.NewReportDraft(store.Report{DomainID: dom.ID, Domain: dom.Name, OrgID: org.ID,
				OrgName: "google.com", ExternalReportID: fmt.Sprint(i, "-", day), DateBegin: begin,
				DateEnd: begin.Add(24*time.Hour - time.Second), ReceivedAt: storetest.Epoch()})
			if err != nil {
				b.Fatal(err)
			}
			d.Add(testRecord(i))
			d.Finish()
			batch.Reports = append(batch.Reports, d)
		}
		if _, err := db.NewIngester().Commit(&batch); err != nil {
			b.Fatal(err)
		}
	}
	first, err := db.ListReportsPage(org.ID, store.ReportFilter{Page: store.Page{Page: 1, Limit: 50}})
	if err != nil || first.Total != 30_000 || first.Next == nil {
		b.Fatal(first.Total, err)
	}
	from := storetest.Epoch().AddDate(0, 0, -7)
	for name, f := range map[string]store.ReportFilter{
		"first":  {Page: store.Page{Page: 1, Limit: 50}},
		"cursor": {Page: store.Page{Page: 1, Limit: 50}, After: first.Next},
		"page10": {Page: store.Page{Page: 10, Limit: 50}},
		"from":   {Page: store.Page{Page: 1, Limit: 50}, DateFrom: &from},
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if p, err := db.ListReportsPage(org.ID, f); err != nil || len(p.Reports) != 50 {
					b.Fatal(err)
				}
			}
		})
	}
}
