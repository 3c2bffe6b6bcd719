package httpapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// mustFailure stores a failure report of d from ip (none when "") that
// arrived at arrival, naming checks as failed, and returns its id.
func mustFailure(tb testing.TB, db *store.DB, d *store.Domain, arrival time.Time, ip string, checks ...string) string {
	tb.Helper()
	r := &store.FailureReport{DomainID: d.ID, Domain: d.Name, OrgID: d.OrgID,
		ReceivedAt: arrival.Add(time.Minute), ArrivalDate: arrival, Reporter: sp("mx.reporter.example"),
		OriginalMailFrom: sp("bounce@evil.test"), OriginalRcptTo: sp("user@" + d.Name), ReportedDomain: sp(d.Name),
		Subject: sp("Invoice"), MessageID: sp(store.NewID() + "@evil.test"), AuthFailure: checks, DeliveryResult: sp("reject"),
		AuthenticationResults: store.FailureAuthResults{DMARC: sp("fail"), SPF: sp("fail")}}
	if ip != "" {
		r.SourceIP = &ip
		if ip == "81.2.69.142" {
			r.Geo = &store.Geo{CountryCode: sp("GB"), CountryName: sp("United Kingdom"), City: sp("London"), ASN: u32(20712), ASOrg: sp("A&A")}
		}
	}
	f, err := store.NewFailureDraft(&store.FailureReportDetail{FailureReport: r,
		Headers: []store.FailureHeader{{Name: "From", Value: "ceo@" + d.Name}, {Name: "Subject", Value: "Invoice"}}})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := db.NewIngester().Commit(&store.IngestBatch{Failures: []*store.FailureDraft{f}}); err != nil || !f.Outcome().Stored {
		tb.Fatalf("storing a failure report: %v %+v", err, f.Outcome())
	}
	return f.Report().ID
}

// failureEnv is the API env with failure reports in organization A
// (unlimited): a1 has f1 (Nov 20), f2 (Nov 21), f4 (Nov 22, no IP); a2 has
// f3 (Nov 21). Organization B (starter) has b1 with one report.
type failureEnv struct {
	*env
	a1, a2, b1     *store.Domain
	f1, f2, f3, f4 string
}

func newFailureEnv(t *testing.T) *failureEnv {
	t.Helper()
	e := &failureEnv{env: newEnv(t, 1000)}
	e.a1 = storetest.MustDomain(t, e.db, e.orgA.ID, "alpha.example")
	e.a2 = storetest.MustDomain(t, e.db, e.orgA.ID, "second.example")
	e.b1 = storetest.MustDomain(t, e.db, e.orgB.ID, "alpha.example")
	e.f1 = mustFailure(t, e.db, e.a1, time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC), "81.2.69.142", "dmarc")
	e.f2 = mustFailure(t, e.db, e.a1, time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC), "2001:db8::7", "dmarc", "spf")
	e.f3 = mustFailure(t, e.db, e.a2, time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC), "81.2.69.142", "dkim")
	e.f4 = mustFailure(t, e.db, e.a1, time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC), "", "dmarc", "dkim")
	mustFailure(t, e.db, e.b1, time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC), "81.2.69.142", "dmarc")
	return e
}

// TestFailurePlanGate ensures a plan without failure reports gets 403
// plan_feature_unavailable on every forensic-reports endpoint, before any
// parameter is looked at, and that a plan change takes effect at once.
func TestFailurePlanGate(t *testing.T) {
	e := newFailureEnv(t)
	paths := []string{
		"/api/v1/forensic-reports", "/api/v1/forensic-reports/" + e.f1, "/api/v1/forensic-reports/summary",
		"/api/v1/forensic-reports/statistics",
		"/api/v1/forensic-reports?auth_failure=foo&source_ip=nope&page=0&limit=1000&domain_id=x",
		"/api/v1/forensic-reports/statistics?date_from=soon&domain_id=x", "/api/v1/forensic-reports/not-an-id",
	}
	for _, p := range paths {
		r := e.do("GET", p, e.keyB, nil)
		if r.status != http.StatusForbidden || r.errorCode(t) != "plan_feature_unavailable" {
			t.Errorf("starter GET %s: %d %s", p, r.status, r.body)
		}
		if r := e.do("GET", p, "", nil); r.status != http.StatusUnauthorized {
			t.Errorf("no key GET %s: %d, want 401 first", p, r.status)
		}
	}
	if _, err := e.db.SetOrganizationPlan(e.orgB.ID, store.PlanBusiness); err != nil {
		t.Fatal(err)
	}
	for _, p := range paths[:4] {
		if r := e.do("GET", p, e.keyB, nil); r.status == http.StatusForbidden {
			t.Errorf("business GET %s: still 403 %s", p, r.body)
		}
	}
}

