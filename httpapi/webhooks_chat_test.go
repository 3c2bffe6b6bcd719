package httpapi

import (
	"crypto/x509"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/internal/chattest"
	"github.com/dmarcd/dmarcd/internal/egress"
)

// TestWebhookFormatField ensures format is set on create (dmarcd when
// left out), read back by GET and the list, changed by PUT, and that an
// unknown format is a 422 naming the field, changing nothing.
func TestWebhookFormatField(t *testing.T) {
	e := newWebhookEnv(t, egress.Policy{})
	plain := e.mustCreateWebhook(e.keyA, "https://hooks.example.com/plain", "plain")
	if plain["format"] != "dmarcd" {
		t.Errorf("created without a format: %v", plain["format"])
	}
	r := e.do("POST", "/api/v1/webhooks", e.keyA, map[string]string{"url": "https://hooks.example.com/slack", "name": "chat", "format": "slack"})
	if r.status != http.StatusCreated || r.json(t)["format"] != "slack" || !strings.HasPrefix(r.json(t)["secret"].(string), "whsec_") {
		t.Fatalf("create slack: %d %s", r.status, r.body)
	}
	path := "/api/v1/webhooks/" + r.json(t)["id"].(string)
	if g := e.do("GET", path, e.keyA, nil); g.status != 200 || g.json(t)["format"] != "slack" {
		t.Errorf("GET: %d %s", g.status, g.body)
	}
	u := e.do("PUT", path, e.keyA, map[string]string{"format": "teams"})
	if u.status != 200 || u.json(t)["format"] != "teams" {
		t.Errorf("PUT format teams: %d %s", u.status, u.body)
	}
	bad := e.do("PUT", path, e.keyA, map[string]string{"format": "discord"})
	var body struct {
		Error struct {
			Code    string       `json:"code"`
			Details []FieldError `json:"details"`
		} `json:"error"`
	}
	json.Unmarshal(bad.body, &body)
	if bad.status != 422 || body.Error.Code != "validation_failed" || len(body.Error.Details) != 1 ||
		body.Error.Details[0].Field != "format" || !strings.Contains(body.Error.Details[0].Message, "dmarcd, slack, teams") {
		t.Errorf("PUT format discord: %d %s", bad.status, bad.body)
	}
	l := e.do("GET", "/api/v1/webhooks", e.keyA, nil)
	var list struct {
		Data []map[string]any `json:"data"`
	}
	json.Unmarshal(l.body, &list)
	if len(list.Data) != 2 || list.Data[0]["format"] != "teams" || list.Data[1]["format"] != "dmarcd" {
		t.Errorf("list: %s", l.body)
	}
}

// TestWebhookTestInChatFormat ensures the test button of a chat webhook
// sends a sample message in its format to a real receiver on loopback.
func TestWebhookTestInChatFormat(t *testing.T) {
	rc := chattest.NewReceiver(t)
	pool := x509.NewCertPool()
	pool.AddCert(rc.Server.Certificate())
	e := newWebhookEnv(t, egress.Policy{AllowPrivate: true, RootCAs: pool})
	for i, c := range []struct {
		format string
		check  func([]byte, string) error
	}{{"slack", chattest.CheckSlack}, {"teams", chattest.CheckTeams}} {
		r := e.do("POST", "/api/v1/webhooks", e.keyA, map[string]string{"url": rc.URL("/" + c.format), "name": c.format, "format": c.format})
		if r.status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
		res := e.do("POST", "/api/v1/webhooks/"+r.json(t)["id"].(string)+"/test", e.keyA, nil)
		if res.status != 200 || res.json(t)["success"] != true {
			t.Fatalf("%s test: %d %s", c.format, res.status, res.body)
		}
		got := rc.Requests()
		if len(got) != i+1 {
			t.Fatalf("receiver got %d requests", len(got))
		}
		body := got[i].Body
		if err := c.check(body, ""); err != nil {
			t.Errorf("%s: %v\n%s", c.format, err, body)
		}
		for _, want := range []string{"Test (info): Test alert from dmarcd", "example.com", "reporter.example", "192.0.2.10"} {
			if !strings.Contains(string(body), want) {
				t.Errorf("%s sample lacks %q:\n%s", c.format, want, body)
			}
		}
	}
}
