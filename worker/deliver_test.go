package worker_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/alert"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/worker"
)

// TestDeliverToEveryActiveWebhook ensures an alert reaches every active
// webhook of its organization once, correctly signed with each webhook's
// own secret, with one event id, and then turns sent.
func TestDeliverToEveryActiveWebhook(t *testing.T) {
	a, b := newReceiver(t), newReceiver(t, http.StatusNoContent)
	e := newEnv(t, a, b)
	wa, wb := e.webhookTo(t, a, "/a"), e.webhookTo(t, b, "/b")
	d := e.deliverer(t, worker.DeliverConfig{})
	if got := e.metric("dmarcd_webhook_outbox_depth"); got != "0" {
		t.Errorf("outbox depth gauge = %q before any alert", got)
	}
	al := e.raiseAlert(t)
	if got := e.metric("dmarcd_webhook_outbox_depth"); got != "2" {
		t.Errorf("outbox depth gauge = %q, want 2", got)
	}
	e.deliver(t, d)

	ga, gb := a.deliveries(t), b.deliveries(t)
	if len(ga) != 1 || len(gb) != 1 {
		t.Fatalf("receivers got %d and %d deliveries, want 1 each", len(ga), len(gb))
	}
	if ga[0].event.ID != gb[0].event.ID {
		t.Errorf("one alert, two event ids: %s, %s", ga[0].event.ID, gb[0].event.ID)
	}
	ev := ga[0].event
	if *ev.Test || ev.OrganizationID != e.org.ID || ev.Data.Alert["id"] != al.ID ||
		ev.Data.Alert["type"] != alert.TypeDMARCFailureRate || ev.Data.Alert["severity"] != alert.SeverityCritical {
		t.Errorf("event = %+v", ev)
	}
	if ts := ga[0].header.Get("X-Webhook-Timestamp"); ts != strconv.FormatInt(e.clock.Now().Unix(), 10) {
		t.Errorf("timestamp %s, want the clock's %d", ts, e.clock.Now().Unix())
	}
	if got := e.alert(t, al.ID); got.Status != store.AlertSent || got.SentAt == nil {
		t.Errorf("alert %s, sent_at %v; want sent", got.Status, got.SentAt)
	}
	for w, code := range map[string]int{wa.ID: 200, wb.ID: 204} {
		got := e.webhook(t, w)
		if got.LastStatusCode == nil || *got.LastStatusCode != code || got.LastDeliveryAt == nil || got.ConsecutiveFailures != 0 {
			t.Errorf("webhook %s after delivery = %+v", w, got)
		}
	}
	if got := e.metric(`dmarcd_webhook_deliveries_total{outcome="success"}`); got != "2" {
		t.Errorf("success counter = %q, want 2", got)
	}
	if got := e.metric("dmarcd_webhook_outbox_depth"); got != "0" {
		t.Errorf("outbox depth gauge = %q after delivery", got)
	}
}

// TestRetriesAtConfiguredDelays ensures a failed delivery is attempted
// again after each configured delay, not before, with the same
// X-Webhook-Id and a fresh timestamp and signature, until it succeeds.
func TestRetriesAtConfiguredDelays(t *testing.T) {
	rc := newReceiver(t, http.StatusInternalServerError, http.StatusServiceUnavailable, http.StatusOK)
	e := newEnv(t, rc)
	w := e.webhookTo(t, rc, "/hook")
	d := e.deliverer(t, worker.DeliverConfig{RetryDelays: []time.Duration{2 * time.Second, 5 * time.Second}})
	al := e.raiseAlert(t)
	t0 := e.clock.Now()

	e.deliver(t, d)
	if n := len(rc.deliveries(t)); n != 1 {
		t.Fatalf("%d attempts at first, want 1", n)
	}
	if got := e.webhook(t, w.ID); got.ConsecutiveFailures != 1 || *got.LastStatusCode != 500 {
		t.Errorf("after one failure: %+v", got)
	}
	e.clock.Advance(1999 * time.Millisecond)
	e.deliver(t, d)
	if n := len(rc.deliveries(t)); n != 1 {
		t.Fatalf("retried before its 2 s delay (%d attempts)", n)
	}
	e.clock.Advance(time.Millisecond)
	e.deliver(t, d)
	if n := len(rc.deliveries(t)); n != 2 {
		t.Fatalf("%d attempts after 2 s, want 2", n)
	}
	e.clock.Advance(4 * time.Second)
	e.deliver(t, d)
	if n := len(rc.deliveries(t)); n != 2 {
		t.Fatalf("retried before its 5 s delay (%d attempts)", n)
	}
	e.clock.Advance(time.Second)
	e.deliver(t, d)
	got := rc.deliveries(t)
	if len(got) != 3 {
		t.Fatalf("%d attempts, want 3", len(got))
	}
	want := []string{strconv.FormatInt(t0.Unix(), 10), strconv.FormatInt(t0.Unix()+2, 10), strconv.FormatInt(t0.Unix()+7, 10)}
	for i, g := range got {
		if g.header.Get("X-Webhook-Id") != got[0].header.Get("X-Webhook-Id") || string(g.body) != string(got[0].body) {
			t.Errorf("attempt %d: X-Webhook-Id %s or body differs from the first attempt's", i+1, g.header.Get("X-Webhook-Id"))
		}
		if g.header.Get("X-Webhook-Timestamp") != want[i] {
			t.Errorf("timestamps %v, want %v (signed afresh at each attempt)", timestamps(got), want)
			break
		}
	}
	if got[0].header.Get("X-Webhook-Signature") == got[1].header.Get("X-Webhook-Signature") {
		t.Error("two attempts carry the same signature")
	}
	if a := e.alert(t, al.ID); a.Status != store.AlertSent {
		t.Errorf("alert %s after the successful retry", a.Status)
	}
	if wh := e.webhook(t, w.ID); wh.ConsecutiveFailures != 0 || *wh.LastStatusCode != 200 {
		t.Errorf("webhook after success = %+v", wh)
	}
	for outcome, want := range map[string]string{"success": "1", "failure": "2"} {
		if got := e.metric(`dmarcd_webhook_deliveries_total{outcome="` + outcome + `"}`); got != want {
			t.Errorf("%s counter = %q, want %s", outcome, got, want)
		}
	}
}

