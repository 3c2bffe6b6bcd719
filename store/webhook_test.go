package store_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// testSecret is a well-formed webhook secret.
const testSecret = store.WebhookSecret("whsec_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")

func mustWebhook(tb testing.TB, db *store.DB, orgID, name string) *store.Webhook {
	tb.Helper()
	w := &store.Webhook{OrgID: orgID, URL: "https://hooks.example.com/" + name, Name: name}
	if err := db.CreateWebhook(w, testSecret); err != nil {
		tb.Fatalf("create webhook %q: %v", name, err)
	}
	return w
}

// TestCreateWebhook ensures a webhook is created active with its fields
// set, and that its JSON is API.md's without the secret.
func TestCreateWebhook(t *testing.T) {
	db := storetest.Open(t)
	org := storetest.MustOrganization(t, db, "acme", store.PlanBusiness)
	w := &store.Webhook{OrgID: org.ID, URL: "https://hooks.example.com/dmarc", Name: "  ops  "}
	if err := db.CreateWebhook(w, testSecret); err != nil {
		t.Fatal(err)
	}
	if !store.ValidID(w.ID) || !w.IsActive || w.Name != "ops" || !w.CreatedAt.Equal(storetest.Epoch()) ||
		!w.UpdatedAt.Equal(w.CreatedAt) || w.ConsecutiveFailures != 0 || w.DisabledReason != nil ||
		w.LastDeliveryAt != nil || w.LastStatusCode != nil {
		t.Errorf("created webhook = %+v", w)
	}
	got, err := db.FindWebhook(org.ID, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(got)
	want := fmt.Sprintf(`{"id":%q,"url":"https://hooks.example.com/dmarc","name":"ops","format":"dmarcd","is_active":true,`+
		`"created_at":"2026-11-22T09:30:00Z","updated_at":"2026-11-22T09:30:00Z","consecutive_failures":0,`+
		`"disabled_reason":null,"last_delivery_at":null,"last_status_code":null}`, w.ID)
	if string(raw) != want {
		t.Errorf("JSON =\n%s\nwant\n%s", raw, want)
	}
	_, secret, err := db.FindWebhookSecret(org.ID, w.ID)
	if err != nil || string(secret) != string(testSecret) {
		t.Errorf("FindWebhookSecret = %v, the secret given: %v", err, string(secret) == string(testSecret))
	}
}

// TestCreateWebhookRefusals ensures bad input and plan limits are refused
// with the right kind.
func TestCreateWebhookRefusals(t *testing.T) {
	db := storetest.Open(t)
	business := storetest.MustOrganization(t, db, "acme", store.PlanBusiness)
	starter := storetest.MustOrganization(t, db, "small", store.PlanStarter)
	ok := "https://hooks.example.com/x"
	for _, tc := range []struct {
		name, org, url, hookName string
		secret                   store.WebhookSecret
		kind                     error
	}{
		{"EmptyName", business.ID, ok, "  ", testSecret, store.ErrInvalid},
		{"LongName", business.ID, ok, strings.Repeat("é", 101), testSecret, store.ErrInvalid},
		{"ControlInName", business.ID, ok, "a\x00b", testSecret, store.ErrInvalid},
		{"HTTP", business.ID, "http://hooks.example.com/", "x", testSecret, store.ErrInvalid},
		{"LongURL", business.ID, ok + strings.Repeat("a", 2048), "x", testSecret, store.ErrInvalid},
		{"ShortSecret", business.ID, ok, "x", "whsec_00", store.ErrInvalid},
		{"UpperSecret", business.ID, ok, "x", store.WebhookSecret(strings.ToUpper(string(testSecret))), store.ErrInvalid},
		{"UnknownOrg", store.NewID(), ok, "x", testSecret, store.ErrNotFound},
		{"StarterPlan", starter.ID, ok, "x", testSecret, store.ErrLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := db.CreateWebhook(&store.Webhook{OrgID: tc.org, URL: tc.url, Name: tc.hookName}, tc.secret)
			if !errors.Is(err, tc.kind) {
				t.Errorf("err = %v, want %v", err, tc.kind)
			}
		})
	}
	t.Run("ErrLimit", func(t *testing.T) {
		for i := range 10 {
			mustWebhook(t, db, business.ID, fmt.Sprint("h", i))
		}
		// An inactive webhook still counts: it can be re-activated.
		w, _, _ := db.ListWebhooks(business.ID, store.Page{Page: 1, Limit: 1})
		if _, err := db.UpdateWebhook(business.ID, w[0].ID, store.WebhookUpdate{IsActive: new(false)}); err != nil {
			t.Fatal(err)
		}
		err := db.CreateWebhook(&store.Webhook{OrgID: business.ID, URL: ok, Name: "eleventh"}, testSecret)
		if !errors.Is(err, store.ErrLimit) || !strings.Contains(err.Error(), "10 webhooks") {
			t.Errorf("11th webhook: %v, want ErrLimit naming 10", err)
		}
	})
}

// TestWebhookOtherOrganization ensures another organization's webhook is
// not found by any method.
func TestWebhookOtherOrganization(t *testing.T) {
	db := storetest.Open(t)
	a := storetest.MustOrganization(t, db, "a", store.PlanUnlimited)
	b := storetest.MustOrganization(t, db, "b", store.PlanUnlimited)
	w := mustWebhook(t, db, a.ID, "ops")
	checks := map[string]error{}
	_, checks["FindWebhook"] = db.FindWebhook(b.ID, w.ID)
	_, _, checks["FindWebhookSecret"] = db.FindWebhookSecret(b.ID, w.ID)
	_, checks["UpdateWebhook"] = db.UpdateWebhook(b.ID, w.ID, store.WebhookUpdate{Name: new("x")})
	checks["DeleteWebhook"] = db.DeleteWebhook(b.ID, w.ID)
	_, checks["Malformed"] = db.FindWebhook(a.ID, "not-an-id")
	for name, err := range checks {
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound", name, err)
		}
	}
	if got, err := db.FindWebhook(a.ID, w.ID); err != nil || got.Name != "ops" {
		t.Errorf("the webhook changed: %+v, %v", got, err)
	}
}

