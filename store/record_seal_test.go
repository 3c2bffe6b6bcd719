package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
)

// snapshot is what the public reads answer for every report of an
// organization: its metadata, statistics and records as JSON, and each
// domain's statistics over a wide range.
func snapshot(t *testing.T, db *store.DB, orgID string) map[string]string {
	t.Helper()
	out := map[string]string{}
	reps, _, err := db.ListReports(orgID, store.ReportFilter{Page: store.Page{Page: 1, Limit: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reps {
		rep, err := db.FindReport(orgID, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		st, err := db.ReportStatistics(orgID, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		var recs []*store.Record
		if err := db.ReportRecords(orgID, r.ID, func(rec *store.Record) error { recs = append(recs, rec); return nil }); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal([]any{rep, st, recs})
		out[r.ID] = string(b)
	}
	doms, err := db.AllDomains()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range doms {
		if d.OrgID != orgID {
			continue
		}
		st, err := db.DomainStatistics(orgID, d.ID, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(st)
		out["domain "+d.Name] = string(b)
	}
	return out
}

// checkStored fails unless every report's records are stored exactly once
// (in rows or blocks, not both, none lost) and the file is sound.
func checkStored(t *testing.T, db *store.DB, orgID string) {
	t.Helper()
	if err := db.Check(); err != nil {
		t.Fatal(err)
	}
	// Every report's value in one form or the other (report tables).
	if _, err := store.CheckReportTables(db); err != nil {
		t.Fatal(err)
	}
	rows, sealed, err := store.RecordsStored(db)
	if err != nil {
		t.Fatal(err)
	}
	reps, _, err := db.ListReports(orgID, store.ReportFilter{Page: store.Page{Page: 1, Limit: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, r := range reps {
		if got := rows[r.ID] + sealed[r.ID]; got != r.RecordCount {
			t.Fatalf("report %s: %d records in rows and %d sealed, want %d in all", r.ID, rows[r.ID], sealed[r.ID], r.RecordCount)
		}
		if rows[r.ID]+sealed[r.ID] > 0 {
			seen++
		}
	}
	for id := range rows {
		if _, err := db.FindReport(orgID, id); err != nil {
			t.Fatalf("rows of a report not stored: %s", id)
		}
	}
	_ = seen
}

// TestSchema8Migration ensures a file written by the code of schema 8
// (testdata/schema8-records.db.gz, made by testdata/schema8_records.go in
// a checkout of that code) opens at the current schema answering every read as
// before, is sealed by SealRecords day by day (the last, open day
// left), reads the same afterwards, and is refused by a program of schema
// 8 once migrated.
func TestSchema8Migration(t *testing.T) {
	path := copyOldFile(t, "testdata/schema8-records.db.gz")
	if v := rawSchemaVersion(t, path); v != 8 {
		t.Fatalf("the old file has schema %d, want 8", v)
	}
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := store.SchemaVersionOf(db); err != nil || v != store.SchemaVersion {
		t.Fatalf("schema %d, %v; want %d", v, err, store.SchemaVersion)
	}
	org, err := db.FindOrganization("acme")
	if err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, db, org.ID)
	if len(before) != 22 {
		t.Fatalf("%d reads, want 20 reports and 2 domains", len(before))
	}
	now := time.Date(2026, 11, 10, 12, 30, 0, 0, time.UTC)
	var progress []store.SealStats
	st, err := db.SealRecords(context.Background(), store.SealOptions{Now: now, Progress: func(s store.SealStats) { progress = append(progress, s) }})
	if err != nil {
		t.Fatal(err)
	}
	// Days 3 to 8 November are closed at now (started 36 h before), the
	// 10th not: its report stays in rows. Each closed day has reports of
	// both domains: 12 blocks, and one more for the large report.
	if st.Blocks != 13 || st.Open != 1 || st.Records != 20000+6*48 || len(progress) != st.Blocks {
		t.Fatalf("sealed %+v with %d progress calls; want 13 blocks, 1 report open", st, len(progress))
	}
	checkStored(t, db, org.ID)
	if got := snapshot(t, db, org.ID); !reflect.DeepEqual(got, before) {
		t.Fatal("reads differ after sealing the closed days")
	}
	if _, err := db.SealRecords(context.Background(), store.SealOptions{All: true}); err != nil {
		t.Fatal(err)
	}
	checkStored(t, db, org.ID)
	if got := snapshot(t, db, org.ID); !reflect.DeepEqual(got, before) {
		t.Fatal("reads differ after sealing everything")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	old := store.Migrations()[:8]
	if _, err := store.OpenWithMigrations(path, nil, old); err == nil {
		t.Fatal("a program of schema 8 opened the migrated file")
	}
}

// TestRecordRetention ensures DropRecordsBefore deletes the records of the
// reports of earlier days, sealed or not, and nothing else: the reports,
// their statistics and the domain's statistics stay exact, the reports say
// their records were dropped, a report the gate holds keeps its records.
func TestRecordRetention(t *testing.T) {
	e := newReportEnv(t)
	var ids []string
	for i, day := range []int{1, 2, 2, 3, 5, 8} {
		d := mustDraft(t, e.db, e.dom, fmt.Sprint("r", i), reportDay(day), 30+i*100)
		e.commit(t, &store.IngestBatch{Reports: []*store.ReportDraft{d}})
		ids = append(ids, d.ID())
		if i == 2 {
			// The first three sealed, the others in rows.
			if _, err := e.db.SealRecords(context.Background(), store.SealOptions{All: true}); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := snapshot(t, e.db, e.org.ID)
	held := ids[1] // sealed, with ids[2] in the block of day 2
	heldRow := ids[3]
	n, err := e.db.DropRecordsBefore(reportDay(4), func(id string) bool { return id != held && id != heldRow })
	if err != nil || n != 1 {
		// ids[0] alone: the block of day 2 is held by ids[1], ids[3] by the gate.
		t.Fatalf("dropped %d, %v; want 1", n, err)
	}
	checkDropped := func(dropped map[string]bool) {
		t.Helper()
		after := snapshot(t, e.db, e.org.ID)
		for k, want := range before {
			var w, g []json.RawMessage
			_ = json.Unmarshal([]byte(want), &w)
			if json.Unmarshal([]byte(after[k]), &g); len(w) != 3 {
				if after[k] != want {
					t.Fatalf("%s changed", k)
				}
				continue
			}
			var rep store.Report
			_ = json.Unmarshal(g[0], &rep)
			if string(g[1]) != string(w[1]) {
				t.Fatalf("statistics of %s changed", k)
			}
			if dropped[k] {
				if !rep.RecordsDropped || string(g[2]) != "null" || rep.RecordCount == 0 {
					t.Fatalf("report %s: dropped %v, records %.40s; want its records dropped, its counts kept", k, rep.RecordsDropped, g[2])
				}
				continue
			}
			if rep.RecordsDropped || string(g[0]) != string(w[0]) || string(g[2]) != string(w[2]) {
				t.Fatalf("report %s changed", k)
			}
		}
	}
	checkDropped(map[string]bool{ids[0]: true})
	// Without the gate the rest of the days before the 4th go.
	if n, err := e.db.DropRecordsBefore(reportDay(4), nil); err != nil || n != 3 {
		t.Fatalf("dropped %d, %v; want 3 (ids 1 and 2 sealed together, 3 in rows)", n, err)
	}
	checkDropped(map[string]bool{ids[0]: true, ids[1]: true, ids[2]: true, ids[3]: true})
	if err := e.db.Check(); err != nil {
		t.Fatal(err)
	}
	// Report retention still deletes the reports and their blocks.
	if _, err := e.db.DeleteReportsBefore(reportDay(9)); err != nil {
		t.Fatal(err)
	}
	rows, sealed, err := store.RecordsStored(e.db)
	if err != nil || len(rows)+len(sealed) != 0 {
		t.Fatalf("left after retention: %v %v, %v", rows, sealed, err)
	}
}
