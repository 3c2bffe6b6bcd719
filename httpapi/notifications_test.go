package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/store"
)

func TestNotificationsAPI(t *testing.T) {
	e := newEnv(t, 1000)
	r := e.do("GET", "/api/v1/notifications", e.keyA, nil)
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"recipients":[]`) || !strings.Contains(string(r.body), `"updated_at":null`) {
		t.Fatalf("fresh: %d %s", r.status, r.body)
	}
	body := map[string]any{"recipients": []map[string]any{
		{"email": "Ops@Example.org", "alert_severities": []string{"critical", "warning"}, "digest": "weekly"},
		{"email": "cto@example.org", "alert_severities": []string{}, "digest": "daily"},
	}}
	r = e.do("PUT", "/api/v1/notifications", e.keyA, body)
	if r.status != http.StatusOK {
		t.Fatalf("PUT: %d %s", r.status, r.body)
	}
	got := r.json(t)
	list := got["recipients"].([]any)
	first := list[0].(map[string]any)
	if len(list) != 2 || first["email"] != "cto@example.org" || list[1].(map[string]any)["email"] != "ops@example.org" ||
		got["updated_at"] == nil {
		t.Fatalf("stored %s", r.body)
	}
	if sev := list[1].(map[string]any)["alert_severities"].([]any); len(sev) != 2 || sev[0] != "warning" {
		t.Errorf("severities %v, want rank order", sev)
	}

	// A read key reads but cannot change; another organization sees its
	// own (empty) list and changes only its own.
	if r := e.do("GET", "/api/v1/notifications", e.readA, nil); r.status != http.StatusOK || !strings.Contains(string(r.body), "ops@example.org") {
		t.Errorf("read key GET: %d %s", r.status, r.body)
	}
	if r := e.do("PUT", "/api/v1/notifications", e.readA, body); r.status != http.StatusForbidden || r.errorCode(t) != "insufficient_scope" {
		t.Errorf("read key PUT: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/api/v1/notifications", e.keyB, nil); r.status != http.StatusOK || strings.Contains(string(r.body), "ops@example.org") {
		t.Errorf("org B GET: %d %s", r.status, r.body)
	}
	if r := e.do("PUT", "/api/v1/notifications", e.keyB, map[string]any{"recipients": []any{}}); r.status != http.StatusOK {
		t.Errorf("org B PUT: %d %s", r.status, r.body)
	}
	if s, _ := e.db.NotificationSettings(e.orgA.ID); len(s.Recipients) != 2 {
		t.Errorf("org B's PUT changed org A's list: %+v", s.Recipients)
	}
	if r := e.do("GET", "/api/v1/notifications", "", nil); r.status != http.StatusUnauthorized {
		t.Errorf("no key: %d", r.status)
	}

	for name, c := range map[string]struct {
		body   any
		status int
		code   string
	}{
		"no recipients":    {map[string]any{}, 400, "bad_request"},
		"unknown field":    {map[string]any{"recipients": []any{}, "x": 1}, 400, "bad_request"},
		"bad address":      {map[string]any{"recipients": []map[string]any{{"email": "ops"}}}, 422, "validation_failed"},
		"header injection": {map[string]any{"recipients": []map[string]any{{"email": "ops@example.org\r\nBcc: x@example.org"}}}, 422, "validation_failed"},
		"bad severity":     {map[string]any{"recipients": []map[string]any{{"email": "a@example.org", "alert_severities": []string{"loud"}}}}, 422, "validation_failed"},
		"bad digest":       {map[string]any{"recipients": []map[string]any{{"email": "a@example.org", "digest": "hourly"}}}, 422, "validation_failed"},
		"twice":            {map[string]any{"recipients": []map[string]any{{"email": "a@example.org"}, {"email": "A@example.org"}}}, 422, "validation_failed"},
		"not JSON":         {"{", 400, "bad_request"},
	} {
		t.Run(name, func(t *testing.T) {
			r := e.do("PUT", "/api/v1/notifications", e.keyA, c.body)
			if r.status != c.status || r.errorCode(t) != c.code {
				t.Errorf("%d %s, want %d %s", r.status, r.body, c.status, c.code)
			}
		})
	}
	if s, _ := e.db.NotificationSettings(e.orgA.ID); len(s.Recipients) != 2 {
		t.Errorf("a refused PUT changed the list: %+v", s.Recipients)
	}
}

func TestMailLogAPI(t *testing.T) {
	e := newEnv(t, 1000)
	for _, org := range []*store.Organization{e.orgA, e.orgB} {
		if _, err := e.db.EnqueueMail(&store.OutgoingMail{OrgID: org.ID, Kind: store.MailKindAlert, To: "ops@example.org",
			Subject: "for " + org.Name, Text: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	r := e.do("GET", "/api/v1/notifications/mail", e.readA, nil)
	if r.status != http.StatusOK || !strings.Contains(string(r.body), "for alpha") || strings.Contains(string(r.body), "for beta") ||
		!strings.Contains(string(r.body), `"status":"queued"`) {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if r := e.do("GET", "/api/v1/notifications/mail?limit=0", e.keyA, nil); r.status != http.StatusBadRequest {
		t.Errorf("limit=0: %d", r.status)
	}
}
