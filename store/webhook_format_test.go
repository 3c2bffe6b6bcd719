package store_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/dmarcd/dmarcd/alert"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// TestWebhookFormat ensures a webhook keeps its format through create,
// read, list and update, refuses an unknown one, and that the outbox
// hands each delivery the webhook's format of the moment, with the name
// of the alert's domain for the chat formats.
func TestWebhookFormat(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch())
	db := storetest.OpenWithClock(t, clock)
	org := storetest.MustOrganization(t, db, "a", store.PlanUnlimited)
	dom := storetest.MustDomain(t, db, org.ID, "example.com")
	plain := mustWebhook(t, db, org.ID, "plain")
	slack := &store.Webhook{OrgID: org.ID, URL: "https://hooks.slack.example/x", Name: "slack", Format: store.WebhookFormatSlack}
	if err := db.CreateWebhook(slack, testSecret); err != nil {
		t.Fatal(err)
	}
	if plain.Format != store.WebhookFormatDMARCD || slack.Format != store.WebhookFormatSlack {
		t.Errorf("created formats %q, %q", plain.Format, slack.Format)
	}
	raw, _ := json.Marshal(slack)
	var obj map[string]any
	_ = json.Unmarshal(raw, &obj)
	if obj["format"] != "slack" {
		t.Errorf("JSON %s has no format slack", raw)
	}
	bad := &store.Webhook{OrgID: org.ID, URL: "https://hooks.example.com/", Name: "bad", Format: "discord"}
	if err := db.CreateWebhook(bad, testSecret); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("format discord: %v, want ErrInvalid", err)
	}
	if _, err := db.UpdateWebhook(org.ID, plain.ID, store.WebhookUpdate{Format: new("Slack")}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("update to format Slack: %v, want ErrInvalid", err)
	}

	id := dom.ID
	a := &store.Alert{OrgID: org.ID, DomainID: &id, Type: alert.TypeDNSRecordChanged, Severity: alert.SeverityWarning,
		Title: "t", Message: "m", Details: json.RawMessage(`{}`), CreatedAt: clock.Now()}
	if err := db.QueueTestAlert(a); err != nil {
		t.Fatal(err)
	}
	formats := func() map[string][2]string {
		out := map[string][2]string{}
		for _, d := range due(t, db, clock.Now()) {
			out[d.WebhookID] = [2]string{d.Format, d.Domain}
		}
		return out
	}
	got := formats()
	if got[plain.ID] != [2]string{"dmarcd", ""} || got[slack.ID] != [2]string{"slack", "example.com"} {
		t.Errorf("due deliveries: %v", got)
	}
	// A new format applies to what is still waiting.
	up, err := db.UpdateWebhook(org.ID, plain.ID, store.WebhookUpdate{Format: new(store.WebhookFormatTeams)})
	if err != nil || up.Format != store.WebhookFormatTeams {
		t.Fatalf("update format: %+v, %v", up, err)
	}
	if got := formats(); got[plain.ID] != [2]string{"teams", "example.com"} {
		t.Errorf("after the update: %v", got)
	}
	if _, err := db.UpdateWebhook(org.ID, plain.ID, store.WebhookUpdate{Format: new(store.WebhookFormatDMARCD)}); err != nil {
		t.Fatal(err)
	}
	hooks, _, err := db.ListWebhooks(org.ID, store.Page{Page: 1, Limit: 10})
	if err != nil || len(hooks) != 2 || hooks[0].Format != "slack" || hooks[1].Format != "dmarcd" {
		t.Errorf("list: %v", err)
	}
}

// TestWebhookStoredBeforeFormats ensures a webhook record written before
// formats existed (no "format" key) reads, lists and delivers as dmarcd.
func TestWebhookStoredBeforeFormats(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch())
	db := storetest.OpenWithClock(t, clock)
	org := storetest.MustOrganization(t, db, "a", store.PlanUnlimited)
	w := mustWebhook(t, db, org.ID, "old")
	if err := store.WebhookAsStoredBeforeFormats(db, w.ID); err != nil {
		t.Fatal(err)
	}
	got, err := db.FindWebhook(org.ID, w.ID)
	if err != nil || got.Name != "before formats" || got.Format != store.WebhookFormatDMARCD {
		t.Fatalf("old webhook reads %+v, %v", got, err)
	}
	queueAlert(t, db, org.ID, clock.Now())
	ds := due(t, db, clock.Now())
	if len(ds) != 1 || ds[0].Format != store.WebhookFormatDMARCD || ds[0].URL != w.URL {
		t.Errorf("old webhook's delivery: %+v", ds)
	}
}
