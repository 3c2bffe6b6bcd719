package web_test

import (
	"crypto/x509"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/internal/chattest"
	"github.com/dmarcd/dmarcd/internal/egress"
	"github.com/dmarcd/dmarcd/store"
)

// TestWebhookFormatForm creates a Teams webhook with the form's format
// select, sends its test (a card, to a real receiver), switches it to
// Slack with the edit form, and refuses an unknown format with the field
// named, keeping the form's values.
func TestWebhookFormatForm(t *testing.T) {
	rc := chattest.NewReceiver(t)
	pool := x509.NewCertPool()
	pool.AddCert(rc.Server.Certificate())
	e := newEnvPolicy(t, egress.Policy{AllowPrivate: true, RootCAs: pool})
	e.clock.Set(time.Now().UTC().Truncate(time.Second))
	cookie := e.signIn(e.fullA)
	token := e.csrf(cookie)

	p := e.send("GET", "/settings/webhooks", cookie, nil)
	for _, want := range []string{`<select id="hformat" name="format">`, `<option value="slack"`, `<option value="teams"`, `<option value="dmarcd" selected`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the form lacks %s", want)
		}
	}
	p = e.send("POST", "/settings/webhooks", cookie, url.Values{"csrf_token": {token}, "name": {"chat"}, "url": {rc.URL("/x")}, "format": {"irc"}})
	if p.status != http.StatusUnprocessableEntity || !strings.Contains(p.body, "invalid format: must be one of dmarcd, slack, teams") ||
		!strings.Contains(p.body, `value="chat"`) {
		t.Errorf("unknown format: %d", p.status)
	}
	p = e.send("POST", "/settings/webhooks", cookie, url.Values{"csrf_token": {token}, "name": {"chat"}, "url": {rc.URL("/x")}, "format": {"teams"}})
	if p.status != http.StatusCreated || !strings.Contains(p.body, "Microsoft Teams card") || !strings.Contains(p.body, "Chat services ignore it") {
		t.Fatalf("create teams: %d", p.status)
	}
	hooks, _, _ := e.db.ListWebhooks(e.orgA.ID, store.Page{Page: 1, Limit: 10})
	if len(hooks) != 1 || hooks[0].Format != "teams" {
		t.Fatalf("stored: %+v", hooks)
	}
	id := hooks[0].ID
	p = e.send("POST", "/settings/webhooks/"+id+"/test", cookie, url.Values{"csrf_token": {token}})
	if got := rc.Requests(); p.status != 200 || !strings.Contains(p.body, "Test delivered") || len(got) != 1 {
		t.Fatalf("test: %d, %d requests", p.status, len(got))
	}
	if err := chattest.CheckTeams(rc.Requests()[0].Body, ""); err != nil {
		t.Errorf("test card: %v", err)
	}
	p = e.send("GET", "/settings/webhooks", cookie, nil)
	if !strings.Contains(p.body, `<option value="teams" selected>`) {
		t.Error("the edit form does not show the format")
	}
	p = e.send("POST", "/settings/webhooks/"+id, cookie, url.Values{"csrf_token": {token}, "name": {"chat"}, "url": {rc.URL("/x")}, "format": {"slack"}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("edit: %d %s", p.status, p.body)
	}
	if h, _ := e.db.FindWebhook(e.orgA.ID, id); h.Format != "slack" {
		t.Errorf("format after the edit: %q", h.Format)
	}
	// Activating, which sends no format, keeps it.
	e.send("POST", "/settings/webhooks/"+id, cookie, url.Values{"csrf_token": {token}, "action": {"deactivate"}})
	if h, _ := e.db.FindWebhook(e.orgA.ID, id); h.Format != "slack" || h.IsActive {
		t.Errorf("after deactivating: %+v", h)
	}
}
