package store_test

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/alert"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// mailboxAlerts is every mailbox_failing alert of organization orgID.
func mailboxAlerts(tb testing.TB, db *store.DB, orgID string) []*store.Alert {
	tb.Helper()
	all, _, err := db.ListAlerts(orgID, store.AlertFilter{Page: store.Page{Page: 1, Limit: 100}})
	if err != nil {
		tb.Fatal(err)
	}
	var out []*store.Alert
	for _, a := range all {
		if a.Type == alert.TypeMailboxFailing {
			out = append(out, a)
		}
	}
	return out
}

// TestMailboxFailingAlert drives a mailbox's polls with an injected clock:
// a day of failures raises mailbox_failing once, with its webhook delivery
// queued and the alert hook called after the commit; a poll that works
// ends the run; another day of failures raises it again; a change of the
// mailbox's settings starts the run over.
func TestMailboxFailingAlert(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch())
	db := storetest.OpenWithClock(t, clock)
	org := storetest.MustOrganization(t, db, "acme", store.PlanBusiness)
	other := storetest.MustOrganization(t, db, "other", store.PlanBusiness)
	hook := mustWebhook(t, db, org.ID, "ops")
	mustWebhook(t, db, other.ID, "theirs")
	m := mustMailbox(t, db, org.ID, "dmarc@example.com")
	var mu sync.Mutex
	var hooked []*store.Alert
	db.OnAlert(func(a *store.Alert) { mu.Lock(); hooked = append(hooked, a); mu.Unlock() })

	t0 := clock.Now()
	poll := func(after time.Duration, failure string) {
		t.Helper()
		clock.Set(t0.Add(after))
		if err := db.RecordMailboxPoll(m.ID, store.MailboxPoll{At: clock.Now(), Error: failure}); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(when string, n int) {
		t.Helper()
		if got := mailboxAlerts(t, db, org.ID); len(got) != n {
			t.Fatalf("%s: %d mailbox_failing alerts, want %d", when, len(got), n)
		}
	}
	const loginFailed = "login failed: AUTHENTICATIONFAILED: Authentication failed."
	poll(0, loginFailed)
	if got, _ := db.FindMailbox(org.ID, m.ID); got.FailingSince == nil || !got.FailingSince.Equal(t0) {
		t.Errorf("failing since %v, want %v", got.FailingSince, t0)
	}
	poll(12*time.Hour, "connect: connection refused")
	poll(24*time.Hour-time.Second, loginFailed)
	expect("a second short of a day", 0)
	poll(24*time.Hour, loginFailed)
	expect("a day of failures", 1)
	a := mailboxAlerts(t, db, org.ID)[0]
	var d map[string]any
	_ = json.Unmarshal(a.Details, &d)
	if a.Severity != alert.SeverityWarning || a.DomainID != nil || a.OrgID != org.ID || a.Status != store.AlertPending ||
		!a.CreatedAt.Equal(t0.Add(24*time.Hour)) || d["mailbox_id"] != m.ID || d["last_error"] != loginFailed ||
		d["failing_since"] != t0.Format(time.RFC3339) {
		t.Errorf("alert %+v details %s", a, a.Details)
	}
	ds := due(t, db, clock.Now())
	if len(ds) != 1 || ds[0].WebhookID != hook.ID || ds[0].AlertID != a.ID {
		t.Errorf("deliveries %+v, want one to %s for %s", ds, hook.ID, a.ID)
	}
	mu.Lock()
	if len(hooked) != 1 || hooked[0].ID != a.ID {
		t.Errorf("alert hook called with %v", hooked)
	}
	mu.Unlock()
	if n := len(mailboxAlerts(t, db, other.ID)); n != 0 {
		t.Errorf("the other organization got %d alerts", n)
	}

	poll(30*time.Hour, loginFailed)
	poll(72*time.Hour, loginFailed)
	expect("the same run, days later", 1)

	// A poll that works ends the run; a new run needs another full day.
	poll(73*time.Hour, "")
	if got, _ := db.FindMailbox(org.ID, m.ID); got.FailingSince != nil || got.LastError != nil {
		t.Errorf("after a good poll: failing since %v, last error %v", got.FailingSince, got.LastError)
	}
	poll(74*time.Hour, loginFailed)
	poll(97*time.Hour, loginFailed)
	expect("23 hours into the second run", 1)
	poll(98*time.Hour, loginFailed)
	expect("a day into the second run", 2)

	// A change of settings starts the run over, and so does deactivating.
	poll(99*time.Hour, "")
	poll(100*time.Hour, loginFailed)
	folder := "Reports"
	if _, err := db.UpdateMailbox(org.ID, m.ID, store.MailboxUpdate{Folder: &folder}); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.FindMailbox(org.ID, m.ID); got.FailingSince != nil {
		t.Errorf("failing since %v after a change of folder", got.FailingSince)
	}
	poll(110*time.Hour, loginFailed)
	poll(124*time.Hour, loginFailed)
	expect("a day after the failures began, 14 hours after the change", 2)
	poll(134*time.Hour, loginFailed)
	expect("a day after the change", 3)

	// With the alert rules off, nothing is raised, but the run is kept.
	if err := db.SetAlertRules(alert.Rules{Disabled: true}); err != nil {
		t.Fatal(err)
	}
	poll(135*time.Hour, "")
	poll(136*time.Hour, loginFailed)
	poll(200*time.Hour, loginFailed)
	expect("rules off", 3)
	if got, _ := db.FindMailbox(org.ID, m.ID); got.FailingSince == nil {
		t.Error("the run is not kept with the rules off")
	}
}

// TestMailboxFailingStateNotInAPI ensures the rule's state stays out of
// the mailbox's JSON.
func TestMailboxFailingStateNotInAPI(t *testing.T) {
	db := storetest.Open(t)
	org := storetest.MustOrganization(t, db, "acme", store.PlanBusiness)
	m := mustMailbox(t, db, org.ID, "dmarc@example.com")
	if err := db.RecordMailboxPoll(m.ID, store.MailboxPoll{At: time.Now(), Error: "down"}); err != nil {
		t.Fatal(err)
	}
	got, _ := db.FindMailbox(org.ID, m.ID)
	raw, _ := json.Marshal(got)
	var fields map[string]any
	_ = json.Unmarshal(raw, &fields)
	for k := range fields {
		if k == "failing_since" || k == "failing_alerted" {
			t.Errorf("the API's JSON has %s: %s", k, raw)
		}
	}
	if got.FailingSince == nil {
		t.Error("FailingSince not set after a failed poll")
	}
}
