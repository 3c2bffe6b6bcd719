package web_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/alert"
	"github.com/dmarcd/dmarcd/internal/egress"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
	"github.com/dmarcd/dmarcd/web"
)

// evidenceRecords is a day of mail of alpha.example: SendGrid signing
// for itself only (not aligned), the domain's own server, and a spoofer
// whose claims of alpha.example fail.
func evidenceRecords() []*store.Record {
	mk := func(ip string, n int64, dkim, spf store.Verdict, dkims, spfs [][3]string) *store.Record {
		r := &store.Record{SourceIP: ip, Count: n, Disposition: "none", DKIM: dkim, SPF: spf, HeaderFrom: "alpha.example",
			Reasons: []store.Reason{}, AuthResults: store.AuthResults{DKIM: []store.DKIMAuth{}, SPF: []store.SPFAuth{}}}
		for _, a := range dkims {
			r.AuthResults.DKIM = append(r.AuthResults.DKIM, store.DKIMAuth{Domain: a[0], Selector: sp(a[1]), Result: a[2]})
		}
		for _, a := range spfs {
			r.AuthResults.SPF = append(r.AuthResults.SPF, store.SPFAuth{Domain: a[0], Scope: sp(a[1]), Result: a[2]})
		}
		return r
	}
	spoof := mk("203.0.113.66", 7, "fail", "fail", [][3]string{{"alpha.example", "s1", "fail"}}, [][3]string{{"alpha.example", "mfrom", "softfail"}})
	spoof.EnvelopeFrom = sp("alpha.example")
	return []*store.Record{
		mk("167.89.0.1", 30, "fail", "fail", [][3]string{{"sendgrid.net", "s1", "pass"}}, [][3]string{{"em1.sendgrid.net", "mfrom", "pass"}}),
		mk("192.0.2.10", 100, "pass", "pass", [][3]string{{"alpha.example", "google", "pass"}}, [][3]string{{"alpha.example", "mfrom", "pass"}}),
		spoof,
	}
}