type failureList struct {
	Data       []map[string]any `json:"data"`
	Pagination pagination       `json:"pagination"`
}

// TestListFailureReports ensures every filter, their combinations and
// pagination select the right reports, newest arrival first, in the
// API.md shape.
func TestListFailureReports(t *testing.T) {
	e := newFailureEnv(t)
	unix := func(d, h int) string {
		return strconv.FormatInt(time.Date(2026, 11, d, h, 0, 0, 0, time.UTC).Unix(), 10)
	}
	for _, c := range []struct {
		query string
		want  []string
		total int
	}{
		{"", []string{e.f4, e.f3, e.f2, e.f1}, 4},
		{"domain_id=" + e.a1.ID, []string{e.f4, e.f2, e.f1}, 3},
		{"domain_id=" + e.a2.ID, []string{e.f3}, 1},
		{"date_from=" + unix(21, 10), []string{e.f4, e.f3, e.f2}, 3},
		{"date_to=" + unix(21, 10), []string{e.f2, e.f1}, 2},
		{"date_from=" + unix(21, 0) + "&date_to=" + unix(21, 23), []string{e.f3, e.f2}, 2},
		{"source_ip=81.2.69.142", []string{e.f3, e.f1}, 2},
		{"source_ip=::ffff:81.2.69.142", []string{e.f3, e.f1}, 2},
		{"source_ip=2001:0db8:0:0::7", []string{e.f2}, 1},
		{"source_ip=192.0.2.99", []string{}, 0},
		{"auth_failure=dmarc", []string{e.f4, e.f2, e.f1}, 3},
		{"auth_failure=spf", []string{e.f2}, 1},
		{"auth_failure=dkim", []string{e.f4, e.f3}, 2},
		{"auth_failure=dkim&domain_id=" + e.a1.ID, []string{e.f4}, 1},
		{"auth_failure=dmarc&source_ip=81.2.69.142&date_from=" + unix(20, 0), []string{e.f1}, 1},
		{"limit=2", []string{e.f4, e.f3}, 4},
		{"limit=2&page=2", []string{e.f2, e.f1}, 4},
		{"page=3&limit=2", []string{}, 4},
	} {
		t.Run(c.query, func(t *testing.T) {
			r := e.do("GET", "/api/v1/forensic-reports?"+c.query, e.readA, nil)
			if r.status != http.StatusOK {
				t.Fatalf("%d %s", r.status, r.body)
			}
			var l failureList
			if err := json.Unmarshal(r.body, &l); err != nil {
				t.Fatal(err)
			}
			ids := []string{}
			for _, d := range l.Data {
				ids = append(ids, d["id"].(string))
			}
			if !slices.Equal(ids, c.want) || l.Pagination.Total != c.total {
				t.Errorf("got %v (total %d), want %v (total %d)", ids, l.Pagination.Total, c.want, c.total)
			}
		})
	}
	r := e.do("GET", "/api/v1/forensic-reports?domain_id="+e.a2.ID, e.keyA, nil)
	var l failureList
	_ = json.Unmarshal(r.body, &l)
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range l.Data[0] {
			if !yield(k) {
				return
			}
		}
	})
	want := []string{"arrival_date", "auth_failure", "auth_failure_reported", "authentication_results", "delivery_result", "domain", "domain_id",
		"feedback_type", "geo", "id", "message_id", "original_mail_from", "original_rcpt_to", "received_at",
		"reported_domain", "reporter", "source_ip", "subject"}
	if !slices.Equal(keys, want) {
		t.Errorf("list object keys %v\nwant %v", keys, want)
	}
	d := l.Data[0]
	if d["arrival_date"] != "2026-11-21T12:00:00Z" || d["feedback_type"] != "auth-failure" || d["domain"] != "second.example" ||
		!reflect.DeepEqual(d["auth_failure"], []any{"dkim"}) ||
		!reflect.DeepEqual(d["authentication_results"], map[string]any{"dmarc": "fail", "spf": "fail", "dkim": nil}) ||
		d["geo"].(map[string]any)["country_code"] != "GB" {
		t.Errorf("object %v", d)
	}
}

