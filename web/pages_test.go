package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/alert"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

func sp(s string) *string { return &s }

// mustReport stores a report of domain d as ingest does.
func mustReport(tb testing.TB, db *store.DB, d *store.Domain, begin time.Time, reporter string, records []*store.Record) *store.Report {
	tb.Helper()
	draft, err := db.NewReportDraft(store.Report{
		DomainID: d.ID, Domain: d.Name, OrgID: d.OrgID,
		OrgName: reporter, OrgEmail: "noreply@example.org", ExternalReportID: store.NewID(),
		DateBegin: begin, DateEnd: begin.Add(24*time.Hour - time.Second), ReceivedAt: begin.Add(30 * time.Hour),
		PolicyPublished: store.PolicyPublished{Domain: d.Name, P: "none", PCT: 100, ADKIM: "r", ASPF: "r"},
	})
	if err != nil {
		tb.Fatal(err)
	}
	for _, r := range records {
		draft.Add(r)
	}
	draft.Finish()
	outs, err := db.NewIngester().Commit(&store.IngestBatch{Reports: []*store.ReportDraft{draft}})
	if err != nil || !outs[0].Stored {
		tb.Fatalf("storing a report: %v %+v", err, outs)
	}
	rep := draft.Report()
	return &rep
}

func goodRecords() []*store.Record {
	return []*store.Record{
		{SourceIP: "192.0.2.1", Count: 90, Disposition: "none", DKIM: "pass", SPF: "pass", DMARC: "pass",
			HeaderFrom: "alpha.example", Reasons: []store.Reason{},
			AuthResults: store.AuthResults{DKIM: []store.DKIMAuth{}, SPF: []store.SPFAuth{}}},
		{SourceIP: "192.0.2.2", Count: 10, Disposition: "reject", DKIM: "fail", SPF: "fail", DMARC: "fail",
			HeaderFrom: "alpha.example", Reasons: []store.Reason{},
			AuthResults: store.AuthResults{DKIM: []store.DKIMAuth{}, SPF: []store.SPFAuth{}}},
	}
}

