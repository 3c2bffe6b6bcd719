package store_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/alert"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// TestDismissAlerts ensures a bulk dismissal dismisses the organization's
// alerts among the ids (another organization's, unknown and malformed ids
// skipped, a repeated id counted once, an already dismissed alert counted
// and left as it was), and does it in one commit, not one per alert: the
// pages it writes are far fewer than the alerts, where a commit per alert
// writes at least its alert's page and a meta page each.
func TestDismissAlerts(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch())
	db := storetest.OpenWithClock(t, clock)
	a := storetest.MustOrganization(t, db, "a", store.PlanUnlimited)
	b := storetest.MustOrganization(t, db, "b", store.PlanUnlimited)
	mk := func(orgID string) *store.Alert {
		al := &store.Alert{OrgID: orgID, Type: alert.TypeDNSRecordChanged, Severity: alert.SeverityInfo,
			Title: "t", Message: "m", Details: json.RawMessage(`{}`), CreatedAt: clock.Now()}
		if err := db.QueueTestAlert(al); err != nil {
			t.Fatal(err)
		}
		return al
	}
	const n = 300
	var ids []string
	for range n {
		ids = append(ids, mk(a.ID).ID)
	}
	before := mk(a.ID)
	clock.Advance(time.Minute)
	first, err := db.DismissAlert(a.ID, before.ID)
	if err != nil {
		t.Fatal(err)
	}
	other := mk(b.ID)
	clock.Advance(time.Minute)

	all := append(append([]string{}, ids...), ids[0], before.ID, other.ID, store.NewID(), "nope", "")
	start := db.IOStats().PageWrites
	got, err := db.DismissAlerts(a.ID, all)
	if err != nil {
		t.Fatal(err)
	}
	writes := db.IOStats().PageWrites - start
	if got != n+1 {
		t.Errorf("DismissAlerts counted %d, want %d", got, n+1)
	}
	if writes >= n {
		t.Errorf("%d pages written for %d dismissals: not one commit", writes, n)
	}
	for _, id := range ids {
		al := storetest.Alert(t, db, a.ID, id)
		if al.Status != store.AlertDismissed || al.DismissedAt == nil || !al.DismissedAt.Equal(clock.Now()) {
			t.Fatalf("alert %s after the bulk dismissal: %+v", id, al)
		}
	}
	if al := storetest.Alert(t, db, a.ID, before.ID); !al.DismissedAt.Equal(*first.DismissedAt) {
		t.Errorf("an alert dismissed before got a new dismissed_at: %v", al.DismissedAt)
	}
	if al := storetest.Alert(t, db, b.ID, other.ID); al.Status != store.AlertPending {
		t.Errorf("another organization's alert is %s", al.Status)
	}
	open, total, err := db.ListAlerts(a.ID, store.AlertFilter{Status: store.AlertPending, Page: store.Page{Page: 1, Limit: 10}})
	if err != nil || total != 0 {
		t.Errorf("%d pending alerts left in the index (%v, %v)", total, open, err)
	}
	if got, err := db.DismissAlerts(a.ID, nil); got != 0 || err != nil {
		t.Errorf("no ids: %d, %v", got, err)
	}
}
