package store_test

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/alert"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// alertCount counts an organization's alerts.
func alertCount(tb testing.TB, e *alertEnv, orgID string) (int, error) {
	tb.Helper()
	_, n, err := e.db.ListAlerts(orgID, store.AlertFilter{Page: store.Page{Page: 1, Limit: 100}})
	if err != nil {
		tb.Fatal(err)
	}
	return n, err
}

// senderCandidate is a new_sender alert of domain dom for sender key.
func senderCandidate(dom *store.Domain, key string, day uint32) alert.Candidate {
	return alert.Candidate{Type: alert.TypeNewSender, Severity: alert.SeverityInfo,
		Title: key + " started sending as " + dom.Name, Message: "If it sends for you, add it to SPF.",
		Details: map[string]any{"sender": key},
		Dedup:   alert.DedupKey{Day: day, DomainID: dom.ID, Type: alert.TypeNewSender, Cause: key}}
}

// TestSenderCheckPersists ensures RecordSenderCheck keeps the state across
// a reopen, raises the alerts with their dedup entries and webhook
// deliveries, and writes nothing when the state moved on.
func TestSenderCheckPersists(t *testing.T) {
	e := newAlertEnv(t)
	mustWebhook(t, e.db, e.orgA.ID, "hook")
	st, err := e.db.SenderAlertState(e.domA.ID)
	if err != nil || st.Stage != "" || st.Announced != nil {
		t.Fatalf("a new domain's state %+v, %v", st, err)
	}
	today := alert.Day(e.clock.Now())
	next := alert.SenderState{Stage: "fix_senders", Announced: map[string]uint32{"s:Intuit Mailchimp": today}}
	dedup := store.DedupEntries(e.db)
	as, err := e.db.RecordSenderCheck(store.SenderCheck{DomainID: e.domA.ID, Seen: st, Next: next,
		Alerts: []alert.Candidate{senderCandidate(e.domA, "s:Intuit Mailchimp", today)}})
	if err != nil || len(as) != 1 {
		t.Fatalf("record: %v %v", as, err)
	}
	a := as[0]
	if a.Type != alert.TypeNewSender || a.OrgID != e.orgA.ID || a.DomainID == nil || *a.DomainID != e.domA.ID ||
		a.Status != store.AlertPending || !a.CreatedAt.Equal(e.clock.Now()) || string(a.Details) != `{"sender":"s:Intuit Mailchimp"}` {
		t.Errorf("alert %+v", a)
	}
	if got := storetest.Alert(t, e.db, e.orgA.ID, a.ID); got == nil || got.Title != a.Title {
		t.Errorf("stored alert %+v", got)
	}
	if got := storetest.Alert(t, e.db, e.orgB.ID, a.ID); got != nil {
		t.Errorf("another organization sees the alert: %+v", got)
	}
	if n := store.DedupEntries(e.db); n != dedup+1 {
		t.Errorf("dedup entries %d, want %d", n, dedup+1)
	}
	ds := due(t, e.db, e.clock.Now())
	if len(ds) != 1 || ds[0].AlertID != a.ID {
		t.Fatalf("outbox %+v", ds)
	}
	var body store.Alert
	if err := json.Unmarshal(ds[0].Alert, &body); err != nil || body.Type != alert.TypeNewSender {
		t.Errorf("outbox alert %s: %v", ds[0].Alert, err)
	}

	// A check that started from the old state is late: nothing written.
	_, err = e.db.RecordSenderCheck(store.SenderCheck{DomainID: e.domA.ID, Seen: st, Next: next,
		Alerts: []alert.Candidate{senderCandidate(e.domA, "s:Intuit Mailchimp", today)}})
	if !errors.Is(err, store.ErrConflict) {
		t.Errorf("a late check: %v", err)
	}
	if n, _ := alertCount(t, e, e.orgA.ID); n != 1 {
		t.Errorf("%d alerts after a late check", n)
	}

	got, err := e.db.SenderAlertState(e.domA.ID)
	if err != nil || got.Stage != "fix_senders" || got.Announced["s:Intuit Mailchimp"] != today {
		t.Errorf("state %+v, %v", got, err)
	}
	if other, _ := e.db.SenderAlertState(e.domB.ID); other.Stage != "" {
		t.Errorf("another domain's state %+v", other)
	}
}