// mustAlert raises an alert on d through the DNS change check.
func mustAlert(tb testing.TB, db *store.DB, d *store.Domain, title, msg string) *store.Alert {
	tb.Helper()
	cur, err := db.FindDomainByID(d.ID)
	if err != nil {
		tb.Fatal(err)
	}
	a, err := db.RecordDNSCheck(store.DNSCheck{DomainID: d.ID, Seen: cur.LastDNSRecord, Record: cur.LastDNSRecord,
		Alert: &alert.Candidate{Type: alert.TypeDNSRecordChanged, Severity: alert.SeverityWarning, Title: title, Message: msg,
			Details: json.RawMessage(`{}`)}})
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

// hostile strings from reports: each must come out escaped everywhere.
// handlerAttr finds an event handler attribute inside a tag.
var handlerAttr = regexp.MustCompile(`<[a-zA-Z][^<>]*\s(on[a-z]+)\s*=`)

// quotedValue is a double-quoted attribute value.
var quotedValue = regexp.MustCompile(`"[^"]*"`)

var hostile = []string{`<script>alert(1)</script>`, `"><svg onload=alert(2)>`, `javascript:alert(3)`, `'><img src=x onerror=alert(4)>`}

// TestHostileTextEscaped stores report fields, an alert and a DNS record
// made of hostile text and checks that no page renders them as markup:
// not in HTML, not in attributes, not in the SVG charts' titles, and no
// javascript: URL becomes a link.
func TestHostileTextEscaped(t *testing.T) {
	e := newEnv(t)
	cur, _ := e.db.FindDomainByID(e.domA.ID)
	if _, err := e.db.RecordDNSCheck(store.DNSCheck{DomainID: e.domA.ID, Seen: cur.LastDNSRecord,
		Record: `v=DMARC1; p=none; rua=javascript:alert(5); x="><svg onload=alert(6)>`}); err != nil {
		t.Fatal(err)
	}
	recs := goodRecords()
	h := strings.Join(hostile, " ")
	recs[1].HeaderFrom = h
	recs[1].EnvelopeFrom = sp(h)
	recs[1].Reasons = []store.Reason{{Type: "local_policy", Comment: sp(h)}}
	asn := uint32(64500)
	recs[1].Geo = &store.Geo{CountryCode: sp(`"><svg onload=alert(7)>`), City: sp(h), ASOrg: sp(h), ASN: &asn}
	recs = append(recs, &store.Record{SourceIP: "192.0.2.3", Count: 5, Disposition: "none", DKIM: "fail", SPF: "fail",
		HeaderFrom: "alpha.example", Reasons: []store.Reason{},
		AuthResults: store.AuthResults{DKIM: []store.DKIMAuth{{Domain: h, Result: "pass"}}, SPF: []store.SPFAuth{{Domain: h, Result: "pass"}}}})
	rep := mustReport(t, e.db, e.domA, storetest.Epoch().Add(-48*time.Hour), h, recs)
	mustAlert(t, e.db, e.domA, h, h)
	// Host names from PTR records (the rDNS cache) are hostile too, and
	// name sender groups; so are TLS reports' fields.
	if err := e.db.PutRDNS([]store.RDNSEntry{{IP: "192.0.2.3", Status: store.RDNSConfirmed, Hostname: `"><svg onload=alert(8)>.evil.example`, CheckedAt: e.clock.Now()},
		{IP: "192.0.2.1", Status: store.RDNSConfirmed, Hostname: h, CheckedAt: e.clock.Now()}}); err != nil {
		t.Fatal(err)
	}
	tlsID := mustTLS(t, e.db, e.domA, storetest.Epoch().Truncate(24*time.Hour).AddDate(0, 0, -2), h)
	cookie := e.signIn(e.fullA)
	for _, path := range []string{"/", "/domains/" + e.domA.ID, "/reports", "/reports/" + rep.ID, "/alerts",
		"/reports?domain=" + url.QueryEscape(h), "/?q=" + url.QueryEscape(h), "/?sort=" + url.QueryEscape(h),
		"/domains/" + e.domA.ID + "/sources", "/tls-reports", "/tls-reports/" + tlsID,
		"/forensic?source_ip=" + url.QueryEscape(h), "/domains/" + e.domA.ID + "/sources?from=" + url.QueryEscape(h)} {
		p := e.send("GET", path, cookie, nil)
		if p.status != 200 && !(p.status == 404 && strings.Contains(path, "domain=")) && !(p.status == 400 && strings.Contains(path, "%3C")) {
			t.Errorf("GET %s: %d", path, p.status)
			continue
		}
		for _, bad := range []string{"<script>alert", "<svg onload", "<img src=x", `href="javascript:`, `src="javascript:`, `"><svg o`} {
			if strings.Contains(p.body, bad) {
				i := strings.Index(p.body, bad)
				t.Errorf("GET %s renders %q: …%s…", path, bad, p.body[max(0, i-80):min(len(p.body), i+80)])
			}
		}
		// Quoted attribute values are data (html/template writes every
		// quote inside them as &#34;): an injected handler would stand
		// outside them.
		if m := handlerAttr.FindString(quotedValue.ReplaceAllString(p.body, `""`)); m != "" {
			t.Errorf("GET %s has an event handler attribute: %s", path, m)
		}
	}
	// The text is there, escaped, where it belongs.
	p := e.send("GET", "/reports/"+rep.ID, cookie, nil)
	if !strings.Contains(p.body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("the report page does not show the hostile text escaped")
	}
	for _, path := range []string{"/domains/" + e.domA.ID, "/tls-reports/" + tlsID} {
		if p := e.send("GET", path, cookie, nil); !strings.Contains(p.body, "&lt;script&gt;alert(1)&lt;/script&gt;") ||
			!strings.Contains(p.body, "&#34;&gt;&lt;svg onload=alert(2)&gt;") {
			t.Errorf("%s does not show the hostile text escaped", path)
		}
	}
}

// TestOverviewAndDomainPages checks the numbers the pages show against
// what was stored, and the empty states.
func TestOverviewAndDomainPages(t *testing.T) {
	e := newEnv(t)
	cookie := e.signIn(e.fullA)
	p := e.send("GET", "/", cookie, nil)
	if p.status != 200 || !strings.Contains(p.body, "alpha.example") || !strings.Contains(p.body, "No reports in these 30 days") {
		t.Fatalf("overview before reports: %d", p.status)
	}
	p = e.send("GET", "/domains/"+e.domA.ID, cookie, nil)
	for _, want := range []string{"Publish these DNS records", "_dmarc.alpha.example", e.domA.ReportingEmail,
		"alpha.example._report._dmarc.reports.test", `action="/domains/` + e.domA.ID + `/verify"`, "No reports yet"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("pending domain page lacks %q", want)
		}
	}
	mustReport(t, e.db, e.domA, storetest.Epoch().Add(-48*time.Hour), "google.com", goodRecords())
	mustReport(t, e.db, e.domA, storetest.Epoch().Add(-72*time.Hour), "yahoo.com", goodRecords()[:1])
	mustReport(t, e.db, e.domB, storetest.Epoch().Add(-48*time.Hour), "google.com", goodRecords())
	p = e.send("GET", "/", cookie, nil)
	for _, want := range []string{">190<", "94.7 %", ">10<", `<svg class="chart"`, "<title>2026-11-20: 100 messages, 90 pass, 10 fail</title>"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("overview lacks %q", want)
		}
	}
	if strings.Contains(p.body, "beta.example") {
		t.Error("overview shows another organization's domain")
	}
	p = e.send("GET", "/domains/"+e.domA.ID, cookie, nil)
	for _, want := range []string{"google.com", "yahoo.com", "192.0.2.1", "Disposition", ">2<"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("domain page lacks %q", want)
		}
	}
}

