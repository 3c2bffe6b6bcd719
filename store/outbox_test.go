package store_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/alert"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
	"github.com/dmarcd/dmarcd/webhook"
)

// delays are the retry delays of SPEC.md.
var delays = []time.Duration{30 * time.Second, 120 * time.Second}

// queueAlert creates an alert of organization orgID at now, queueing its
// deliveries.
func queueAlert(tb testing.TB, db *store.DB, orgID string, now time.Time) *store.Alert {
	tb.Helper()
	a := &store.Alert{OrgID: orgID, Type: alert.TypeDNSRecordChanged, Severity: alert.SeverityWarning,
		Title: "DMARC record changed", Message: "p=reject became p=none", CreatedAt: now,
		Details: json.RawMessage(`{"old":"v=DMARC1; p=reject","new":"v=DMARC1; p=none"}`)}
	if err := db.QueueTestAlert(a); err != nil {
		tb.Fatalf("queue alert: %v", err)
	}
	return a
}

func due(tb testing.TB, db *store.DB, now time.Time) []*store.OutboxEntry {
	tb.Helper()
	ds, err := db.DueDeliveries(now, 1000, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return ds
}

func finish(tb testing.TB, db *store.DB, rs ...store.DeliveryResult) []store.DeliveryOutcome {
	tb.Helper()
	outs, err := db.FinishDeliveries(rs, delays)
	if err != nil {
		tb.Fatal(err)
	}
	return outs
}

func ok(d *store.OutboxEntry, at time.Time) store.DeliveryResult {
	return store.DeliveryResult{Entry: d, Success: true, StatusCode: new(204), At: at}
}

func failed(d *store.OutboxEntry, at time.Time) store.DeliveryResult {
	return store.DeliveryResult{Entry: d, StatusCode: new(500), At: at}
}

func alertStatus(tb testing.TB, db *store.DB, orgID, id string) string {
	tb.Helper()
	a := storetest.Alert(tb, db, orgID, id)
	if a == nil {
		tb.Fatalf("no alert %s", id)
	}
	return a.Status
}

func depth(tb testing.TB, db *store.DB) int {
	tb.Helper()
	n, err := db.OutboxDepth()
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// failUntilDisabled fails deliveries to webhook id until it is disabled.
func failUntilDisabled(tb testing.TB, db *store.DB, orgID, id string) {
	tb.Helper()
	now := storetest.Epoch()
	for range store.MaxWebhookFailures {
		queueAlert(tb, db, orgID, now)
		for _, d := range due(tb, db, now) {
			if d.WebhookID == id {
				finish(tb, db, failed(d, now))
			}
		}
	}
	if w, _ := db.FindWebhook(orgID, id); w.IsActive {
		tb.Fatalf("webhook still active after %d failures: %+v", store.MaxWebhookFailures, w)
	}
}

// TestEnqueueAlertDeliveries ensures an alert is queued once for each
// active webhook of its organization, with one body and event id, due at
// once, and for nobody else.
func TestEnqueueAlertDeliveries(t *testing.T) {
	db := storetest.Open(t)
	now := storetest.Epoch()
	org := storetest.MustOrganization(t, db, "a", store.PlanUnlimited)
	other := storetest.MustOrganization(t, db, "b", store.PlanUnlimited)
	bare := storetest.MustOrganization(t, db, "c", store.PlanUnlimited)
	w1, w2 := mustWebhook(t, db, org.ID, "one"), mustWebhook(t, db, org.ID, "two")
	off := mustWebhook(t, db, org.ID, "off")
	if _, err := db.UpdateWebhook(org.ID, off.ID, store.WebhookUpdate{IsActive: new(false)}); err != nil {
		t.Fatal(err)
	}
	mustWebhook(t, db, other.ID, "other")

	a := queueAlert(t, db, org.ID, now)
	queueAlert(t, db, bare.ID, now) // no webhook: nothing queued
	ds := due(t, db, now)
	if len(ds) != 2 {
		t.Fatalf("%d deliveries due, want 2 (one per active webhook)", len(ds))
	}
	got := map[string]bool{}
	for _, d := range ds {
		got[d.WebhookID] = true
		if d.AlertID != a.ID || d.OrgID != org.ID || d.Attempt != 1 || !d.Due.Equal(now) ||
			!strings.HasPrefix(d.EventID, "evt_") || !store.ValidID(d.EventID[4:]) ||
			string(d.Secret) != string(testSecret) || !strings.HasPrefix(d.URL, "https://hooks.example.com/") {
			t.Errorf("delivery = %+v", d)
		}
		if d.EventID != ds[0].EventID || string(d.Alert) != string(ds[0].Alert) || !d.CreatedAt.Equal(now) {
			t.Error("the deliveries of one alert differ in event id, alert or time")
		}
	}
	if !got[w1.ID] || !got[w2.ID] {
		t.Errorf("deliveries go to %v, want %s and %s", got, w1.ID, w2.ID)
	}

	var al map[string]any
	if err := json.Unmarshal(ds[0].Alert, &al); err != nil {
		t.Fatal(err)
	}
	if al["id"] != a.ID || al["type"] != alert.TypeDNSRecordChanged || al["status"] != "pending" ||
		al["domain_id"] != nil || al["sent_at"] != nil || al["created_at"] != "2026-11-22T09:30:00Z" {
		t.Errorf("alert of the delivery = %v", al)
	}
	if _, leaked := al["org_id"]; leaked || strings.Contains(string(ds[0].Alert), string(testSecret)) {
		t.Errorf("alert carries internals: %s", ds[0].Alert)
	}

	if n := len(due(t, db, now.Add(-time.Second))); n != 0 {
		t.Errorf("%d deliveries due before their time", n)
	}
	if ds, _ := db.DueDeliveries(now, 1, nil); len(ds) != 1 {
		t.Errorf("max 1 gave %d", len(ds))
	}
	skipped, _ := db.DueDeliveries(now, 10, func(d *store.OutboxEntry) bool { return d.WebhookID == w1.ID })
	if len(skipped) != 1 || skipped[0].WebhookID != w2.ID {
		t.Errorf("skip left %d deliveries", len(skipped))
	}
	if got := alertStatus(t, db, org.ID, a.ID); got != store.AlertPending {
		t.Errorf("status %s before any delivery", got)
	}
}

// TestEnqueueNeedsWebhookPlan ensures an organization whose plan lost
// webhooks gets no deliveries, though its webhooks remain.
func TestEnqueueNeedsWebhookPlan(t *testing.T) {
	db := storetest.Open(t)
	org := storetest.MustOrganization(t, db, "a", store.PlanBusiness)
	mustWebhook(t, db, org.ID, "one")
	if _, err := db.SetOrganizationPlan(org.ID, store.PlanStarter); err != nil {
		t.Fatal(err)
	}
	queueAlert(t, db, org.ID, storetest.Epoch())
	if n := depth(t, db); n != 0 {
		t.Errorf("%d deliveries queued on a plan without webhooks", n)
	}
}

// TestAlertSentOnceEveryWebhookHasIt ensures a success records the last
// delivery on the webhook, and the alert turns sent only with the last
// active webhook's success.
func TestAlertSentOnceEveryWebhookHasIt(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch())
	db := storetest.OpenWithClock(t, clock)
	now := storetest.Epoch()
	org := storetest.MustOrganization(t, db, "a", store.PlanUnlimited)
	mustWebhook(t, db, org.ID, "one")
	mustWebhook(t, db, org.ID, "two")
	a := queueAlert(t, db, org.ID, now)
	ds := due(t, db, now)

	at := now.Add(1500 * time.Millisecond)
	outs := finish(t, db, ok(ds[0], at))
	if outs[0].Outcome != store.DeliverySucceeded || outs[0].AlertSent {
		t.Errorf("first success: %+v", outs[0])
	}
	if got := alertStatus(t, db, org.ID, a.ID); got != store.AlertPending {
		t.Errorf("status %s with one webhook still to go", got)
	}
	w, _ := db.FindWebhook(org.ID, ds[0].WebhookID)
	if w.LastDeliveryAt == nil || !w.LastDeliveryAt.Equal(now.Add(time.Second)) || w.LastStatusCode == nil ||
		*w.LastStatusCode != 204 || w.ConsecutiveFailures != 0 {
		t.Errorf("webhook after success = %+v", w)
	}
	clock.Advance(time.Minute)
	outs = finish(t, db, ok(ds[1], now.Add(2*time.Second)))
	if !outs[0].AlertSent {
		t.Errorf("last success: %+v, want AlertSent", outs[0])
	}
	sent := storetest.Alert(t, db, org.ID, a.ID)
	if sent.Status != store.AlertSent || sent.SentAt == nil || !sent.SentAt.Equal(now.Add(2*time.Second)) {
		t.Errorf("alert = %s at %v, want sent at the last delivery", sent.Status, sent.SentAt)
	}
	if n := depth(t, db); n != 0 {
		t.Errorf("outbox depth %d after every delivery", n)
	}
	// A result that comes again for the same entry changes nothing.
	if outs := finish(t, db, ok(ds[1], now)); outs[0].Outcome != store.DeliveryDropped {
		t.Errorf("repeated result: %+v", outs[0])
	}
}

// TestRetriesThenGiveUp ensures a failed attempt is due again after each
// configured delay with the same event and body, and the third failure
// gives it up, leaving the alert pending.
func TestRetriesThenGiveUp(t *testing.T) {
	db := storetest.Open(t)
	t0 := storetest.Epoch()
	org := storetest.MustOrganization(t, db, "a", store.PlanUnlimited)
	mustWebhook(t, db, org.ID, "one")
	a := queueAlert(t, db, org.ID, t0)
	first := due(t, db, t0)[0]

	outs := finish(t, db, failed(first, t0))
	if outs[0].Outcome != store.DeliveryRetrying || !outs[0].NextDue.Equal(t0.Add(30*time.Second)) || outs[0].ConsecutiveFailures != 1 {
		t.Fatalf("attempt 1 failed: %+v", outs[0])
	}
	if n := len(due(t, db, t0.Add(29*time.Second))); n != 0 {
		t.Errorf("%d due before the 30 s delay", n)
	}
	second := due(t, db, t0.Add(30*time.Second))
	if len(second) != 1 || second[0].Attempt != 2 || second[0].EventID != first.EventID ||
		string(second[0].Alert) != string(first.Alert) || second[0].ID != first.ID {
		t.Fatalf("attempt 2 = %+v", second)
	}
	t1 := t0.Add(31 * time.Second)
	if outs = finish(t, db, failed(second[0], t1)); outs[0].Outcome != store.DeliveryRetrying ||
		!outs[0].NextDue.Equal(t1.Add(120*time.Second)) {
		t.Fatalf("attempt 2 failed: %+v", outs[0])
	}
	if n := len(due(t, db, t1.Add(119*time.Second))); n != 0 {
		t.Errorf("%d due before the 120 s delay", n)
	}
	third := due(t, db, t1.Add(120*time.Second))
	if len(third) != 1 || third[0].Attempt != 3 {
		t.Fatalf("attempt 3 = %+v", third)
	}
	if outs = finish(t, db, store.DeliveryResult{Entry: third[0], At: t1.Add(130 * time.Second)}); outs[0].Outcome != store.DeliveryGivenUp {
		t.Fatalf("attempt 3 failed: %+v", outs[0])
	}
	if n := depth(t, db); n != 0 {
		t.Errorf("outbox depth %d after giving up", n)
	}
	w, _ := db.FindWebhook(org.ID, first.WebhookID)
	if w.ConsecutiveFailures != 3 || !w.IsActive || w.LastStatusCode != nil {
		t.Errorf("webhook after 3 failures = %+v, want 3 failures, active, no status (no answer)", w)
	}
	if got := alertStatus(t, db, org.ID, a.ID); got != store.AlertPending {
		t.Errorf("alert %s after its only delivery was given up", got)
	}
}

// TestGivenUpKeepsAlertPending ensures an alert delivered to one webhook
// but given up for another that is still active stays pending.
func TestGivenUpKeepsAlertPending(t *testing.T) {
	db := storetest.Open(t)
	now := storetest.Epoch()
	org := storetest.MustOrganization(t, db, "a", store.PlanUnlimited)
	mustWebhook(t, db, org.ID, "one")
	mustWebhook(t, db, org.ID, "two")
	a := queueAlert(t, db, org.ID, now)
	ds := due(t, db, now)
	if _, err := db.FinishDeliveries([]store.DeliveryResult{failed(ds[1], now)}, nil); err != nil {
		t.Fatal(err) // no retries configured: given up at once
	}
	if outs := finish(t, db, ok(ds[0], now)); outs[0].AlertSent {
		t.Error("alert sent though one active webhook never got it")
	}
	if got := alertStatus(t, db, org.ID, a.ID); got != store.AlertPending {
		t.Errorf("status %s", got)
	}
}

// TestAutoDisable ensures the tenth consecutive failure disables the
// webhook and drops its deliveries, and that the alerts then count as
// delivered once every webhook still active has them.
func TestAutoDisable(t *testing.T) {
	db := storetest.Open(t)
	now := storetest.Epoch()
	org := storetest.MustOrganization(t, db, "a", store.PlanUnlimited)
	bad, good := mustWebhook(t, db, org.ID, "bad"), mustWebhook(t, db, org.ID, "good")
	var alerts []*store.Alert
	for range 4 {
		alerts = append(alerts, queueAlert(t, db, org.ID, now))
	}
	// Fail the bad webhook's deliveries, each up to its last attempt,
	// until ten attempts have failed: the last alert's delivery is then
	// still pending when the tenth failure disables the webhook.
	var last store.DeliveryOutcome
	at := now
	for n := 0; n < store.MaxWebhookFailures; {
		for _, d := range due(t, db, at) {
			if d.WebhookID != bad.ID || n == store.MaxWebhookFailures {
				continue
			}
			last = finish(t, db, failed(d, at))[0]
			n++
			if n < store.MaxWebhookFailures && last.ConsecutiveFailures != n {
				t.Fatalf("failure %d counted as %d", n, last.ConsecutiveFailures)
			}
		}
		at = at.Add(3 * time.Minute)
	}
	if last.Outcome != store.DeliveryDisabled {
		t.Fatalf("tenth failure: %+v", last)
	}
	w, _ := db.FindWebhook(org.ID, bad.ID)
	if w.IsActive || w.DisabledReason == nil || *w.DisabledReason != "consecutive_failures" || w.ConsecutiveFailures != 10 {
		t.Errorf("webhook = %+v", w)
	}
	left := due(t, db, at.Add(time.Hour))
	for _, d := range left {
		if d.WebhookID != good.ID {
			t.Errorf("a delivery to the disabled webhook is still queued: %+v", d)
		}
	}
	if len(left) != 4 {
		t.Fatalf("%d deliveries to the good webhook, want 4", len(left))
	}
	for _, d := range left {
		finish(t, db, ok(d, at))
	}
	// The bad webhook gave up one alert and dropped the others; it is no
	// longer active, so every alert has reached every active webhook.
	for _, a := range alerts {
		if got := alertStatus(t, db, org.ID, a.ID); got != store.AlertSent {
			t.Errorf("alert %s is %s, want sent", a.ID, got)
		}
	}
}

// TestDeleteWebhookDropsDeliveries ensures deleting a webhook removes its
// queued deliveries, a result arriving for one afterwards changes
// nothing, and the alert counts as sent when the remaining webhook has it.
func TestDeleteWebhookDropsDeliveries(t *testing.T) {
	db := storetest.Open(t)
	now := storetest.Epoch()
	org := storetest.MustOrganization(t, db, "a", store.PlanUnlimited)
	keep, gone := mustWebhook(t, db, org.ID, "keep"), mustWebhook(t, db, org.ID, "gone")
	a := queueAlert(t, db, org.ID, now)
	ds := due(t, db, now)
	var toKeep, toGone *store.OutboxEntry
	for _, d := range ds {
		if d.WebhookID == keep.ID {
			toKeep = d
		} else {
			toGone = d
		}
	}
	finish(t, db, ok(toKeep, now))
	if err := db.DeleteWebhook(org.ID, gone.ID); err != nil {
		t.Fatal(err)
	}
	if n := depth(t, db); n != 0 {
		t.Errorf("outbox depth %d after the delete", n)
	}
	if outs := finish(t, db, failed(toGone, now)); outs[0].Outcome != store.DeliveryDropped {
		t.Errorf("result for a deleted webhook's delivery: %+v", outs[0])
	}
	if got := alertStatus(t, db, org.ID, a.ID); got != store.AlertSent {
		t.Errorf("alert %s, want sent: the only remaining webhook has it", got)
	}
}

// TestDeactivateDropsDeliveries ensures deactivating a webhook drops its
// deliveries and an alert nobody received stays pending.
func TestDeactivateDropsDeliveries(t *testing.T) {
	db := storetest.Open(t)
	now := storetest.Epoch()
	org := storetest.MustOrganization(t, db, "a", store.PlanUnlimited)
	w := mustWebhook(t, db, org.ID, "one")
	a := queueAlert(t, db, org.ID, now)
	d := due(t, db, now)[0]
	if _, err := db.UpdateWebhook(org.ID, w.ID, store.WebhookUpdate{IsActive: new(false)}); err != nil {
		t.Fatal(err)
	}
	if n := depth(t, db); n != 0 {
		t.Errorf("outbox depth %d", n)
	}
	if outs := finish(t, db, ok(d, now)); outs[0].Outcome != store.DeliveryDropped {
		t.Errorf("in-flight result: %+v", outs[0])
	}
	if got := alertStatus(t, db, org.ID, a.ID); got != store.AlertPending {
		t.Errorf("alert %s", got)
	}
	if w, _ := db.FindWebhook(org.ID, w.ID); w.LastDeliveryAt != nil {
		t.Errorf("a dropped result changed the webhook: %+v", w)
	}
}

// TestOutboxSurvivesReopen ensures a delivery waiting for its retry is
// still there, at its attempt, after the database is closed and opened.
func TestOutboxSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dmarcd.db")
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := storetest.Epoch()
	org := storetest.MustOrganization(t, db, "a", store.PlanUnlimited)
	mustWebhook(t, db, org.ID, "one")
	queueAlert(t, db, org.ID, now)
	first := due(t, db, now)[0]
	finish(t, db, failed(first, now))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = mustOpen(t, path, nil)
	ds := due(t, db, now.Add(30*time.Second))
	if len(ds) != 1 || ds[0].Attempt != 2 || ds[0].EventID != first.EventID || string(ds[0].Alert) != string(first.Alert) {
		t.Errorf("after reopening: %+v", ds)
	}
	if err := db.Check(); err != nil {
		t.Error(err)
	}
}