// TestGiveUpAfterLastAttempt ensures a delivery failing every attempt is
// given up after the last one and the alert stays pending.
func TestGiveUpAfterLastAttempt(t *testing.T) {
	rc := newReceiver(t, http.StatusBadGateway)
	e := newEnv(t, rc)
	e.webhookTo(t, rc, "/")
	d := e.deliverer(t, worker.DeliverConfig{RetryDelays: []time.Duration{time.Second, time.Second}})
	al := e.raiseAlert(t)
	for range 5 {
		e.deliver(t, d)
		e.clock.Advance(time.Second)
	}
	if n := len(rc.deliveries(t)); n != 3 {
		t.Errorf("%d attempts, want 3", n)
	}
	if got := e.alert(t, al.ID); got.Status != store.AlertPending {
		t.Errorf("alert %s after giving up", got.Status)
	}
	if got := e.metric(`dmarcd_webhook_deliveries_total{outcome="given_up"}`); got != "1" {
		t.Errorf("given_up counter = %q", got)
	}
}

// TestAutoDisableAndReenable ensures ten consecutive failed attempts
// disable the webhook, later alerts skip it, and re-enabling it resets
// its count so deliveries resume.
func TestAutoDisableAndReenable(t *testing.T) {
	rc := newReceiver(t, http.StatusInternalServerError)
	e := newEnv(t, rc)
	w := e.webhookTo(t, rc, "/")
	// One attempt at a time, so that the count stops at the tenth.
	d := e.deliverer(t, worker.DeliverConfig{RetryDelays: []time.Duration{time.Second, time.Second}, PerWebhook: 1})
	for range 4 { // three attempts each: the tenth failure falls in the fourth
		e.raiseAlert(t)
	}
	for range 4 {
		e.deliver(t, d)
		e.clock.Advance(time.Second)
	}
	if n := len(rc.deliveries(t)); n != store.MaxWebhookFailures {
		t.Errorf("%d attempts before the webhook was disabled, want %d", n, store.MaxWebhookFailures)
	}
	got := e.webhook(t, w.ID)
	if got.IsActive || got.DisabledReason == nil || *got.DisabledReason != "consecutive_failures" || got.ConsecutiveFailures != 10 {
		t.Fatalf("webhook after 10 failures = %+v", got)
	}
	if got := e.metric(`dmarcd_webhook_deliveries_total{outcome="disabled"}`); got != "1" {
		t.Errorf("disabled counter = %q", got)
	}
	e.raiseAlert(t)
	e.deliver(t, d)
	if n := len(rc.deliveries(t)); n != 10 {
		t.Errorf("a disabled webhook got a delivery (%d in all)", n)
	}

	rc.mu.Lock()
	rc.statuses = []int{http.StatusOK}
	rc.mu.Unlock()
	if _, err := e.db.UpdateWebhook(e.org.ID, w.ID, store.WebhookUpdate{IsActive: new(true)}); err != nil {
		t.Fatal(err)
	}
	al := e.raiseAlert(t)
	e.deliver(t, d)
	if n := len(rc.deliveries(t)); n != 11 {
		t.Fatalf("%d deliveries after re-enabling, want 11", n)
	}
	if got := e.webhook(t, w.ID); !got.IsActive || got.ConsecutiveFailures != 0 || got.DisabledReason != nil {
		t.Errorf("re-enabled webhook = %+v", got)
	}
	if a := e.alert(t, al.ID); a.Status != store.AlertSent {
		t.Errorf("alert after re-enabling: %s", a.Status)
	}
}

