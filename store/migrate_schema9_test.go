package store_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// TestSchema9Migration ensures a file written by the code of schema 9
// (testdata/schema9-records.db.gz: some days sealed, others in rows, made
// by testdata/schema9_reads.go in a checkout of that code) opens at the
// current schema and answers every read exactly as that code did
// (testdata/schema9-reads.json.gz), also after the new code seals the
// rest, and keeps its old reports as they were after a new one lands
// beside them (the new index forms beside the old); and that a
// program of schema 9 refuses the file once migrated.
func TestSchema9Migration(t *testing.T) {
	path := copyOldFile(t, "testdata/schema9-records.db.gz")
	if v := rawSchemaVersion(t, path); v != 9 {
		t.Fatalf("the old file has schema %d, want 9", v)
	}
	want := oldReads(t, "testdata/schema9-reads.json.gz")
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := store.SchemaVersionOf(db); err != nil || v != store.SchemaVersion {
		t.Fatalf("schema %d, %v; want %d", v, err, store.SchemaVersion)
	}
	same := func(stage string) {
		t.Helper()
		got, err := storetest.Reads(db)
		if err != nil {
			t.Fatal(err)
		}
		sameReads(t, stage, got, want)
	}
	same("opened")
	// The days up to the 8th close at this time; the 10th stays open.
	if _, err := db.SealRecords(context.Background(), store.SealOptions{Now: time.Date(2026, 11, 10, 12, 30, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	same("closed days sealed")
	if _, err := db.SealRecords(context.Background(), store.SealOptions{All: true}); err != nil {
		t.Fatal(err)
	}
	same("everything sealed")
	org, err := db.FindOrganization("acme")
	if err != nil {
		t.Fatal(err)
	}
	checkStored(t, db, org.ID)

	// A report stored now writes the new index values beside the old.
	doms, err := db.AllDomains()
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	d, err := db.NewReportDraft(store.Report{DomainID: doms[0].ID, Domain: doms[0].Name, OrgID: org.ID,
		OrgName: "late.example", OrgEmail: "dmarc@late.example", ExternalReportID: "new-1", DateBegin: begin,
		DateEnd: begin.Add(24*time.Hour - time.Second), ReceivedAt: begin.Add(25 * time.Hour),
		PolicyPublished: store.PolicyPublished{Domain: doms[0].Name, P: "none", PCT: 100, ADKIM: "r", ASPF: "r"}})
	if err != nil {
		t.Fatal(err)
	}
	d.Add(&store.Record{SourceIP: "192.0.2.99", Count: 3, Disposition: "none", DKIM: "pass", SPF: "pass", HeaderFrom: doms[0].Name})
	d.Finish()
	if _, err := db.NewIngester().Commit(&store.IngestBatch{Reports: []*store.ReportDraft{d}}); err != nil {
		t.Fatal(err)
	}
	got, err := storetest.Reads(db)
	if err != nil {
		t.Fatal(err)
	}
	for k, w := range want {
		if strings.HasPrefix(k, "report ") && !bytes.Equal(got[k], w) {
			t.Fatalf("%q changed after a new report", k)
		}
	}
	if _, ok := got["report "+d.ID()]; !ok {
		t.Fatal("the new report is not listed")
	}
	for _, scope := range []string{"", doms[0].ID} {
		var p0, old0 struct{ Total int }
		_ = json.Unmarshal(got["list acme "+scope+" page 0"], &p0)
		_ = json.Unmarshal(want["list acme "+scope+" page 0"], &old0)
		if old0.Total == 0 || p0.Total != old0.Total+1 {
			t.Fatalf("listing %q: total %d after a new report, was %d", scope, p0.Total, old0.Total)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := store.OpenWithMigrations(path, nil, store.Migrations()[:9]); err == nil {
		t.Fatal("a program of schema 9 opened the migrated file")
	}
}

// oldReads loads what storetest.Reads answered on an older checkout.
func oldReads(t *testing.T, gz string) map[string]json.RawMessage {
	t.Helper()
	raw, err := os.ReadFile(gz)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.NewDecoder(zr).Decode(&m); err != nil {
		t.Fatal(err)
	}
	if len(m) < 20 {
		t.Fatalf("%d reads in %s", len(m), gz)
	}
	return m
}

// sameReads fails on the first read that differs, naming it.
func sameReads(t *testing.T, stage string, got, want map[string]json.RawMessage) {
	t.Helper()
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		g, ok := got[k]
		if !ok {
			t.Fatalf("%s: %q not answered", stage, k)
		}
		if !bytes.Equal(g, want[k]) {
			t.Fatalf("%s: %q differs:\n got %.300s\nwant %.300s", stage, k, g, want[k])
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d reads, want %d", stage, len(got), len(want))
	}
}
