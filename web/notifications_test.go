package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/store"
)

// TestNotificationsPage saves recipients with the form (new rows,
// severities, digest, removal), shows the reason of a bad address
// without changing anything, marks the row of ?email=, escapes what it
// shows, and keeps a read key's page read-only (403 on POST).
func TestNotificationsPage(t *testing.T) {
	e := newEnv(t)
	cookie := e.signIn(e.fullA)
	token := e.csrf(cookie)
	p := e.send("GET", "/settings/notifications", cookie, nil)
	if p.status != http.StatusOK || !strings.Contains(p.body, `name="email_0"`) || !strings.Contains(p.body, "No mail yet") {
		t.Fatalf("empty page: %d", p.status)
	}
	form := url.Values{"csrf_token": {token}, "rows": {"3"},
		"email_0": {"Ops@Example.org"}, "sev_0": {"critical", "warning"}, "digest_0": {"weekly"},
		"email_1": {"cto@example.org"}, "digest_1": {"daily"},
		"email_2": {""}, "sev_2": {"critical"}, "digest_2": {"weekly"}}
	if p := e.send("POST", "/settings/notifications", cookie, form); p.status != http.StatusSeeOther {
		t.Fatalf("save: %d %s", p.status, p.body)
	}
	s, _ := e.db.NotificationSettings(e.orgA.ID)
	if len(s.Recipients) != 2 || s.Recipient("ops@example.org") == nil || s.Recipient("cto@example.org").Digest != "daily" ||
		strings.Join(s.Recipient("ops@example.org").Severities, ",") != "warning,critical" {
		t.Fatalf("stored %+v", s.Recipients)
	}
	if o, _ := e.db.NotificationSettings(e.orgB.ID); len(o.Recipients) != 0 {
		t.Errorf("organization B got %+v", o.Recipients)
	}

	p = e.send("GET", "/settings/notifications?email=OPS%40example.org", cookie, nil)
	if !strings.Contains(p.body, `class="mine" id="mine"`) || !strings.Contains(p.body, `value="ops@example.org"`) {
		t.Errorf("the row of ?email= is not marked")
	}

	bad := url.Values{"csrf_token": {token}, "rows": {"1"}, "email_0": {`<script>x</script>@example.org`}}
	p = e.send("POST", "/settings/notifications", cookie, bad)
	if p.status != http.StatusUnprocessableEntity || !strings.Contains(p.body, `role="alert"`) || strings.Contains(p.body, "<script>x") {
		t.Errorf("bad address: %d, or unescaped", p.status)
	}
	if s, _ := e.db.NotificationSettings(e.orgA.ID); len(s.Recipients) != 2 {
		t.Errorf("a refused form changed the list: %+v", s.Recipients)
	}

	// Remove one.
	form = url.Values{"csrf_token": {token}, "rows": {"2"},
		"email_0": {"cto@example.org"}, "digest_0": {"daily"}, "remove_0": {"1"},
		"email_1": {"ops@example.org"}, "sev_1": {"critical"}, "digest_1": {"off"}}
	if p := e.send("POST", "/settings/notifications", cookie, form); p.status != http.StatusSeeOther {
		t.Fatalf("remove: %d", p.status)
	}
	if s, _ := e.db.NotificationSettings(e.orgA.ID); len(s.Recipients) != 1 || s.Recipients[0].Email != "ops@example.org" {
		t.Fatalf("after removal %+v", s.Recipients)
	}

	if _, err := e.db.EnqueueMail(&store.OutgoingMail{OrgID: e.orgA.ID, Kind: store.MailKindAlert, To: "ops@example.org",
		Subject: `<b>bold</b> alert`, Text: "t"}); err != nil {
		t.Fatal(err)
	}
	p = e.send("GET", "/settings/notifications", cookie, nil)
	if !strings.Contains(p.body, "&lt;b&gt;bold&lt;/b&gt; alert") || !strings.Contains(p.body, "queued") {
		t.Errorf("the mail log is not shown escaped")
	}

	// A read key sees the list, no form, and may not post.
	ro := e.signIn(e.readA)
	p = e.send("GET", "/settings/notifications", ro, nil)
	if p.status != http.StatusOK || !strings.Contains(p.body, "ops@example.org") || strings.Contains(p.body, `action="/settings/notifications"`) {
		t.Errorf("read key page: %d, or a form shown", p.status)
	}
	if p := e.send("POST", "/settings/notifications", ro, url.Values{"csrf_token": {e.csrf(ro)}, "rows": {"0"}}); p.status != http.StatusForbidden {
		t.Errorf("read key POST: %d, want 403", p.status)
	}
	if s, _ := e.db.NotificationSettings(e.orgA.ID); len(s.Recipients) != 1 {
		t.Errorf("the read key's POST changed the list")
	}
}
