package cli

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// TestDemoLoadIsIdempotent ensures the demo creates its domain and two weeks of
// reports from every reporter, ending the day before, and that loading
// again, even a day later, stores nothing new.
func TestDemoLoadIsIdempotent(t *testing.T) {
	clock := storetest.NewClock(time.Date(2026, 11, 22, 9, 30, 0, 0, time.UTC))
	db := storetest.OpenWithClock(t, clock)
	org, err := db.CreateOrganization(demoOrg, store.PlanUnlimited)
	if err != nil {
		t.Fatal(err)
	}
	p := runPipelineOn(t, db)
	first, err := loadDemoReports(context.Background(), db, p.Ingest, "reports.test")
	if err != nil {
		t.Fatal(err)
	}
	want := len(demoReporters) * demoDays
	if !first.DomainCreated || first.Reports != want || first.Duplicates != 0 || first.Quarantined != 0 {
		t.Fatalf("first load: %+v, want %d reports", first, want)
	}
	reps, total, err := db.ListReports(org.ID, store.ReportFilter{DomainID: first.DomainID, Page: store.Page{Page: 1, Limit: 100}})
	if err != nil || total != want {
		t.Fatalf("stored %d reports (%v), want %d", total, err, want)
	}
	newest, oldest := reps[0].DateBegin, reps[len(reps)-1].DateBegin
	if !newest.Equal(time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)) || !oldest.Equal(time.Date(2026, 11, 8, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("reports from %s to %s, want 2026-11-08 to 2026-11-21", oldest, newest)
	}
	clock.Advance(24 * time.Hour)
	second, err := loadDemoReports(context.Background(), db, p.Ingest, "reports.test")
	if err != nil {
		t.Fatal(err)
	}
	if second.DomainCreated || second.DomainID != first.DomainID || second.Reports != 0 || second.Duplicates != want {
		t.Errorf("second load: %+v, want %d duplicates and nothing new", second, want)
	}
}

// TestDemoLoadWithoutDefaultOrg ensures the demo says so when there is no
// organization to put it in.
func TestDemoLoadWithoutDefaultOrg(t *testing.T) {
	db := storetest.Open(t)
	_, err := loadDemoReports(context.Background(), db, runPipelineOn(t, db).Ingest, "reports.test")
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("err = %v, want ErrNotFound", err)
	}
}