// TestDeleteWithDeliveriesPending ensures a deleted webhook's retries are
// never sent.
func TestDeleteWithDeliveriesPending(t *testing.T) {
	rc := newReceiver(t, http.StatusInternalServerError)
	e := newEnv(t, rc)
	w := e.webhookTo(t, rc, "/")
	d := e.deliverer(t, worker.DeliverConfig{})
	e.raiseAlert(t)
	e.deliver(t, d)
	if err := e.db.DeleteWebhook(e.org.ID, w.ID); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Hour)
	e.deliver(t, d)
	if n := len(rc.deliveries(t)); n != 1 {
		t.Errorf("%d attempts, want only the one before the delete", n)
	}
	if n, _ := e.db.OutboxDepth(); n != 0 {
		t.Errorf("outbox depth %d", n)
	}
}

// TestSlowReceiverHoldsUpNobody ensures a delivery to a receiver that does
// not answer neither delays another webhook's delivery nor its recording,
// and that attempts in flight stay within the configured bounds.
func TestSlowReceiverHoldsUpNobody(t *testing.T) {
	slow, fast := newReceiver(t), newReceiver(t)
	slow.hold, slow.arrived = make(chan struct{}), make(chan struct{}, 16)
	fast.arrived = make(chan struct{}, 16)
	e := newEnv(t, slow, fast)
	ws, wf := e.webhookTo(t, slow, "/slow"), e.webhookTo(t, fast, "/fast")
	d := e.deliverer(t, worker.DeliverConfig{Concurrency: 3, PerWebhook: 2})
	var alerts []*store.Alert
	for range 4 {
		alerts = append(alerts, e.raiseAlert(t))
	}
	done := make(chan error, 1)
	go func() { done <- d.DeliverDue(context.Background(), e.clock.Now()) }()

	for range 2 { // the slow receiver's two slots fill up...
		<-slow.arrived
	}
	for range 4 { // ...and the fast receiver still gets all four alerts
		<-fast.arrived
	}
	if got := slow.maxInFlight.Load(); got != 2 {
		t.Errorf("%d attempts in flight to one webhook, want its bound 2", got)
	}
	// Results are recorded as they come, not at the end of the run.
	waitFor(t, func() bool {
		w := e.webhook(t, wf.ID)
		return w.LastStatusCode != nil
	})
	if w := e.webhook(t, ws.ID); w.LastDeliveryAt != nil {
		t.Errorf("the slow webhook has a recorded attempt: %+v", w)
	}
	close(slow.hold)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := len(slow.deliveries(t)); n != 4 {
		t.Errorf("slow receiver got %d deliveries, want 4", n)
	}
	if got := fast.maxInFlight.Load(); got > 1 {
		t.Errorf("%d attempts in flight to the fast webhook while the slow one held 2 of 3 slots", got)
	}
	for _, a := range alerts {
		if got := e.alert(t, a.ID); got.Status != store.AlertSent {
			t.Errorf("alert %s is %s", a.ID, got.Status)
		}
	}
}

// TestStopLeavesInFlightDue ensures stopping the job cancels attempts in
// flight without counting them as failures, and they are sent again,
// with the same event id, by the next run.
func TestStopLeavesInFlightDue(t *testing.T) {
	rc := newReceiver(t)
	rc.hold, rc.arrived = make(chan struct{}), make(chan struct{}, 4)
	e := newEnv(t, rc)
	w := e.webhookTo(t, rc, "/")
	d := e.deliverer(t, worker.DeliverConfig{})
	al := e.raiseAlert(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.DeliverDue(ctx, e.clock.Now()) }()
	<-rc.arrived
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := e.webhook(t, w.ID); got.ConsecutiveFailures != 0 || got.LastDeliveryAt != nil {
		t.Errorf("a cancelled attempt was recorded: %+v", got)
	}
	if n, _ := e.db.OutboxDepth(); n != 1 {
		t.Fatalf("outbox depth %d after the stop, want 1", n)
	}
	close(rc.hold)
	e.deliver(t, d)
	got := rc.deliveries(t)
	if len(got) != 2 || got[0].event.ID != got[1].event.ID {
		t.Fatalf("deliveries %d, ids %v", len(got), got)
	}
	if a := e.alert(t, al.ID); a.Status != store.AlertSent {
		t.Errorf("alert %s", a.Status)
	}
}

// TestNewDelivererRefusesBadSettings ensures bad settings are refused.
func TestNewDelivererRefusesBadSettings(t *testing.T) {
	rc := newReceiver(t)
	e := newEnv(t, rc)
	for name, cfg := range map[string]worker.DeliverConfig{
		"NoStore":       {Client: e.client},
		"NoClient":      {Store: e.db},
		"NegativeDelay": {Store: e.db, Client: e.client, RetryDelays: []time.Duration{time.Second, -1}},
		"ZeroDelay":     {Store: e.db, Client: e.client, RetryDelays: []time.Duration{0}},
		"Concurrency":   {Store: e.db, Client: e.client, Concurrency: -1},
	} {
		if _, err := worker.NewDeliverer(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