// TestAddDomainAndDelete walks adding a domain (bad names refused with
// the reason, nothing stored) and deleting it behind a confirmation page.
func TestAddDomainAndDelete(t *testing.T) {
	e := newEnv(t)
	cookie := e.signIn(e.fullA)
	token := e.csrf(cookie)
	if p := e.send("GET", "/domains/new", cookie, nil); p.status != 200 || !strings.Contains(p.body, `<label for="name">`) {
		t.Fatalf("new domain page: %d", p.status)
	}
	for _, bad := range []string{"", "not a domain", "alpha.example"} {
		p := e.send("POST", "/domains", cookie, url.Values{"csrf_token": {token}, "name": {bad}})
		if p.status != http.StatusUnprocessableEntity || !strings.Contains(p.body, `role="alert"`) {
			t.Errorf("name %q: %d", bad, p.status)
		}
	}
	p := e.send("POST", "/domains", cookie, url.Values{"csrf_token": {token}, "name": {"New.Example."}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("add: %d %s", p.status, p.body)
	}
	loc := p.header.Get("Location")
	p = e.send("GET", loc, cookie, nil)
	if !strings.Contains(p.body, "new.example") || !strings.Contains(p.body, "_dmarc.new.example") {
		t.Errorf("new domain's page: %s", loc)
	}
	if ds, _, _ := e.db.ListDomains(e.orgA.ID, store.Page{Page: 1, Limit: 10}); len(ds) != 2 {
		t.Errorf("%d domains, want 2", len(ds))
	}
	if p := e.send("GET", loc+"/delete", cookie, nil); p.status != 200 || !strings.Contains(p.body, "Delete new.example") {
		t.Errorf("confirmation: %d", p.status)
	}
	if p := e.send("POST", loc+"/delete", cookie, url.Values{"csrf_token": {token}}); p.status != http.StatusSeeOther {
		t.Errorf("delete: %d", p.status)
	}
	if p := e.send("GET", loc, cookie, nil); p.status != 404 {
		t.Errorf("deleted domain: %d", p.status)
	}
}

// TestKeysPage creates a key (its value shown once), refuses a sixth, and
// revokes one.
func TestKeysPage(t *testing.T) {
	e := newEnv(t)
	cookie := e.signIn(e.fullA)
	token := e.csrf(cookie)
	p := e.send("POST", "/settings/keys", cookie, url.Values{"csrf_token": {token}, "name": {"grafana <b>"}, "scope": {"read"}})
	if p.status != http.StatusCreated {
		t.Fatalf("create: %d", p.status)
	}
	secret := regexp.MustCompile(`dmk_[0-9a-f]{32}`).FindString(p.body)
	if secret == "" || !strings.Contains(p.body, "grafana &lt;b&gt;") {
		t.Fatal("the new key is not shown")
	}
	if p := e.send("GET", "/api/v1/keys", "", nil, "X-API-Key", secret); p.status != 200 {
		t.Errorf("the shown key does not work: %d", p.status)
	}
	if p := e.send("GET", "/settings/keys", cookie, nil); strings.Contains(p.body, secret) {
		t.Error("the key is shown again")
	}
	for range 2 {
		e.send("POST", "/settings/keys", cookie, url.Values{"csrf_token": {token}, "name": {"k"}})
	}
	p = e.send("POST", "/settings/keys", cookie, url.Values{"csrf_token": {token}, "name": {"sixth"}})
	if p.status != http.StatusUnprocessableEntity || !strings.Contains(p.body, "5 active keys") {
		t.Errorf("sixth key: %d", p.status)
	}
	if ks, _ := e.db.ListAPIKeys(e.orgA.ID); len(ks) != 5 {
		t.Errorf("%d keys, want 5", len(ks))
	}
	keys, _ := e.db.ListAPIKeys(e.orgA.ID)
	p = e.send("POST", "/settings/keys/"+keys[2].ID+"/revoke", cookie, url.Values{"csrf_token": {token}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("revoke: %d", p.status)
	}
	if p := e.send("GET", "/api/v1/keys", "", nil, "X-API-Key", secret); p.status != 401 {
		t.Errorf("revoked key: %d", p.status)
	}
}

// TestAlertsDismiss filters alerts and dismisses one.
func TestAlertsDismiss(t *testing.T) {
	e := newEnv(t)
	a := mustAlert(t, e.db, e.domA, "Record changed", "p=none became p=reject")
	cookie := e.signIn(e.fullA)
	if p := e.send("GET", "/alerts?severity=critical", cookie, nil); strings.Contains(p.body, "Record changed") {
		t.Error("severity filter shows a warning")
	}
	if p := e.send("GET", "/alerts?severity=loud&status=x", cookie, nil); p.status != 200 || !strings.Contains(p.body, "Record changed") {
		t.Errorf("bad filters: %d", p.status)
	}
	p := e.send("POST", "/alerts/"+a.ID+"/dismiss", cookie, url.Values{"csrf_token": {e.csrf(cookie)}, "next": {"//evil.example"}})
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/alerts" {
		t.Fatalf("dismiss: %d %q", p.status, p.header.Get("Location"))
	}
	if got := storetest.Alert(t, e.db, e.orgA.ID, a.ID); got.Status != store.AlertDismissed {
		t.Errorf("status %s", got.Status)
	}
}

// TestReportPageLegacyVerdict ensures a record of a legacy report (no
// policy_evaluated dkim and spf) shows them as not given and its DMARC
// result as derived; a record with its verdicts shows neither.
func TestReportPageLegacyVerdict(t *testing.T) {
	e := newEnv(t)
	legacy := &store.Record{SourceIP: "192.0.2.44", Count: 3, Disposition: "none", HeaderFrom: e.domA.Name, Reasons: []store.Reason{},
		AuthResults: store.AuthResults{DKIM: []store.DKIMAuth{{Domain: e.domA.Name, Result: "pass"}}}}
	rep := mustReport(t, e.db, e.domA, storetest.Epoch().Add(-48*time.Hour), "aol.com", []*store.Record{legacy})
	cookie := e.signIn(e.fullA)
	p := e.send("GET", "/reports/"+rep.ID, cookie, nil)
	if !strings.Contains(p.body, "not given") || !strings.Contains(p.body, `<span class="res pass">pass</span> <span class="muted"`) || !strings.Contains(p.body, "(derived)") {
		t.Errorf("a legacy record's page does not show its verdicts as not given and its DMARC pass as derived")
	}
	other := mustReport(t, e.db, e.domA, storetest.Epoch().Add(-72*time.Hour), "google.com", goodRecords())
	if p := e.send("GET", "/reports/"+other.ID, cookie, nil); strings.Contains(p.body, "(derived)") || strings.Contains(p.body, "not given") {
		t.Errorf("a report with its verdicts shows them as derived or not given")
	}
}
