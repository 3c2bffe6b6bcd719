package worker

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// countRecords counts the records ReportRecords gives for every report of
// the organization, and whether any report says its records were dropped.
func countRecords(t *testing.T, db *store.DB, orgID string) (records, dropped int) {
	t.Helper()
	reps, _, err := db.ListReports(orgID, store.ReportFilter{Page: store.Page{Page: 1, Limit: 100}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reps {
		full, err := db.FindReport(orgID, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if full.RecordsDropped {
			dropped++
		}
		if err := db.ReportRecords(orgID, r.ID, func(*store.Record) error { records++; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	return records, dropped
}

// TestSealJobAndRecordRetention ensures the sealing job seals the closed
// days only and logs it, and the retention job with a RecordRetention
// drops the records of older reports while the reports and the domain's
// statistics stay for Retention.
func TestSealJobAndRecordRetention(t *testing.T) {
	db := storetest.Open(t)
	org := storetest.MustOrganization(t, db, "acme", store.PlanUnlimited)
	d := storetest.MustDomain(t, db, org.ID, "example.com")
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	for i, back := range []int{0, 1, 2, 20, 40} {
		storeReport(t, db, d, strings.Repeat("r", i+1), now.Truncate(24*time.Hour).AddDate(0, 0, -back), 10)
	}
	var logs bytes.Buffer
	job := &Seal{Store: db, Log: slog.New(slog.NewTextHandler(&logs, nil))}
	if err := job.Run(context.Background(), now); err != nil {
		t.Fatal(err)
	}
	// Today began less than 36 h ago; yesterday exactly 36 h ago.
	if !strings.Contains(logs.String(), "sealed records") || !strings.Contains(logs.String(), "reports=4") || !strings.Contains(logs.String(), "reports_open=1") {
		t.Fatalf("log: %s", logs.String())
	}
	from, to := now.AddDate(0, 0, -60), now.AddDate(0, 0, 1)
	before, err := db.DomainStatistics(org.ID, d.ID, from, to)
	if err != nil {
		t.Fatal(err)
	}
	if n, dropped := countRecords(t, db, org.ID); n != 10 || dropped != 0 {
		t.Fatalf("%d records, %d dropped before retention", n, dropped)
	}
	ret := &Retention{Store: db, Retention: 400 * 24 * time.Hour, RecordRetention: 10 * 24 * time.Hour}
	if err := ret.Run(context.Background(), now); err != nil {
		t.Fatal(err)
	}
	if n, dropped := countRecords(t, db, org.ID); n != 6 || dropped != 2 {
		t.Fatalf("%d records, %d reports dropped; want the two reports of 20 and 40 days ago without records", n, dropped)
	}
	after, err := db.DomainStatistics(org.ID, d.ID, from, to)
	if err != nil {
		t.Fatal(err)
	}
	if before.Summary.MessageCount != 500 || after.Summary.MessageCount != before.Summary.MessageCount || after.Summary.DMARC != before.Summary.DMARC {
		t.Fatalf("statistics changed: %+v -> %+v", before.Summary, after.Summary)
	}
	// Without a shorter RecordRetention nothing more goes.
	ret = &Retention{Store: db, Retention: 400 * 24 * time.Hour, RecordRetention: 400 * 24 * time.Hour}
	if err := ret.Run(context.Background(), now.Add(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if n, _ := countRecords(t, db, org.ID); n != 6 {
		t.Fatalf("%d records after a retention run with record retention as long as retention", n)
	}
}