// TestOldOutboxEntriesDeliver ensures an outbox entry written before the
// body was built at delivery time (version 1: the whole body stored) is
// still due with what rebuilds that body byte for byte (package webhook
// builds the body of every attempt from the entry), and that its
// delivery settles the alert. It was worker's test, which rewrote the
// entry through the store's bbolt handle.
func TestOldOutboxEntriesDeliver(t *testing.T) {
	db := storetest.Open(t)
	now := storetest.Epoch()
	org := storetest.MustOrganization(t, db, "a", store.PlanUnlimited)
	mustWebhook(t, db, org.ID, "one")
	a := queueAlert(t, db, org.ID, now)
	alertJSON, err := json.Marshal(a) // the alert as the entry holds it
	if err != nil {
		t.Fatal(err)
	}
	var body []byte
	err = store.OutboxAsVersion1(db, func(eventID string) []byte {
		// The body as the store of version 1 built it.
		body = fmt.Appendf(nil, `{"id":%q,"type":"alert.created","created_at":%q,"test":false,"organization_id":%q,"data":{"alert":%s}}`,
			eventID, now.UTC().Format(time.RFC3339), org.ID, alertJSON)
		return body
	})
	if err != nil {
		t.Fatal(err)
	}
	ds := due(t, db, now)
	if len(ds) != 1 {
		t.Fatalf("%d deliveries due, want 1", len(ds))
	}
	d := ds[0]
	ev, err := webhook.NewAlertEvent(d.EventID, d.OrgID, d.Alert, d.CreatedAt, false)
	if err != nil {
		t.Fatal(err)
	}
	rebuilt, err := webhook.Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rebuilt, body) {
		t.Errorf("body\n%s\nwant the stored one\n%s", rebuilt, body)
	}
	if outs := finish(t, db, ok(d, now)); !outs[0].AlertSent {
		t.Errorf("delivered: %+v, want AlertSent", outs[0])
	}
	if got := alertStatus(t, db, org.ID, a.ID); got != store.AlertSent {
		t.Errorf("alert %s after the delivery, want sent", got)
	}
}