// TestWhoSendsByEvidence checks the domain page's who-sends table: names
// from the reports' evidence with that evidence beside them, the
// failing-only filter, the enforcement card naming only authorized
// senders as blocking, the sources drill-down by group and by IP with the
// DKIM and SPF domains of each source, and blank geolocation saying why.
func TestWhoSendsByEvidence(t *testing.T) {
	e := newEnv(t)
	if _, err := e.db.UpdateDomain(e.orgA.ID, e.domA.ID, func(d *store.Domain) error {
		d.Status, d.LastDNSRecord = store.DomainActive, "v=DMARC1; p=none; rua=mailto:x@reports.test"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for d := 1; d <= 14; d++ {
		mustReport(t, e.db, e.domA, storetest.Epoch().Truncate(24*time.Hour).AddDate(0, 0, -d), "google.com", evidenceRecords())
	}
	cookie := e.signIn(e.readA)
	p := e.send("GET", "/domains/"+e.domA.ID, cookie, nil)
	for _, want := range []string{
		"<strong>Twilio SendGrid</strong>", "DKIM d=sendgrid.net, 1 address",
		"<strong>alpha.example (own servers)</strong>", "DKIM d=alpha.example, 1 address",
		"<strong>Unidentified</strong>", "no verified DKIM, passing SPF or host name, 1 address",
		"DKIM passes for sendgrid.net but is not aligned",
		`href="/domains/` + e.domA.ID + `?senders=failing#senders"`,
		`href="/domains/` + e.domA.ID + `/sources?group=Twilio%20SendGrid"`,
		"What blocks it:", "What <code>p=reject</code> will stop: 98 failing messages",
		"DKIM d=sendgrid.net: 420 of 420 verified", "SPF em1.sendgrid.net: 420 of 420 passed",
		"no GeoIP database: see --geoip-city", "see --geoip-asn",
	} {
		if !strings.Contains(p.body, want) {
			t.Errorf("domain page lacks %q", want)
		}
	}
	blocking := p.body[strings.Index(p.body, "What blocks it:"):]
	blocking = blocking[:strings.Index(blocking, "</p>")]
	if !strings.Contains(blocking, "Twilio SendGrid") || strings.Contains(blocking, "Unidentified") || strings.Contains(blocking, "own servers") {
		t.Errorf("blocking: %s", blocking)
	}
	p = e.send("GET", "/domains/"+e.domA.ID+"?senders=failing", cookie, nil)
	if !strings.Contains(p.body, "<strong>Twilio SendGrid</strong>") || !strings.Contains(p.body, "<strong>Unidentified</strong>") ||
		strings.Contains(p.body, "<strong>alpha.example (own servers)</strong>") || !strings.Contains(p.body, "Failing only (2)") {
		t.Error("the failing-only filter shows a passing sender or hides a failing one")
	}

	base := "/domains/" + e.domA.ID + "/sources"
	for _, c := range []struct {
		query    string
		status   int
		has, not []string
	}{
		{"?group=" + url.QueryEscape("Twilio SendGrid"), 200, []string{"167.89.0.1", "1 IPs sending as alpha.example in Twilio SendGrid"}, []string{"192.0.2.10", "203.0.113.66"}},
		{"?group=nobody", 200, []string{"No mail from any source"}, []string{"167.89.0.1"}},
		{"?ip=203.0.113.66", 200, []string{"203.0.113.66", "Unidentified", "DKIM d=alpha.example: 0 of 98 verified", "SPF alpha.example: 0 of 98 passed"}, []string{"167.89.0.1"}},
		{"?ip=" + url.QueryEscape("::ffff:203.0.113.66"), 200, []string{"No mail from any source"}, []string{"167.89.0.1"}},
		{"?ip=not-an-ip", 400, []string{"Not an IP address"}, []string{"167.89.0.1"}},
	} {
		p := e.send("GET", base+c.query, cookie, nil)
		if p.status != c.status {
			t.Errorf("%s: %d, want %d", c.query, p.status, c.status)
		}
		for _, s := range c.has {
			if !strings.Contains(p.body, s) {
				t.Errorf("%s lacks %q", c.query, s)
			}
		}
		for _, s := range c.not {
			if strings.Contains(p.body, s) {
				t.Errorf("%s shows %q", c.query, s)
			}
		}
	}

	// With both databases configured, a blank says the database has no
	// answer, not where to get one.
	e2 := newEnvUI(t, egress.Policy{}, nil, func(c *web.Config) { c.GeoIPCity, c.GeoIPASN = true, true })
	mustReport(t, e2.db, e2.domA, storetest.Epoch().Truncate(24*time.Hour).AddDate(0, 0, -1), "google.com", evidenceRecords())
	p = e2.send("GET", "/domains/"+e2.domA.ID, e2.signIn(e2.readA), nil)
	if strings.Contains(p.body, "see --geoip-city") || !strings.Contains(p.body, "the GeoIP database has no answer for that address") {
		t.Error("with GeoIP databases, the note still asks for one")
	}
}

// TestPendingDomainRecords ensures a pending domain's page lists every
// record of the API's dns_records, the TLS-RPT one included, each with
// its copy button.
func TestPendingDomainRecords(t *testing.T) {
	e := newEnv(t)
	p := e.send("GET", "/domains/"+e.domA.ID, e.signIn(e.fullA), nil)
	if e.domA.Status != store.DomainPending {
		t.Fatalf("domain %s", e.domA.Status)
	}
	for i, want := range []string{"_dmarc.alpha.example", "alpha.example._report._dmarc.reports.test", "_smtp._tls.alpha.example"} {
		if !strings.Contains(p.body, "<code>"+want+"</code>") || !strings.Contains(p.body, fmt.Sprintf(`data-copy="rec-%d"`, i)) {
			t.Errorf("the pending page lacks record %d, %s, or its copy button", i, want)
		}
	}
	if !strings.Contains(p.body, `<code id="rec-2">v=TLSRPTv1; rua=mailto:`+e.domA.ReportingEmail+`</code>`) {
		t.Error("the TLS-RPT record's value is missing")
	}
}

// TestReportPageRecords ensures a report's page lists its records with
// the most messages first, each with its DKIM domains, selectors and
// results, its SPF domains, scopes and results, and its envelope-from.
func TestReportPageRecords(t *testing.T) {
	e := newEnv(t)
	rep := mustReport(t, e.db, e.domA, time.Date(2026, 11, 10, 0, 0, 0, 0, time.UTC), "google.com", evidenceRecords())
	p := e.send("GET", "/reports/"+rep.ID, e.signIn(e.readA), nil)
	for _, want := range []string{"d=sendgrid.net s=s1: <span class=\"res pass\">pass</span>", "em1.sendgrid.net (mfrom): <span class=\"res pass\">pass</span>",
		"d=alpha.example s=s1: <span class=\"res fail\">fail</span>", "alpha.example (mfrom): <span class=\"res softfail\">softfail</span>",
		"<td>alpha.example</td>", "no GeoIP database: see --geoip-city"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("report page lacks %q", want)
		}
	}
	a, b, c := strings.Index(p.body, "<code>192.0.2.10</code>"), strings.Index(p.body, "<code>167.89.0.1</code>"), strings.Index(p.body, "<code>203.0.113.66</code>")
	if a < 0 || b < 0 || c < 0 || !(a < b && b < c) {
		t.Errorf("records not by count (100, 30, 7): at %d, %d, %d", a, b, c)
	}
}

// TestReportPageRecordsDropped ensures a report whose records the record
// retention dropped says so on its page, keeps its figures, and lists no
// record.
func TestReportPageRecordsDropped(t *testing.T) {
	e := newEnv(t)
	rep := mustReport(t, e.db, e.domA, time.Date(2026, 11, 10, 0, 0, 0, 0, time.UTC), "google.com", evidenceRecords())
	cookie := e.signIn(e.readA)
	if p := e.send("GET", "/reports/"+rep.ID, cookie, nil); strings.Contains(p.body, "records-dropped") {
		t.Fatal("a report with its records says they were dropped")
	}
	if n, err := e.db.DropRecordsBefore(time.Date(2026, 11, 11, 0, 0, 0, 0, time.UTC), nil); err != nil || n != 1 {
		t.Fatalf("dropped %d, %v", n, err)
	}
	p := e.send("GET", "/reports/"+rep.ID, cookie, nil)
	if p.status != 200 || !strings.Contains(p.body, `class="warn records-dropped"`) {
		t.Fatalf("%d: the page does not say the records were dropped", p.status)
	}
	if strings.Contains(p.body, "<code>192.0.2.10</code>") || !strings.Contains(p.body, ">137<") {
		t.Error("after the drop the page should list no record and keep the 137 messages")
	}
}

// TestAlertLinks ensures an alert links to the report it comes from and
// to the source it names (the sources page filtered to that address).
func TestAlertLinks(t *testing.T) {
	e := newEnv(t)
	rep := mustReport(t, e.db, e.domA, time.Date(2026, 11, 10, 0, 0, 0, 0, time.UTC), "google.com", evidenceRecords())
	det, _ := json.Marshal(map[string]any{"source_ip": "203.0.113.66", "report": map[string]any{"report_id": rep.ID}})
	cur, err := e.db.FindDomainByID(e.domA.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.RecordDNSCheck(store.DNSCheck{DomainID: e.domA.ID, Seen: cur.LastDNSRecord, Record: cur.LastDNSRecord,
		Alert: &alert.Candidate{Type: alert.TypeNewFailingSource, Severity: alert.SeverityInfo, Title: "New source 203.0.113.66",
			Message: "sent failing mail", Details: json.RawMessage(det)}}); err != nil {
		t.Fatal(err)
	}
	cookie := e.signIn(e.readA)
	for _, path := range []string{"/alerts", "/domains/" + e.domA.ID} {
		p := e.send("GET", path, cookie, nil)
		if !strings.Contains(p.body, `<a href="/reports/`+rep.ID+`">The report</a>`) ||
			!strings.Contains(p.body, `<a href="/domains/`+e.domA.ID+`/sources?ip=203.0.113.66">The source 203.0.113.66</a>`) {
			t.Errorf("%s: the alert links neither its report nor its source", path)
		}
	}
	p := e.send("GET", "/domains/"+e.domA.ID+"/sources?ip=203.0.113.66", cookie, nil)
	if !strings.Contains(p.body, "Unidentified") {
		t.Error("the source link does not show who sends from it")
	}
}
