package store_test

import (
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
)

// TestReportsStoredAfter ensures an export lists the reports in id order
// after its cursor, skips what it was told, and sees a report committed
// late (its id older than visible ones) only once it is visible, while
// OldestPendingReport names it.
func TestReportsStoredAfter(t *testing.T) {
	e := newReportEnv(t)
	late := mustDraft(t, e.db, e.dom, "late", reportDay(1), 0)
	late.Add(testRecord(0))
	if _, err := e.ing.Commit(&store.IngestBatch{Chunks: []*store.RecordChunk{late.TakeChunk()}}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i, ext := range []string{"a", "b", "c"} {
		d := mustDraft(t, e.db, e.dom, ext, reportDay(2+i), 2)
		e.commit(t, &store.IngestBatch{Reports: []*store.ReportDraft{d}})
		ids = append(ids, d.ID())
	}
	if p, err := e.db.OldestPendingReport(); err != nil || p != late.ID() {
		t.Fatalf("OldestPendingReport = %q, %v; want %s", p, err, late.ID())
	}
	got, err := e.db.ReportsStoredAfter(store.ExportAggregate, "", 10, nil)
	if err != nil || len(got) != 3 {
		t.Fatalf("all: %d, %v", len(got), err)
	}
	for i, r := range got {
		if r.ID != ids[i] || r.OrgID != e.org.ID || r.Aggregate == nil || r.Aggregate.RecordCount != 2 {
			t.Errorf("report %d = %+v, want %s", i, r, ids[i])
		}
	}
	got, _ = e.db.ReportsStoredAfter(store.ExportAggregate, ids[0], 1, nil)
	if len(got) != 1 || got[0].ID != ids[1] {
		t.Errorf("after first, limit 1: %+v", got)
	}
	got, _ = e.db.ReportsStoredAfter(store.ExportAggregate, "", 10, func(id string) bool { return id == ids[1] })
	if len(got) != 2 || got[0].ID != ids[0] || got[1].ID != ids[2] {
		t.Errorf("skipping the second: %+v", got)
	}
	e.commit(t, &store.IngestBatch{Reports: []*store.ReportDraft{late}})
	got, _ = e.db.ReportsStoredAfter(store.ExportAggregate, "", 10, nil)
	if len(got) != 4 || got[0].ID != late.ID() {
		t.Errorf("after the late commit, first = %+v, want %s", got[0], late.ID())
	}
	if p, _ := e.db.OldestPendingReport(); p != "" {
		t.Errorf("pending after the commit: %s", p)
	}
	if _, err := e.db.ReportsStoredAfter("bogus", "", 1, nil); err == nil {
		t.Error("an unknown kind was accepted")
	}
}

// TestExportCursor ensures a cursor is stored, a rewind moves every kind
// back to the floor of its time, and a sink's save made before a rewind
// does not undo it.
func TestExportCursor(t *testing.T) {
	e := newReportEnv(t)
	c, err := e.db.ExportCursor("clickhouse")
	if err != nil || c.Aggregate != "" || c.Rows != 0 {
		t.Fatalf("new cursor = %+v, %v", c, err)
	}
	now := time.Now()
	id := store.NewID()
	c.Aggregate, c.Failure, c.Rows = id, id, 7
	saved, err := e.db.SetExportCursor("clickhouse", c)
	if err != nil || saved.Aggregate != id {
		t.Fatalf("SetExportCursor = %+v, %v", saved, err)
	}
	if c2, _ := e.db.ExportCursor("clickhouse"); c2.Aggregate != id || c2.Failure != id || c2.TLS != "" || c2.Rows != 7 {
		t.Errorf("read back %+v", c2)
	}
	since := now.Add(-time.Hour)
	r, err := e.db.RewindExportCursor("clickhouse", since)
	if err != nil || r.Aggregate != store.IDFloor(since) || r.Failure != store.IDFloor(since) || r.TLS != "" {
		t.Fatalf("rewind = %+v, %v", r, err)
	}
	if !(r.Aggregate < id) {
		t.Errorf("floor %s not below %s", r.Aggregate, id)
	}
	// The sink saves the position it had before the rewind: the rewind wins.
	c.Rows = 9
	saved, _ = e.db.SetExportCursor("clickhouse", c)
	if saved.Aggregate != r.Aggregate || saved.Rows != 9 || saved.Rewound.IsZero() {
		t.Errorf("save over a rewind = %+v", saved)
	}
	if tm, ok := store.IDTime(id); !ok || tm.Sub(now) > time.Second || now.Sub(tm) > time.Second {
		t.Errorf("IDTime(%s) = %v, %v; want about %v", id, tm, ok, now)
	}
	if tm, ok := store.IDTime(store.IDFloor(since)); ok {
		t.Errorf("IDTime of a floor = %v: a floor is no id", tm)
	}
	if store.IDFloor(since) >= store.IDFloor(now) {
		t.Error("floors not in time order")
	}
}
