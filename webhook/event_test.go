package webhook_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/webhook"
)

// TestSignGolden ensures Sign matches a signature computed outside Go:
// printf '1767225600.{"id":"evt_x"}' | openssl dgst -sha256 -hmac whsec_test
func TestSignGolden(t *testing.T) {
	got := webhook.Sign("whsec_test", 1767225600, []byte(`{"id":"evt_x"}`))
	want := "sha256=06fc17c027df8fb30adf8dfa4af69be006eb78036ad76eb631e967609df30bf1"
	if got != want {
		t.Errorf("Sign = %s, want %s", got, want)
	}
	if other := webhook.Sign("whsec_test", 1767225601, []byte(`{"id":"evt_x"}`)); other == want {
		t.Error("Sign ignores the timestamp")
	}
}

var (
	secretRE = regexp.MustCompile(`^whsec_[0-9a-f]{64}$`)
	// eventRE is API.md's "evt_<uuid>".
	eventRE = regexp.MustCompile(`^evt_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
)

// TestNewSecret ensures secrets have their documented form and do not
// repeat.
func TestNewSecret(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		s := webhook.NewSecret()
		if !secretRE.MatchString(s) {
			t.Fatalf("NewSecret = %q", s)
		}
		if seen[s] {
			t.Fatalf("repeated value %q", s)
		}
		seen[s] = true
	}
}

// TestEventJSON ensures the envelope has exactly API.md's fields, with
// created_at in UTC at second precision.
func TestEventJSON(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 30, 0, 987654321, time.FixedZone("CET", 3600))
	ev, err := webhook.NewAlertEvent(testEventID, "org-1", map[string]any{"id": "a-1", "type": "dmarc_failure_rate"}, at, true)
	if err != nil {
		t.Fatal(err)
	}
	body, err := webhook.Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 6 || got["id"] != ev.ID || got["type"] != "alert.created" || got["created_at"] != "2026-11-22T09:30:00Z" ||
		got["test"] != true || got["organization_id"] != "org-1" {
		t.Errorf("event JSON = %s", body)
	}
	alert, _ := got["data"].(map[string]any)["alert"].(map[string]any)
	if alert["id"] != "a-1" {
		t.Errorf("data.alert = %v", got["data"])
	}
	var back webhook.Event
	if err := json.Unmarshal(body, &back); err != nil || !back.CreatedAt.Equal(at.Truncate(time.Second)) {
		t.Errorf("round trip: %v, %v", back.CreatedAt, err)
	}
}

// TestEncodeRejectsBadEvents ensures events that cannot be a delivery are
// programming errors, not deliveries.
func TestEncodeRejectsBadEvents(t *testing.T) {
	good := func() *webhook.Event {
		return &webhook.Event{ID: testEventID, Type: webhook.TypeAlertCreated, OrganizationID: "o", Data: json.RawMessage(`{"alert":{}}`)}
	}
	if _, err := webhook.Encode(good()); err != nil {
		t.Fatalf("good event: %v", err)
	}
	for name, mutate := range map[string]func(*webhook.Event){
		"no id":         func(e *webhook.Event) { e.ID = "" },
		"id not evt_":   func(e *webhook.Event) { e.ID = "123" },
		"no type":       func(e *webhook.Event) { e.Type = "" },
		"no org":        func(e *webhook.Event) { e.OrganizationID = "" },
		"nil data":      func(e *webhook.Event) { e.Data = nil },
		"array data":    func(e *webhook.Event) { e.Data = json.RawMessage(`[]`) },
		"invalid data":  func(e *webhook.Event) { e.Data = json.RawMessage(`{"alert":`) },
		"trailing junk": func(e *webhook.Event) { e.Data = json.RawMessage(`{} x`) },
	} {
		ev := good()
		mutate(ev)
		if _, err := webhook.Encode(ev); err == nil || !strings.HasPrefix(err.Error(), "webhook: ") {
			t.Errorf("%s: Encode error = %v", name, err)
		}
	}
	if _, err := webhook.Encode(nil); err == nil {
		t.Error("Encode(nil) succeeded")
	}
	if _, err := webhook.NewAlertEvent(testEventID, "o", []int{1}, time.Now(), false); err == nil {
		t.Error("NewAlertEvent accepted an alert that is not an object")
	}
}
