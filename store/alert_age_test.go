package store_test

import (
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
)

// TestOldFailureReportsRaiseNoAlert ensures a failure report whose
// message arrived more than MaxReportAge (7 days) ago, as in an imported
// archive, raises no forensic_report_received, as old aggregate reports
// raise none, while a fresh one does.
func TestOldFailureReportsRaiseNoAlert(t *testing.T) {
	e := newAlertEnv(t)
	ref := func(age time.Duration) store.FailureRef {
		return store.FailureRef{ID: store.NewID(), OrgID: e.domA.OrgID, DomainID: e.domA.ID, SourceIP: "198.51.100.9",
			ArrivalDate: e.clock.Now().Add(-age)}
	}
	if err := store.RaiseForFailures(e.db, []store.FailureRef{ref(8 * 24 * time.Hour), ref(400 * 24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if as := e.alerts(t, e.orgA, store.AlertFilter{}); len(as) != 0 {
		t.Fatalf("old failure reports raised %v", kinds(as))
	}
	if err := store.RaiseForFailures(e.db, []store.FailureRef{ref(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if as := e.alerts(t, e.orgA, store.AlertFilter{}); len(as) != 1 {
		t.Fatalf("fresh failure report raised %v", kinds(as))
	}
}