// TestFailureBadFilters ensures bad query values are 400 (naming the
// field) and a domain of another organization is 404.
func TestFailureBadFilters(t *testing.T) {
	e := newFailureEnv(t)
	for _, c := range []struct {
		path, field string
	}{
		{"/api/v1/forensic-reports?auth_failure=foo", "auth_failure"},
		{"/api/v1/forensic-reports?auth_failure=DMARC", "auth_failure"},
		{"/api/v1/forensic-reports?source_ip=not-an-ip", "source_ip"},
		{"/api/v1/forensic-reports?source_ip=81.2.69", "source_ip"},
		{"/api/v1/forensic-reports?source_ip=" + url.QueryEscape("fe80::1%eth0"), "source_ip"},
		{"/api/v1/forensic-reports?date_from=yesterday", "date_from"},
		{"/api/v1/forensic-reports?date_to=-1", "date_to"},
		{"/api/v1/forensic-reports?date_from=100&date_to=99", "date_to"},
		{"/api/v1/forensic-reports?domain_id=nope", "domain_id"},
		{"/api/v1/forensic-reports?limit=0", "limit"},
		{"/api/v1/forensic-reports?limit=101", "limit"},
		{"/api/v1/forensic-reports?page=x", "page"},
		{"/api/v1/forensic-reports/statistics?date_from=1.5", "date_from"},
		{"/api/v1/forensic-reports/statistics?domain_id=nope", "domain_id"},
		{"/api/v1/forensic-reports/statistics?date_from=100&date_to=99", "date_to"},
	} {
		t.Run(c.path, func(t *testing.T) {
			r := e.do("GET", c.path, e.keyA, nil)
			if r.status != http.StatusBadRequest || r.errorCode(t) != "bad_request" {
				t.Fatalf("%d %s", r.status, r.body)
			}
			var body struct {
				Error struct{ Details []FieldError } `json:"error"`
			}
			_ = json.Unmarshal(r.body, &body)
			if len(body.Error.Details) != 1 || body.Error.Details[0].Field != c.field {
				t.Errorf("details %+v, want field %s", body.Error.Details, c.field)
			}
		})
	}
	for _, p := range []string{
		"/api/v1/forensic-reports?domain_id=" + e.b1.ID, "/api/v1/forensic-reports/statistics?domain_id=" + e.b1.ID,
		"/api/v1/forensic-reports?domain_id=" + store.NewID(),
	} {
		if r := e.do("GET", p, e.keyA, nil); r.status != http.StatusNotFound || r.errorCode(t) != "not_found" {
			t.Errorf("%s: %d %s", p, r.status, r.body)
		}
	}
	if r := e.do("POST", "/api/v1/forensic-reports/summary", e.keyA, nil); r.status != http.StatusMethodNotAllowed {
		t.Errorf("POST summary: %d", r.status)
	}
}

