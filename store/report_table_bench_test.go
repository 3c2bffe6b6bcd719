package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// BenchmarkSmallReports measures the reads of report metadata over 3,000
// reports of 5 records (the small reports of issue 25, three days of one
// domain): a listing page of 50, a report's detail and its statistics, in
// the write form and sealed (the values in report tables).
func BenchmarkSmallReports(b *testing.B) {
	for _, sealed := range []bool{false, true} {
		name := "Unsealed"
		if sealed {
			name = "Sealed"
		}
		b.Run(name, func(b *testing.B) {
			db := storetest.Open(b)
			org := storetest.MustOrganization(b, db, "acme", store.PlanUnlimited)
			dom := storetest.MustDomain(b, db, org.ID, "example.com")
			ing := db.NewIngester()
			var ids []string
			var batch []*store.ReportDraft
			for i := range 3000 {
				begin := storetest.Epoch().Add(-time.Duration(72+i%3*24) * time.Hour).Add(time.Duration(i) * time.Second)
				d, err := db.NewReportDraft(store.Report{DomainID: dom.ID, Domain: dom.Name, OrgID: org.ID,
					OrgName: fmt.Sprint("reporter", i%20, ".example"), OrgEmail: "dmarc@reporter.example", ExternalReportID: fmt.Sprint(i),
					DateBegin: begin, DateEnd: begin.Add(24*time.Hour - time.Second), ReceivedAt: storetest.Epoch(),
					PolicyPublished: store.PolicyPublished{Domain: dom.Name, P: "reject", PCT: 100, ADKIM: "r", ASPF: "r"}})
				if err != nil {
					b.Fatal(err)
				}
				for j := range 5 {
					d.Add(testRecord(i*5 + j))
				}
				d.Finish()
				batch = append(batch, d)
				ids = append(ids, d.ID())
				if len(batch) == 100 {
					if _, err := ing.Commit(&store.IngestBatch{Reports: batch}); err != nil {
						b.Fatal(err)
					}
					batch = batch[:0]
				}
			}
			if sealed {
				if _, err := db.SealRecords(context.Background(), store.SealOptions{All: true}); err != nil {
					b.Fatal(err)
				}
			}
			b.Run("List", func(b *testing.B) {
				b.ReportAllocs()
				p := 0
				for b.Loop() {
					reps, _, err := db.ListReports(org.ID, store.ReportFilter{Page: store.Page{Page: p%60 + 1, Limit: 50}})
					if err != nil || len(reps) != 50 {
						b.Fatal(len(reps), err)
					}
					p++
				}
			})
			b.Run("Find", func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if _, err := db.FindReport(org.ID, ids[i*7919%len(ids)]); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
			b.Run("Statistics", func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if _, err := db.ReportStatistics(org.ID, ids[i*7919%len(ids)]); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		})
	}
}
