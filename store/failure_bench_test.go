package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// benchFailures stores n failure reports of 10 domains, from 5,000 source
// IPs, spread over the 7 days before storetest.Epoch.
func benchFailures(b *testing.B, n int) (*store.DB, *store.Organization) {
	b.Helper()
	db := storetest.Open(b)
	org := storetest.MustOrganization(b, db, "bench", store.PlanUnlimited)
	var doms []*store.Domain
	for i := range 10 {
		doms = append(doms, storetest.MustDomain(b, db, org.ID, fmt.Sprintf("d%d.example", i)))
	}
	ing := db.NewIngester()
	for done := 0; done < n; done += 1000 {
		var drafts []*store.FailureDraft
		for i := done; i < min(n, done+1000); i++ {
			ip := fmt.Sprintf("198.18.%d.%d", i%5000/250, i%250+1)
			r := failReport(doms[i%len(doms)], storetest.Epoch().Add(-time.Duration(i%(6*24*60))*time.Minute), ip, "dmarc")
			drafts = append(drafts, mustFailureDraft(b, r))
		}
		if _, err := ing.Commit(&store.IngestBatch{Failures: drafts}); err != nil {
			b.Fatal(err)
		}
	}
	return db, org
}

// BenchmarkFailureSummary measures the 7-day summary over 100,000 stored
// failure reports (the API answers it; the target is < 50 ms).
func BenchmarkFailureSummary(b *testing.B) {
	db, org := benchFailures(b, 100_000)
	for b.Loop() {
		s, err := db.FailureSummary(org.ID, storetest.Epoch())
		if err != nil || s.Total != 100_000 {
			b.Fatalf("%v %v", s.Total, err)
		}
	}
}

// BenchmarkListFailures measures a filtered page of the list over 100,000
// stored failure reports (the total counts every match).
func BenchmarkListFailures(b *testing.B) {
	db, org := benchFailures(b, 100_000)
	for b.Loop() {
		_, total, err := db.ListFailureReports(org.ID, store.FailureFilter{SourceIP: "198.18.0.1", Page: store.Page{Page: 1, Limit: 20}})
		if err != nil || total == 0 {
			b.Fatalf("%d %v", total, err)
		}
	}
}