// TestGetFailureReport ensures the single GET adds the original headers (in
// order) and the DKIM fields, and hides other organizations' reports.
func TestGetFailureReport(t *testing.T) {
	e := newFailureEnv(t)
	r := e.do("GET", "/api/v1/forensic-reports/"+e.f1, e.readA, nil)
	if r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	m := r.json(t)
	if m["id"] != e.f1 || m["source_ip"] != "81.2.69.142" || m["subject"] != "Invoice" ||
		!reflect.DeepEqual(m["headers"], []any{map[string]any{"name": "From", "value": "ceo@alpha.example"},
			map[string]any{"name": "Subject", "value": "Invoice"}}) {
		t.Errorf("report %s", r.body)
	}
	if v, ok := m["dkim_domain"]; !ok || v != nil {
		t.Errorf("dkim_domain %v (present %v), want null", v, ok)
	}
	if _, ok := m["headers"]; !ok {
		t.Error("no headers field")
	}
	noIP := e.do("GET", "/api/v1/forensic-reports/"+e.f4, e.keyA, nil).json(t)
	if v, ok := noIP["source_ip"]; !ok || v != nil || noIP["geo"] != nil {
		t.Errorf("report without a source IP: source_ip %v geo %v", v, noIP["geo"])
	}
	for _, c := range []struct{ key, id string }{
		{e.keyA, store.NewID()}, {e.keyA, "nope"},
	} {
		if r := e.do("GET", "/api/v1/forensic-reports/"+c.id, c.key, nil); r.status != http.StatusNotFound || r.errorCode(t) != "not_found" {
			t.Errorf("GET %s: %d %s", c.id, r.status, r.body)
		}
	}
	if _, err := e.db.SetOrganizationPlan(e.orgB.ID, store.PlanBusiness); err != nil {
		t.Fatal(err)
	}
	if r := e.do("GET", "/api/v1/forensic-reports/"+e.f1, e.keyB, nil); r.status != http.StatusNotFound {
		t.Errorf("another organization's report: %d %s", r.status, r.body)
	}
}

type failureSummary struct {
	WindowStart   time.Time                  `json:"window_start"`
	WindowEnd     time.Time                  `json:"window_end"`
	Total         int64                      `json:"total"`
	ByAuthFailure store.FailureCheckCounts   `json:"by_auth_failure"`
	ByDomain      []store.FailureDomainCount `json:"by_domain"`
	TopSourceIPs  []store.FailureSourceCount `json:"top_source_ips"`
	ByDay         []store.FailureDayCount    `json:"by_day"`
}