// TestListWebhooks ensures the list is newest first, paginated, and
// limited to the organization.
func TestListWebhooks(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch())
	db := storetest.OpenWithClock(t, clock)
	a := storetest.MustOrganization(t, db, "a", store.PlanUnlimited)
	b := storetest.MustOrganization(t, db, "b", store.PlanUnlimited)
	for i := range 5 {
		mustWebhook(t, db, a.ID, fmt.Sprint("a", i))
		clock.Advance(time.Second)
	}
	mustWebhook(t, db, b.ID, "b0")
	page, total, err := db.ListWebhooks(a.ID, store.Page{Page: 2, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if total != 5 || len(page) != 2 || page[0].Name != "a2" || page[1].Name != "a1" {
		t.Errorf("page 2 = %d items of %d: %v", len(page), total, names(page))
	}
	page, _, _ = db.ListWebhooks(a.ID, store.Page{Page: 4, Limit: 2})
	if page == nil || len(page) != 0 {
		t.Errorf("page past the end = %#v, want empty", page)
	}
	if _, _, err := db.ListWebhooks(a.ID, store.Page{Page: 0, Limit: 2}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("page 0: %v", err)
	}
}

func names(ws []*store.Webhook) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.Name)
	}
	return out
}

// TestUpdateWebhook ensures updates change only what is given and that
// re-activation resets the failure count and the disabled reason.
func TestUpdateWebhook(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch())
	db := storetest.OpenWithClock(t, clock)
	org := storetest.MustOrganization(t, db, "a", store.PlanUnlimited)
	w := mustWebhook(t, db, org.ID, "ops")
	clock.Advance(time.Minute)

	got, err := db.UpdateWebhook(org.ID, w.ID, store.WebhookUpdate{Name: new(" renamed "), URL: new("https://new.example.com/")})
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "renamed" || got.URL != "https://new.example.com/" || !got.IsActive ||
		!got.UpdatedAt.Equal(storetest.Epoch().Add(time.Minute)) || !got.CreatedAt.Equal(storetest.Epoch()) {
		t.Errorf("updated = %+v", got)
	}
	for _, tc := range []struct {
		name string
		u    store.WebhookUpdate
	}{
		{"EmptyName", store.WebhookUpdate{Name: new("")}},
		{"HTTP", store.WebhookUpdate{URL: new("http://x.example.com/")}},
	} {
		if _, err := db.UpdateWebhook(org.ID, w.ID, tc.u); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", tc.name, err)
		}
	}
	if got, _ := db.FindWebhook(org.ID, w.ID); got.Name != "renamed" {
		t.Errorf("a refused update changed the webhook: %+v", got)
	}

	// Disable it by failures, then re-activate it.
	failUntilDisabled(t, db, org.ID, w.ID)
	got, _ = db.FindWebhook(org.ID, w.ID)
	if got.IsActive || got.ConsecutiveFailures != store.MaxWebhookFailures || got.DisabledReason == nil ||
		*got.DisabledReason != store.DisabledConsecutiveFailures {
		t.Fatalf("after %d failures: %+v", store.MaxWebhookFailures, got)
	}
	got, err = db.UpdateWebhook(org.ID, w.ID, store.WebhookUpdate{IsActive: new(true)})
	if err != nil {
		t.Fatal(err)
	}
	if !got.IsActive || got.ConsecutiveFailures != 0 || got.DisabledReason != nil || got.LastStatusCode == nil {
		t.Errorf("re-activated = %+v, want active, no failures, no reason, last status kept", got)
	}
}

// TestDeleteWebhook ensures a deleted webhook is gone from every listing
// and frees its place in the plan's count.
func TestDeleteWebhook(t *testing.T) {
	db := storetest.Open(t)
	org := storetest.MustOrganization(t, db, "a", store.PlanBusiness)
	var last *store.Webhook
	for i := range 10 {
		last = mustWebhook(t, db, org.ID, fmt.Sprint("h", i))
	}
	if err := db.DeleteWebhook(org.ID, last.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.FindWebhook(org.ID, last.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleted webhook found: %v", err)
	}
	if err := db.DeleteWebhook(org.ID, last.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second delete: %v", err)
	}
	if _, total, _ := db.ListWebhooks(org.ID, store.Page{Page: 1, Limit: 100}); total != 9 {
		t.Errorf("total after delete = %d, want 9", total)
	}
	mustWebhook(t, db, org.ID, "replacement")
}

// TestWebhookSecretRedacted ensures a secret never shows through fmt,
// slog or JSON, only through an explicit conversion.
func TestWebhookSecretRedacted(t *testing.T) {
	s := testSecret
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("x", "secret", s)
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "secret", s)
	j, _ := json.Marshal(map[string]any{"s": s})
	for _, out := range []string{fmt.Sprint(s), fmt.Sprintf("%v %s %q %#v %+v", s, s, s, s, s), logged.String(), string(j)} {
		if strings.Contains(out, string(s)[6:]) {
			t.Errorf("secret leaked: %s", out)
		}
		if !strings.Contains(out, "[redacted]") {
			t.Errorf("no placeholder in %s", out)
		}
	}
}
