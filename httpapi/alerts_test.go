package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/alert"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// failingReport stores a report of d for the day before the clock's with
// pass and fail messages from one source, raising the alerts the rules
// find for it.
func failingReport(t *testing.T, e *env, d *store.Domain, pass, fail int64) {
	t.Helper()
	day := e.clock.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -1)
	recs := []*store.Record{
		{SourceIP: "192.0.2.1", Count: pass, Disposition: "none", DKIM: "pass", SPF: "pass", HeaderFrom: d.Name},
		{SourceIP: "192.0.2.1", Count: fail, Disposition: "none", DKIM: "fail", SPF: "fail", HeaderFrom: d.Name},
	}
	mustReport(t, e.db, d, day, "google.com", recs)
}

// alertsEnv has org A with two domains and three alerts (a1 warning and a2
// critical on dom1, a3 a DNS alert on dom2), and org B with one.
type alertsEnv struct {
	*env
	dom1, dom2, domB *store.Domain
	a1, a2, a3, b1   string
}

func newAlertsEnv(t *testing.T) *alertsEnv {
	t.Helper()
	e := &alertsEnv{env: newEnv(t, 1000)}
	e.dom1 = storetest.MustDomain(t, e.db, e.orgA.ID, "alpha.example")
	e.dom2 = storetest.MustDomain(t, e.db, e.orgA.ID, "second.example")
	e.domB = storetest.MustDomain(t, e.db, e.orgB.ID, "alpha.example")
	latest := func(org *store.Organization) string {
		as, _, err := e.db.ListAlerts(org.ID, store.AlertFilter{Page: store.Page{Page: 1, Limit: 1}})
		if err != nil || len(as) == 0 {
			t.Fatalf("no alert raised: %v", err)
		}
		return as[0].ID
	}
	failingReport(t, e.env, e.dom1, 80, 20)
	e.a1 = latest(e.orgA)
	e.clock.Advance(time.Minute)
	failingReport(t, e.env, e.dom1, 20, 80)
	e.a2 = latest(e.orgA)
	e.clock.Advance(time.Minute)
	if _, err := e.db.RecordDNSCheck(store.DNSCheck{DomainID: e.dom2.ID, Record: "v=DMARC1; p=none",
		Alert: &alert.Candidate{Type: alert.TypePolicyWeakened, Severity: alert.SeverityWarning, Title: "weakened", Message: "p lowered",
			Details: map[string]string{"old_record": "v=DMARC1; p=reject", "new_record": "v=DMARC1; p=none"}}}); err != nil {
		t.Fatal(err)
	}
	e.a3 = latest(e.orgA)
	failingReport(t, e.env, e.domB, 0, 50)
	e.b1 = latest(e.orgB)
	return e
}

type alertList struct {
	Data       []map[string]any `json:"data"`
	Pagination pagination       `json:"pagination"`
}

func (e *alertsEnv) list(t *testing.T, key, query string) alertList {
	t.Helper()
	r := e.do("GET", "/api/v1/alerts"+query, key, nil)
	if r.status != http.StatusOK {
		t.Fatalf("GET /alerts%s: %d %s", query, r.status, r.body)
	}
	var l alertList
	if err := json.Unmarshal(r.body, &l); err != nil {
		t.Fatal(err)
	}
	return l
}

func ids(l alertList) []string {
	var out []string
	for _, a := range l.Data {
		out = append(out, a["id"].(string))
	}
	return out
}

// TestListAlerts ensures the list shows the organization's alerts newest
// first in API.md's shape, and each filter and page selects the right
// ones.
func TestListAlerts(t *testing.T) {
	e := newAlertsEnv(t)
	l := e.list(t, e.readA, "")
	if got := fmt.Sprint(ids(l)); got != fmt.Sprint([]string{e.a3, e.a2, e.a1}) {
		t.Fatalf("alerts %v, want a3 a2 a1", got)
	}
	if l.Pagination != (pagination{Page: 1, Limit: 20, Total: 3, TotalPages: 1}) {
		t.Errorf("pagination %+v", l.Pagination)
	}
	a := l.Data[1]
	for _, field := range []string{"id", "domain_id", "type", "severity", "status", "title", "message", "details", "created_at", "sent_at", "dismissed_at"} {
		if _, ok := a[field]; !ok {
			t.Errorf("alert lacks %s: %v", field, a)
		}
	}
	if len(a) != 11 {
		t.Errorf("alert has %d fields, want 11: %v", len(a), a)
	}
	if a["type"] != "dmarc_failure_rate" || a["severity"] != "critical" || a["status"] != "pending" ||
		a["domain_id"] != e.dom1.ID || a["sent_at"] != nil || a["dismissed_at"] != nil || a["created_at"] != "2026-11-22T09:31:00Z" {
		t.Errorf("alert %v", a)
	}
	if det, ok := a["details"].(map[string]any); !ok || det["dmarc_fail"] != 80.0 || det["reporter"] != "google.com" {
		t.Errorf("details %v", a["details"])
	}

	for _, tc := range []struct {
		query string
		want  []string
		total int
	}{
		{"?severity=warning", []string{e.a3, e.a1}, 2},
		{"?severity=critical", []string{e.a2}, 1},
		{"?severity=info", nil, 0},
		{"?status=pending", []string{e.a3, e.a2, e.a1}, 3},
		{"?status=dismissed", nil, 0},
		{"?domain_id=" + e.dom1.ID, []string{e.a2, e.a1}, 2},
		{"?domain_id=" + e.dom2.ID + "&severity=warning", []string{e.a3}, 1},
		{"?limit=2", []string{e.a3, e.a2}, 3},
		{"?limit=2&page=2", []string{e.a1}, 3},
		{"?page=3&limit=2", nil, 3},
	} {
		l := e.list(t, e.keyA, tc.query)
		if fmt.Sprint(ids(l)) != fmt.Sprint(tc.want) || l.Pagination.Total != tc.total {
			t.Errorf("%s: %v (total %d), want %v (total %d)", tc.query, ids(l), l.Pagination.Total, tc.want, tc.total)
		}
		if l.Data == nil {
			t.Errorf("%s: data is null, want []", tc.query)
		}
	}
	if got := ids(e.list(t, e.keyB, "")); fmt.Sprint(got) != fmt.Sprint([]string{e.b1}) {
		t.Errorf("organization B sees %v", got)
	}
}

