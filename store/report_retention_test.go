package store_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// draftOf returns a finished draft of dom over [begin, end] with n records.
func draftOf(t *testing.T, db *store.DB, dom *store.Domain, ext string, begin, end time.Time, n int) *store.ReportDraft {
	t.Helper()
	d, err := db.NewReportDraft(store.Report{DomainID: dom.ID, Domain: dom.Name, OrgID: dom.OrgID,
		OrgName: "google.com", OrgEmail: "noreply@google.com", ExternalReportID: ext,
		DateBegin: begin, DateEnd: end, ReceivedAt: storetest.Epoch(),
		PolicyPublished: store.PolicyPublished{Domain: dom.Name, P: "none", PCT: 100, ADKIM: "r", ASPF: "r"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		d.Add(testRecord(i))
	}
	d.Finish()
	return d
}

func commitAll(t *testing.T, ing *store.Ingester, drafts ...*store.ReportDraft) {
	t.Helper()
	outs, err := ing.Commit(&store.IngestBatch{Reports: drafts})
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range outs {
		if !o.Stored {
			t.Fatalf("draft %d not stored: %+v", i, o)
		}
	}
}

// TestDeleteReportsBefore ensures reports that ended before the cutoff go
// with their records, identity and roll-ups, over several transactions,
// while a report straddling the cutoff and newer ones stay.
func TestDeleteReportsBefore(t *testing.T) {
	e := newReportEnv(t)
	other := storetest.MustDomain(t, e.db, e.org.ID, "other.example")
	cutoff := reportDay(10)
	oct := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	var old []*store.ReportDraft
	for i := range 600 { // more than one transaction's worth
		begin := oct.Add(time.Duration(i) * time.Hour)
		dom := e.dom
		if i%2 == 1 {
			dom = other
		}
		old = append(old, draftOf(t, e.db, dom, fmt.Sprintf("old-%d", i), begin, begin.Add(time.Hour), 1))
	}
	commitAll(t, e.ing, old...)
	big := draftOf(t, e.db, e.dom, "big", reportDay(2), reportDay(3), 1000) // many record blocks
	straddle := draftOf(t, e.db, e.dom, "straddle", reportDay(9), reportDay(11), 2)
	fresh := draftOf(t, e.db, other, "fresh", reportDay(10), reportDay(11), 3)
	commitAll(t, e.ing, big, straddle, fresh)

	n, err := e.db.DeleteReportsBefore(cutoff)
	if err != nil || n != 601 {
		t.Fatalf("DeleteReportsBefore: %d, %v; want 601", n, err)
	}
	all := store.ReportFilter{Page: store.Page{Page: 1, Limit: 100}}
	reps, total, err := e.db.ListReports(e.org.ID, all)
	if err != nil || total != 2 {
		t.Fatalf("left: %d reports, %v", total, err)
	}
	for _, r := range reps {
		if r.ExternalReportID != "straddle" && r.ExternalReportID != "fresh" {
			t.Errorf("report %s left", r.ExternalReportID)
		}
	}
	err = e.db.ReportRecords(e.org.ID, big.ID(), func(*store.Record) error { return nil })
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("records of a deleted report: %v", err)
	}
	if p := store.ReportsPendingCount(e.db); p != 0 {
		t.Errorf("%d pending markers left", p)
	}
	// Roll-ups of the days before the cutoff's go, straddle's (the 9th) too;
	// fresh counts on the 10th.
	for dom, want := range map[*store.Domain]int{e.dom: 0, other: 1} {
		st, err := e.db.DomainStatistics(e.org.ID, dom.ID, oct, reportDay(20))
		if err != nil {
			t.Fatal(err)
		}
		if st.ReportCount != want {
			t.Errorf("roll-ups of %s count %d reports, want %d", dom.Name, st.ReportCount, want)
		}
	}
	// The identity went too: the same report comes in again as new.
	commitAll(t, e.ing, draftOf(t, e.db, e.dom, "big", reportDay(2), reportDay(3), 1))
	// Nothing more to delete is zero, not an error.
	if n, err := e.db.DeleteReportsBefore(reportDay(1)); n != 0 || err != nil {
		t.Errorf("second run: %d, %v", n, err)
	}
}

// TestDeleteAlertsBeforeAndPrune ensures old alerts go and the rules'
// memory is trimmed to what they still need.
func TestDeleteAlertsBeforeAndPrune(t *testing.T) {
	e := newAlertEnv(t)
	e.ingest(t, e.domA, e.yesterday(), src{"192.0.2.1", 20, 80})
	e.clock.Advance(2 * 24 * time.Hour)
	e.ingest(t, e.domB, e.yesterday(), src{"192.0.2.2", 20, 80})
	if n := store.DedupEntries(e.db); n != 2 {
		t.Fatalf("%d dedup entries, want 2", n)
	}
	pruned, err := e.db.PruneAlertState(e.clock.Now())
	if err != nil || pruned != 1 || store.DedupEntries(e.db) != 1 {
		t.Fatalf("prune after 2 days: %d, %v, %d left", pruned, err, store.DedupEntries(e.db))
	}
	e.clock.Advance(29 * 24 * time.Hour)
	pruned, err = e.db.PruneAlertState(e.clock.Now())
	// B's dedup entry and A's source (last seen 32 days ago) go; B's
	// source, seen 30 days ago, stays.
	if err != nil || pruned != 2 || store.SourceEntries(e.db) != 1 || store.DedupEntries(e.db) != 0 {
		t.Fatalf("prune after 31 days: %d, %v, sources %d", pruned, err, store.SourceEntries(e.db))
	}

	n, err := e.db.DeleteAlertsBefore(storetest.Epoch().Add(time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("DeleteAlertsBefore: %d, %v", n, err)
	}
	if got := e.alerts(t, e.orgA, store.AlertFilter{}); len(got) != 0 {
		t.Errorf("old alert left: %v", kinds(got))
	}
	if got := e.alerts(t, e.orgB, store.AlertFilter{}); len(got) != 1 {
		t.Errorf("newer alert gone: %v", kinds(got))
	}
}