// TestSenderStateSurvivesReopen ensures the state is on disk.
func TestSenderStateSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dmarcd.db")
	db := mustOpen(t, path, nil)
	org := storetest.MustOrganization(t, db, "a", store.PlanUnlimited)
	dom := storetest.MustDomain(t, db, org.ID, "example.com")
	next := alert.SenderState{Stage: "ready_for_quarantine", Ready: map[string]uint32{"ready_for_quarantine": 20000}}
	if _, err := db.RecordSenderCheck(store.SenderCheck{DomainID: dom.ID, Next: next}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = mustOpen(t, path, nil)
	got, err := db.SenderAlertState(dom.ID)
	if err != nil || got.Stage != next.Stage || got.Ready["ready_for_quarantine"] != 20000 {
		t.Errorf("state after reopening %+v, %v", got, err)
	}
}

// TestSenderCheckBadInput ensures a gone domain, a bad alert or an alert
// of another domain write nothing.
func TestSenderCheckBadInput(t *testing.T) {
	e := newAlertEnv(t)
	today := alert.Day(e.clock.Now())
	next := alert.SenderState{Stage: "fix_senders"}
	if _, err := e.db.RecordSenderCheck(store.SenderCheck{DomainID: "no-such-domain", Next: next}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown domain: %v", err)
	}
	bad := senderCandidate(e.domA, "d:example.org", today)
	bad.Type = "no_such_type"
	if _, err := e.db.RecordSenderCheck(store.SenderCheck{DomainID: e.domA.ID, Next: next, Alerts: []alert.Candidate{bad}}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("bad type: %v", err)
	}
	if _, err := e.db.RecordSenderCheck(store.SenderCheck{DomainID: e.domA.ID, Next: next,
		Alerts: []alert.Candidate{senderCandidate(e.domB, "d:example.org", today)}}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("another domain's alert: %v", err)
	}
	if st, _ := e.db.SenderAlertState(e.domA.ID); st.Stage != "" {
		t.Errorf("state written by a failed check: %+v", st)
	}
	if n, _ := alertCount(t, e, e.orgA.ID); n != 0 {
		t.Errorf("%d alerts after failed checks", n)
	}
}

// TestSenderStateGoesWithDomain ensures deleting a domain forgets its
// sender state.
func TestSenderStateGoesWithDomain(t *testing.T) {
	e := newAlertEnv(t)
	if _, err := e.db.RecordSenderCheck(store.SenderCheck{DomainID: e.domA.ID, Next: alert.SenderState{Stage: "enforced"}}); err != nil {
		t.Fatal(err)
	}
	if err := e.db.DeleteDomain(e.orgA.ID, e.domA.ID); err != nil {
		t.Fatal(err)
	}
	if st, err := e.db.SenderAlertState(e.domA.ID); err != nil || st.Stage != "" {
		t.Errorf("state of a deleted domain %+v, %v", st, err)
	}
}

// TestFirstSourceDay ensures the first day of a domain's reports is found.
func TestFirstSourceDay(t *testing.T) {
	e := newAlertEnv(t)
	if _, ok, err := e.db.FirstSourceDay(e.domA.ID); ok || err != nil {
		t.Fatalf("a domain without reports: %v %v", ok, err)
	}
	y := e.yesterday()
	e.ingest(t, e.domA, y, src{ip: "192.0.2.1", pass: 5})
	e.ingest(t, e.domA, y.AddDate(0, 0, -3), src{ip: "192.0.2.1", pass: 5})
	e.ingest(t, e.domB, y.AddDate(0, 0, -9), src{ip: "192.0.2.1", pass: 5})
	day, ok, err := e.db.FirstSourceDay(e.domA.ID)
	if err != nil || !ok || !day.Equal(y.AddDate(0, 0, -3)) {
		t.Errorf("first day %v %v %v, want %v", day, ok, err, y.AddDate(0, 0, -3))
	}
	if day.Location() != time.UTC {
		t.Errorf("day in %v", day.Location())
	}
}