// TestListAlertsBadInput ensures bad filters are 400 and another
// organization's domain is 404.
func TestListAlertsBadInput(t *testing.T) {
	e := newAlertsEnv(t)
	for _, q := range []string{
		"?severity=loud", "?severity=", "?severity=WARNING", "?status=gone", "?status=",
		"?domain_id=nope", "?domain_id=", "?page=0", "?page=x", "?limit=0", "?limit=101", "?limit=-1",
	} {
		r := e.do("GET", "/api/v1/alerts"+q, e.keyA, nil)
		if r.status != http.StatusBadRequest || r.errorCode(t) != "bad_request" {
			t.Errorf("%s: %d %s, want 400 bad_request", q, r.status, r.body)
		}
	}
	r := e.do("GET", "/api/v1/alerts?domain_id="+e.domB.ID, e.keyA, nil)
	if r.status != http.StatusNotFound || r.errorCode(t) != "not_found" {
		t.Errorf("another organization's domain: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/api/v1/alerts", "", nil); r.status != http.StatusUnauthorized {
		t.Errorf("no key: %d", r.status)
	}
}

// TestDismissAlert ensures dismissal answers 200 with the alert, again 200
// with the same time, shows in the list, needs a full key, and another
// organization's or an unknown alert is 404.
func TestDismissAlert(t *testing.T) {
	e := newAlertsEnv(t)
	path := "/api/v1/alerts/" + e.a2 + "/dismiss"
	r := e.do("PUT", path, e.keyA, nil)
	if r.status != http.StatusOK {
		t.Fatalf("dismiss: %d %s", r.status, r.body)
	}
	first := r.json(t)
	if first["id"] != e.a2 || first["status"] != "dismissed" || first["dismissed_at"] != "2026-11-22T09:32:00Z" {
		t.Errorf("dismissed alert %v", first)
	}
	e.clock.Advance(time.Hour)
	r = e.do("PUT", path, e.keyA, nil)
	if r.status != http.StatusOK || r.json(t)["dismissed_at"] != first["dismissed_at"] {
		t.Errorf("dismiss again: %d %s", r.status, r.body)
	}
	if got := ids(e.list(t, e.keyA, "?status=dismissed")); fmt.Sprint(got) != fmt.Sprint([]string{e.a2}) {
		t.Errorf("dismissed list %v", got)
	}
	for _, tc := range []struct {
		name, method, path, key string
		status                  int
		code                    string
	}{
		{"another organization's", "PUT", "/api/v1/alerts/" + e.b1 + "/dismiss", e.keyA, 404, "not_found"},
		{"from the other side", "PUT", "/api/v1/alerts/" + e.a1 + "/dismiss", e.keyB, 404, "not_found"},
		{"unknown", "PUT", "/api/v1/alerts/" + store.NewID() + "/dismiss", e.keyA, 404, "not_found"},
		{"malformed", "PUT", "/api/v1/alerts/x/dismiss", e.keyA, 404, "not_found"},
		{"read key", "PUT", "/api/v1/alerts/" + e.a1 + "/dismiss", e.readA, 403, "insufficient_scope"},
		{"wrong method", "POST", "/api/v1/alerts/" + e.a1 + "/dismiss", e.keyA, 405, "method_not_allowed"},
	} {
		r := e.do(tc.method, tc.path, tc.key, nil)
		if r.status != tc.status || r.errorCode(t) != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, r.status, r.body, tc.status, tc.code)
		}
	}
	// Nothing of that changed B's alert or A's first.
	if l := e.list(t, e.keyB, "?status=pending"); len(l.Data) != 1 {
		t.Errorf("B's alert changed: %v", l.Data)
	}
	if l := e.list(t, e.keyA, "?status=pending"); !strings.Contains(fmt.Sprint(ids(l)), e.a1) {
		t.Errorf("A's first alert changed: %v", ids(l))
	}
}
