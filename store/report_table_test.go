package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// mustForms checks the reports and report tables agree (no dangling
// pointer, no orphan table) and returns the counts of each form.
func mustForms(t *testing.T, db *store.DB) store.ReportForms {
	t.Helper()
	f, err := store.CheckReportTables(db)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// sealAll seals every report's records.
func sealAll(t *testing.T, db *store.DB) store.SealStats {
	t.Helper()
	st, err := db.SealRecords(context.Background(), store.SealOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// exported is what ReportsStoredAfter answers for every aggregate report.
func exported(t *testing.T, db *store.DB) string {
	t.Helper()
	reps, err := db.ReportsStoredAfter(store.ExportAggregate, "", 1000, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(reps)
	return string(b)
}

// TestReportTablesRead ensures sealing moves every report with records
// into report tables (a pointer left in its place) and that every read
// answers the same before and after: listing, detail, statistics (every
// summary group), records, domain statistics, the export's reads and the
// dedup check of a report sent again. A report without records keeps
// its full form, as does a domain's lone report of a day (a table of one
// report is larger than its value); a report larger than a block is in the
// table of its first block only.
func TestReportTablesRead(t *testing.T) {
	e := newReportEnv(t)
	other := storetest.MustDomain(t, e.db, e.org.ID, "other.example")
	var drafts []*store.ReportDraft
	for i := range 30 {
		dom, day := e.dom, 1+i%4
		if i%3 == 0 {
			dom, day = other, 1
		}
		d := mustDraft(t, e.db, dom, fmt.Sprint("t", i), reportDay(day).Add(time.Duration(i)*time.Minute), 1+i%7)
		drafts = append(drafts, d)
	}
	// Optional policy fields, another reporter, zero times and no records.
	odd, err := e.db.NewReportDraft(store.Report{DomainID: e.dom.ID, Domain: e.dom.Name, OrgID: e.org.ID,
		OrgName: "Yahoo", OrgEmail: "dmarc@yahoo.example", ExternalReportID: "odd",
		DateBegin: reportDay(2).Add(7 * time.Hour), DateEnd: reportDay(3), ReceivedAt: storetest.Epoch(),
		PolicyPublished: store.PolicyPublished{Domain: "example.com", P: "reject", SP: new("quarantine"), NP: new("none"), PCT: 50, ADKIM: "s", ASPF: "s"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 9 {
		odd.Add(testRecord(i * 7))
	}
	empty := mustDraft(t, e.db, e.dom, "empty", reportDay(2), 0)
	lone := mustDraft(t, e.db, other, "lone", reportDay(5), 4)
	large := mustDraft(t, e.db, e.dom, "large", reportDay(3), 20_000)
	e.commit(t, &store.IngestBatch{Reports: append(drafts, odd, empty, lone)})
	e.commit(t, &store.IngestBatch{Reports: []*store.ReportDraft{large}})
	if f := mustForms(t, e.db); f.Pointers != 0 || f.Full != 34 || f.Tables != 0 {
		t.Fatalf("before sealing: %+v", f)
	}
	before, beforeExport := snapshot(t, e.db, e.org.ID), exported(t, e.db)

	st := sealAll(t, e.db)
	if st.Blocks != 7 {
		t.Fatalf("sealed %+v: want a block per domain and day, two for the large report's", st)
	}
	f := mustForms(t, e.db)
	if f.Pointers != 32 || f.Full != 2 {
		t.Fatalf("after sealing: %+v; want 32 pointers, the report without records and the lone one in full", f)
	}
	tables, blocks, err := store.ReportTableKeys(e.db)
	if err != nil {
		t.Fatal(err)
	}
	if f.Tables != len(blocks)-2 || len(tables) != f.Tables {
		t.Fatalf("%d tables for %d blocks: want one per block but the large report's second and the lone report's", f.Tables, len(blocks))
	}
	checkStored(t, e.db, e.org.ID)
	if got := snapshot(t, e.db, e.org.ID); !reflect.DeepEqual(got, before) {
		for k, v := range before {
			if got[k] != v {
				t.Errorf("%s:\n got %s\nwant %s", k, got[k], v)
			}
		}
		t.Fatal("reads differ after sealing")
	}
	if got := exported(t, e.db); got != beforeExport {
		t.Fatalf("export reads differ after sealing:\n%s\n%s", got, beforeExport)
	}
	// Pages of the listing (the table cache across pages).
	var paged []string
	for p := 1; p <= 4; p++ {
		reps, total, err := e.db.ListReports(e.org.ID, store.ReportFilter{Page: store.Page{Page: p, Limit: 10}})
		if err != nil || total != 34 {
			t.Fatal(total, err)
		}
		for _, r := range reps {
			paged = append(paged, r.ID+r.ExternalReportID+r.OrgName)
		}
	}
	if len(paged) != 34 {
		t.Fatalf("%d reports paged", len(paged))
	}
	// Sent again: the dedup check finds the sealed report.
	dup := mustDraft(t, e.db, e.dom, "t1", drafts[1].Report().DateBegin, 2)
	outs := e.commit(t, &store.IngestBatch{Reports: []*store.ReportDraft{dup}})
	if outs[0].Stored || outs[0].Duplicate == nil || outs[0].Duplicate.ID != drafts[1].ID() {
		t.Fatalf("a sealed report sent again: %+v", outs[0])
	}
	if got := snapshot(t, e.db, e.org.ID); !reflect.DeepEqual(got, before) {
		t.Fatal("reads differ after the duplicate")
	}
}

// TestReportTablesDelete ensures each path that deletes reports or
// records leaves no report table without a report and no pointer without
// its table: report retention (a table goes with its last report, not
// before), record retention (blocks go, tables and reports stay, reading
// the same), domain and organization deletion. A table deleted and
// another written under its key is not confused with it by the cache.
func TestReportTablesDelete(t *testing.T) {
	e := newReportEnv(t)
	other := storetest.MustDomain(t, e.db, e.org.ID, "other.example")
	ids := map[string]string{}
	add := func(dom *store.Domain, ext string, begin time.Time, end time.Duration, n int) {
		t.Helper()
		rep := mustDraft(t, e.db, dom, ext, begin, 0).Report()
		rep.ID, rep.DateEnd = "", begin.Add(end)
		d2, err := e.db.NewReportDraft(rep)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			d2.Add(testRecord(i))
		}
		e.commit(t, &store.IngestBatch{Reports: []*store.ReportDraft{d2}})
		ids[ext] = d2.ID()
	}
	// Three or four reports a table: day 2 has one ending early, three late.
	add(e.dom, "early", reportDay(2), time.Hour, 5)
	for _, x := range []string{"a", "b", "c"} {
		add(e.dom, "late"+x, reportDay(2), 20*time.Hour, 5)
		add(e.dom, "day4"+x, reportDay(4), time.Hour, 5)
		add(other, "other4"+x, reportDay(4), time.Hour, 5)
		add(other, "other6"+x, reportDay(6), time.Hour, 5)
	}
	sealAll(t, e.db)
	if f := mustForms(t, e.db); f.Pointers != 13 || f.Tables != 4 || f.Full != 0 {
		t.Fatalf("sealed: %+v", f)
	}
	// Read through the cache: the table of day 2 is decoded and kept.
	if _, err := e.db.FindReport(e.org.ID, ids["early"]); err != nil {
		t.Fatal(err)
	}

	// Report retention within day 2: "early" goes, its table stays.
	if n, err := e.db.DeleteReportsBefore(reportDay(2).Add(2 * time.Hour)); err != nil || n != 1 {
		t.Fatalf("deleted %d, %v", n, err)
	}
	if f := mustForms(t, e.db); f.Pointers != 12 || f.Tables != 4 {
		t.Fatalf("after deleting one of a table's reports: %+v", f)
	}
	if _, err := e.db.FindReport(e.org.ID, ids["latea"]); err != nil {
		t.Fatal(err)
	}
	// ... and with the last of its reports the table goes.
	if n, err := e.db.DeleteReportsBefore(reportDay(2).Add(21 * time.Hour)); err != nil || n != 3 {
		t.Fatalf("deleted %d, %v", n, err)
	}
	if f := mustForms(t, e.db); f.Pointers != 9 || f.Tables != 3 {
		t.Fatalf("after deleting a table's last report: %+v", f)
	}
	// New reports of day 2 are sealed under the freed key: the cache,
	// which holds the old table under it, must not answer for them.
	for _, x := range []string{"a", "b", "c"} {
		add(e.dom, "again"+x, reportDay(2).Add(3*time.Hour), 20*time.Hour, 4)
	}
	sealAll(t, e.db)
	for _, x := range []string{"a", "b", "c"} {
		if _, err := e.db.FindReport(e.org.ID, ids["again"+x]); err != nil {
			t.Fatalf("a report in a table written under a freed key: %v", err)
		}
	}
	if f := mustForms(t, e.db); f.Pointers != 12 || f.Tables != 4 {
		t.Fatalf("after sealing again: %+v", f)
	}

	// Record retention: blocks of days before the 5th go, tables stay.
	before := snapshot(t, e.db, e.org.ID)
	if _, err := e.db.DropRecordsBefore(reportDay(5), nil); err != nil {
		t.Fatal(err)
	}
	tables, blocks, err := store.ReportTableKeys(e.db)
	if err != nil || len(tables) != 4 || len(blocks) != 1 {
		t.Fatalf("after dropping records: %d tables, %d blocks, %v; want 4 and 1", len(tables), len(blocks), err)
	}
	mustForms(t, e.db)
	after := snapshot(t, e.db, e.org.ID)
	for _, ext := range []string{"againa", "day4b", "other4c"} {
		rep, err := e.db.FindReport(e.org.ID, ids[ext])
		if err != nil || !rep.RecordsDropped {
			t.Fatalf("%s: %+v, %v; want its records dropped", ext, rep, err)
		}
		var w, g []json.RawMessage
		_ = json.Unmarshal([]byte(before[ids[ext]]), &w)
		_ = json.Unmarshal([]byte(after[ids[ext]]), &g)
		if string(w[1]) != string(g[1]) {
			t.Fatalf("%s: statistics changed by record retention", ext)
		}
	}
	if after[ids["other6b"]] != before[ids["other6b"]] {
		t.Fatal("a report after the record retention's day changed")
	}
	// Report retention after record retention: tables of days gone go.
	if _, err := e.db.DeleteReportsBefore(reportDay(3)); err != nil {
		t.Fatal(err)
	}
	if f := mustForms(t, e.db); f.Pointers != 9 || f.Tables != 3 {
		t.Fatalf("after report retention of day 2: %+v", f)
	}

	// Deleting a domain deletes its tables, not the other domain's.
	if err := e.db.DeleteDomain(e.org.ID, e.dom.ID); err != nil {
		t.Fatal(err)
	}
	if f := mustForms(t, e.db); f.Pointers != 6 || f.Tables != 2 {
		t.Fatalf("after deleting a domain: %+v", f)
	}
	if _, err := e.db.DeleteOrganization(e.org.ID); err != nil {
		t.Fatal(err)
	}
	if f := mustForms(t, e.db); f != (store.ReportForms{}) {
		t.Fatalf("after deleting the organization: %+v", f)
	}
	if err := e.db.Check(); err != nil {
		t.Fatal(err)
	}
}