// TestFailureSummaryWindow ensures the summary covers the 7 UTC days
// ending at the server's now (an injected clock), one row per day with
// zeros, and moves with the clock.
func TestFailureSummaryWindow(t *testing.T) {
	e := newFailureEnv(t)
	get := func() failureSummary {
		t.Helper()
		r := e.do("GET", "/api/v1/forensic-reports/summary", e.keyA, nil)
		if r.status != http.StatusOK {
			t.Fatalf("%d %s", r.status, r.body)
		}
		var s failureSummary
		if err := json.Unmarshal(r.body, &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := get() // now: Nov 22 09:30
	days := func(s failureSummary) string {
		out := ""
		for _, d := range s.ByDay {
			out += d.Date[8:] + ":" + strconv.FormatInt(d.Count, 10) + " "
		}
		return out
	}
	if !s.WindowStart.Equal(time.Date(2026, 11, 16, 0, 0, 0, 0, time.UTC)) || !s.WindowEnd.Equal(storetest.Epoch()) {
		t.Errorf("window %v .. %v", s.WindowStart, s.WindowEnd)
	}
	if got := days(s); got != "16:0 17:0 18:0 19:0 20:1 21:2 22:1 " {
		t.Errorf("by_day %s", got)
	}
	if s.Total != 4 || s.ByAuthFailure != (store.FailureCheckCounts{DMARC: 3, SPF: 1, DKIM: 2}) {
		t.Errorf("total %d %+v", s.Total, s.ByAuthFailure)
	}
	if len(s.ByDomain) != 2 || s.ByDomain[0].Domain != "alpha.example" || s.ByDomain[0].Count != 3 {
		t.Errorf("by_domain %+v", s.ByDomain)
	}
	if len(s.TopSourceIPs) != 2 || s.TopSourceIPs[0].SourceIP != "81.2.69.142" || s.TopSourceIPs[0].Count != 2 ||
		*s.TopSourceIPs[0].CountryCode != "GB" || s.TopSourceIPs[1].CountryCode != nil {
		t.Errorf("top_source_ips %+v", s.TopSourceIPs)
	}
	e.clock.Set(time.Date(2026, 11, 27, 0, 0, 1, 0, time.UTC))
	if got := days(get()); got != "21:2 22:1 23:0 24:0 25:0 26:0 27:0 " {
		t.Errorf("4 days later: by_day %s", got)
	}
	e.clock.Set(time.Date(2026, 12, 30, 0, 0, 0, 0, time.UTC))
	if s := get(); s.Total != 0 || len(s.ByDay) != 7 || s.ByDomain == nil || s.TopSourceIPs == nil || s.ByDay[6].Date != "2026-12-30" {
		t.Errorf("a month later: %+v", s)
	}
}

// TestFailureStatistics ensures the statistics count all time by default
// and by domain and date range when asked, with the groups of API.md.
func TestFailureStatistics(t *testing.T) {
	e := newFailureEnv(t)
	get := func(q string) map[string]any {
		t.Helper()
		r := e.do("GET", "/api/v1/forensic-reports/statistics"+q, e.keyA, nil)
		if r.status != http.StatusOK {
			t.Fatalf("%s: %d %s", q, r.status, r.body)
		}
		return r.json(t)
	}
	all := get("")
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range all {
			if !yield(k) {
				return
			}
		}
	})
	if !slices.Equal(keys, []string{"by_asn", "by_auth_failure", "by_country", "by_domain", "top_source_ips", "total"}) {
		t.Errorf("keys %v", keys)
	}
	if all["total"] != 4.0 || !reflect.DeepEqual(all["by_auth_failure"], map[string]any{"dmarc": 3.0, "spf": 1.0, "dkim": 2.0}) {
		t.Errorf("all time %v", all)
	}
	countries := all["by_country"].([]any)
	if len(countries) != 2 || countries[0].(map[string]any)["country_code"] != "GB" || countries[0].(map[string]any)["count"] != 2.0 ||
		countries[1].(map[string]any)["country_code"] != nil {
		t.Errorf("by_country %v", countries)
	}
	if asns := all["by_asn"].([]any); len(asns) != 2 || asns[0].(map[string]any)["asn"] != 20712.0 {
		t.Errorf("by_asn %v", asns)
	}
	if got := get("?domain_id=" + e.a2.ID)["total"]; got != 1.0 {
		t.Errorf("domain a2: total %v", got)
	}
	from := strconv.FormatInt(time.Date(2026, 11, 21, 11, 0, 0, 0, time.UTC).Unix(), 10)
	if got := get("?date_from=" + from)["total"]; got != 2.0 {
		t.Errorf("from Nov 21 11:00: total %v, want 2", got)
	}
}

// TestDeleteDomainDeletesFailureReports ensures deleting a domain through the
// API removes its failure reports from every endpoint.
func TestDeleteDomainDeletesFailureReports(t *testing.T) {
	e := newFailureEnv(t)
	if r := e.do("DELETE", "/api/v1/domains/"+e.a1.ID, e.keyA, nil); r.status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/api/v1/forensic-reports/"+e.f1, e.keyA, nil); r.status != http.StatusNotFound {
		t.Errorf("report of the deleted domain: %d", r.status)
	}
	var l failureList
	_ = json.Unmarshal(e.do("GET", "/api/v1/forensic-reports", e.keyA, nil).body, &l)
	if l.Pagination.Total != 1 || l.Data[0]["id"] != e.f3 {
		t.Errorf("left %+v", l)
	}
	if got := e.do("GET", "/api/v1/forensic-reports/summary", e.keyA, nil).json(t)["total"]; got != 1.0 {
		t.Errorf("summary total %v", got)
	}
}
