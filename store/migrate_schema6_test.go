package store_test

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/dmarcd/dmarcd/store"
)

// openSchema6 copies testdata/schema6.db.gz, a file written by dmarcd at
// schema 6 (commit a6dffcc: organization acme, domain example.com, the
// linkedin failure report with Arrival-Date, testdata/failure/opendmarc.eml
// without, and testdata/legacy/aol-2012.xml), and opens the copy.
func openSchema6(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(copyOldFile(t, filepath.Join("testdata", "schema6.db.gz")), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestMigrateSchema6 ensures a file of schema 6 opens at the current
// schema with its failure reports readable (their Auth-Failure values as
// reported are the families they stored), their dedup entries still
// finding them, and its aggregate reports readable.
func TestMigrateSchema6(t *testing.T) {
	db := openSchema6(t)
	if v, err := store.SchemaVersionOf(db); err != nil || v != store.SchemaVersion {
		t.Fatalf("schema %d, %v; want %d", v, err, store.SchemaVersion)
	}
	orgs, err := db.ListOrganizations()
	if err != nil || len(orgs) != 1 {
		t.Fatalf("organizations %v, %v", orgs, err)
	}
	org := orgs[0]
	reps, _, err := db.ListFailureReports(org.ID, store.FailureFilter{Page: store.Page{Page: 1, Limit: 10}})
	if err != nil || len(reps) != 2 {
		t.Fatalf("%d failure reports, %v; want 2", len(reps), err)
	}
	for _, r := range reps {
		if !reflect.DeepEqual(r.AuthFailureReported, r.AuthFailure) || r.Identity != "" || len(r.AuthFailure) == 0 {
			t.Errorf("schema 6 report %s: auth_failure %v reported %v identity %q", r.ID, r.AuthFailure, r.AuthFailureReported, r.Identity)
		}
	}
	// The same report as stored (Arrival-Date given) is found by its
	// schema 6 dedup entry.
	for _, r := range reps {
		det, err := db.FindFailureReport(org.ID, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		again := *det.FailureReport
		d, err := store.NewFailureDraft(&store.FailureReportDetail{FailureReport: &again})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.NewIngester().Commit(&store.IngestBatch{Failures: []*store.FailureDraft{d}}); err != nil {
			t.Fatal(err)
		}
		if o := d.Outcome(); o.DuplicateID != r.ID {
			t.Errorf("report %s again: %+v, want a duplicate", r.ID, o)
		}
	}
	aggs, total, err := db.ListReports(org.ID, store.ReportFilter{Page: store.Page{Page: 1, Limit: 10}})
	if err != nil || total != 1 {
		t.Fatalf("%d aggregate reports, %v", total, err)
	}
	n := 0
	if err := db.ReportRecords(org.ID, aggs[0].ID, func(*store.Record) error { n++; return nil }); err != nil || n != 3 {
		t.Errorf("%d records read, %v; want 3", n, err)
	}
}
