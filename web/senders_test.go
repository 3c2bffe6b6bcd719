package web_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/dmarc/tlsrpt"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// senderRecords is a month's day of mail: a known service passing, an
// unknown host failing.
func senderRecords(domain string) []*store.Record {
	mk := func(ip string, n int64, dkim, spf, disp string) *store.Record {
		return &store.Record{SourceIP: ip, Count: n, Disposition: disp, DKIM: store.Verdict(dkim), SPF: store.Verdict(spf), HeaderFrom: domain,
			Reasons: []store.Reason{}, AuthResults: store.AuthResults{
				DKIM: []store.DKIMAuth{{Domain: domain, Result: dkim}}, SPF: []store.SPFAuth{{Domain: domain, Result: spf}}}}
	}
	return []*store.Record{mk("192.0.2.10", 95, "pass", "pass", "none"), mk("203.0.113.5", 5, "fail", "fail", "quarantine")}
}

// mustTLS stores a TLS report of d whose text fields are text.
func mustTLS(tb testing.TB, db *store.DB, d *store.Domain, begin time.Time, text string) string {
	tb.Helper()
	rep := &tlsrpt.Report{OrganizationName: text, ContactInfo: text, ReportID: store.NewID(), DateBegin: begin,
		DateEnd: begin.Add(24*time.Hour - time.Second), Policies: []tlsrpt.Policy{{Type: "sts", Domain: d.Name,
			Strings: []string{"version: STSv1", text}, MXHosts: []string{text}, SuccessfulSessions: 900, FailedSessions: 12,
			Failures: []tlsrpt.FailureDetail{{ResultType: "certificate-expired", SendingMTAIP: "198.51.100.20",
				ReceivingMXHostname: text, ReceivingIP: "192.0.2.25", FailedSessions: 12, AdditionalInformation: text}}}}}
	id, _ := storetest.MustTLSReport(tb, db, d, rep, begin.Add(25*time.Hour))
	return id
}

// TestSendersOnDomainPage checks the who-sends table, the top sources
// with their host names, the enforcement card with the next record, the
// disposition chart, and the stage on the overview.
func TestSendersOnDomainPage(t *testing.T) {
	e := newEnv(t)
	if _, err := e.db.UpdateDomain(e.orgA.ID, e.domA.ID, func(d *store.Domain) error {
		d.LastDNSRecord = "v=DMARC1; p=none; rua=mailto:x@reports.test"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := e.db.PutRDNS([]store.RDNSEntry{{IP: "192.0.2.10", Status: store.RDNSConfirmed, Hostname: "mail-a.google.com",
		CheckedAt: e.clock.Now()}}); err != nil {
		t.Fatal(err)
	}
	for d := 1; d <= 20; d++ {
		mustReport(t, e.db, e.domA, storetest.Epoch().Truncate(24*time.Hour).AddDate(0, 0, -d), "google.com", senderRecords("alpha.example"))
	}
	cookie := e.signIn(e.readA)
	p := e.send("GET", "/domains/"+e.domA.ID, cookie, nil)
	for _, want := range []string{`id="senders"`, "Google", "mail-a.google.com", "203.0.113.5", "band passing", "band failing",
		"neither in the SPF record", `id="enforcement"`, "ready for quarantine", `id="next-record"`,
		"v=DMARC1; p=quarantine; t=y; rua=mailto:x@reports.test", `data-copy="next-record"`,
		"Disposition per day", `<rect class="quarantine"`, "95 none, 5 quarantine, 0 reject", "All 2 sources"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("domain page lacks %q", want)
		}
	}
	if p := e.send("GET", "/", cookie, nil); !strings.Contains(p.body, `class="stage ready_for_quarantine"`) {
		t.Error("the overview does not show the domain's stage")
	}
}

// TestSourcesPage covers the drill-down: rows, paging, dates, bad input,
// another organization's domain.
func TestSourcesPage(t *testing.T) {
	e := newEnv(t)
	var recs []*store.Record
	for i := range 60 {
		r := senderRecords("alpha.example")[0]
		r.SourceIP = "192.0.2." + string(rune('0'+i/10)) + string(rune('0'+i%10))
		r.Count = int64(100 + i)
		recs = append(recs, r)
	}
	mustReport(t, e.db, e.domA, time.Date(2026, 11, 10, 0, 0, 0, 0, time.UTC), "google.com", recs)
	cookie := e.signIn(e.readA)
	base := "/domains/" + e.domA.ID + "/sources"
	for _, c := range []struct {
		query    string
		status   int
		has, not []string
	}{
		{"", 200, []string{"60 IPs", "192.0.2.59", "page 1 of 2"}, []string{"192.0.2.09<"}},
		{"?page=2", 200, []string{"192.0.2.09", "page 2 of 2"}, []string{"192.0.2.59"}},
		{"?from=2026-11-11", 200, []string{"No mail from any source"}, []string{"192.0.2.59"}},
		{"?from=2026-11-10&to=2026-11-10", 200, []string{"192.0.2.59"}, nil},
		{"?from=x", 400, []string{"Dates are written"}, nil},
		{"?from=2026-11-10&to=2026-11-01", 400, []string{"before the start"}, nil},
		{"?from=2024-01-01&to=2026-11-01", 400, []string{"longer than 366"}, nil},
	} {
		p := e.send("GET", base+c.query, cookie, nil)
		if p.status != c.status {
			t.Errorf("%s: %d, want %d", c.query, p.status, c.status)
		}
		for _, s := range c.has {
			if !strings.Contains(p.body, s) {
				t.Errorf("%s lacks %s", c.query, s)
			}
		}
		for _, s := range c.not {
			if strings.Contains(p.body, s) {
				t.Errorf("%s shows %s", c.query, s)
			}
		}
	}
	if p := e.send("GET", "/domains/"+e.domB.ID+"/sources", cookie, nil); p.status != 404 {
		t.Errorf("another organization's sources: %d", p.status)
	}
}

// TestTLSPages covers the domain page's TLS section, the list with its
// filters, one report, and tenant isolation.
func TestTLSPages(t *testing.T) {
	e := newEnv(t)
	id := mustTLS(t, e.db, e.domA, storetest.Epoch().Truncate(24*time.Hour).AddDate(0, 0, -2), "mx1.alpha.example")
	other := mustTLS(t, e.db, e.domB, storetest.Epoch().Truncate(24*time.Hour).AddDate(0, 0, -2), "b-reporter")
	cookie := e.signIn(e.readA)
	p := e.send("GET", "/domains/"+e.domA.ID, cookie, nil)
	for _, want := range []string{`id="tls"`, "certificate-expired", "mx1.alpha.example", ">900<", "1.3 %", "12 failed"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("domain page's TLS section lacks %q", want)
		}
	}
	p = e.send("GET", "/tls-reports", cookie, nil)
	if p.status != 200 || !strings.Contains(p.body, "/tls-reports/"+id) || strings.Contains(p.body, other) {
		t.Errorf("TLS list: %d", p.status)
	}
	if p := e.send("GET", "/tls-reports?from=2026-11-25", cookie, nil); strings.Contains(p.body, id) {
		t.Error("the date filter keeps an older report")
	}
	if p := e.send("GET", "/tls-reports?to=bad", cookie, nil); p.status != 400 {
		t.Errorf("a bad date: %d", p.status)
	}
	if p := e.send("GET", "/tls-reports?domain="+e.domB.ID, cookie, nil); p.status != 404 {
		t.Errorf("another organization's domain filter: %d", p.status)
	}
	p = e.send("GET", "/tls-reports/"+id, cookie, nil)
	for _, want := range []string{"certificate-expired", "198.51.100.20", "192.0.2.25", "version: STSv1", "alpha.example"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("TLS report page lacks %q", want)
		}
	}
	if p := e.send("GET", "/tls-reports/"+other, cookie, nil); p.status != 404 {
		t.Errorf("another organization's TLS report: %d", p.status)
	}
	if p := e.send("GET", "/domains/"+e.domB.ID, e.signIn(e.keyB), nil); !strings.Contains(p.body, "b-reporter") && !strings.Contains(p.body, `id="tls"`) {
		t.Error("B's domain page lacks its TLS section")
	}
}

// TestFailureFilters covers the failure list's filters and their bad input.
func TestFailureFilters(t *testing.T) {
	e := newEnv(t)
	second := storetest.MustDomain(t, e.db, e.orgA.ID, "second.example")
	a := mustFailure(t, e.db, e.domA, time.Date(2026, 11, 10, 8, 0, 0, 0, time.UTC), "a")
	b := mustFailure(t, e.db, second, time.Date(2026, 11, 15, 8, 0, 0, 0, time.UTC), "b")
	cookie := e.signIn(e.readA)
	for _, c := range []struct {
		query    string
		status   int
		has, not []string
	}{
		{"", 200, []string{a, b}, nil},
		{"?domain=" + second.ID, 200, []string{b}, []string{a}},
		{"?from=2026-11-12", 200, []string{b}, []string{a}},
		{"?to=2026-11-10", 200, []string{a}, []string{b}},
		{"?source_ip=198.51.100.9", 200, []string{a, b}, nil},
		{"?source_ip=198.51.100.10", 200, []string{"match these filters"}, []string{a, b}},
		{"?source_ip=" + url.QueryEscape("::ffff:198.51.100.9"), 200, []string{a, b}, nil},
		{"?auth_failure=dmarc", 200, []string{a, b}, nil},
		{"?auth_failure=spf", 200, []string{"match these filters"}, []string{a, b}},
		{"?auth_failure=arc", 400, []string{"dmarc, spf or dkim"}, []string{a}},
		{"?source_ip=not-an-ip", 400, []string{"not an IP address"}, []string{a}},
		{"?from=soon", 400, []string{"Dates are written"}, []string{a}},
		{"?domain=" + e.domB.ID, 404, nil, []string{a}},
	} {
		p := e.send("GET", "/forensic"+c.query, cookie, nil)
		if p.status != c.status {
			t.Errorf("%s: %d, want %d", c.query, p.status, c.status)
		}
		for _, s := range c.has {
			if !strings.Contains(p.body, s) {
				t.Errorf("%s lacks %s", c.query, s)
			}
		}
		for _, s := range c.not {
			if strings.Contains(p.body, s) {
				t.Errorf("%s shows %s", c.query, s)
			}
		}
	}
}

// TestPublishedRecordCheck shows the live check-dmarc view, and the last
// DNS check's record, saying so, when DNS fails.
func TestPublishedRecordCheck(t *testing.T) {
	e := newEnv(t)
	cookie := e.signIn(e.fullA)
	if p := e.send("GET", "/domains/"+e.domA.ID, cookie, nil); !strings.Contains(p.body, "No DMARC record found") {
		t.Error("a domain without record: no warning")
	}
	// Published, then verified: the page shows it at once, not the
	// cached answer of before.
	e.dns.AddTXT("_dmarc.alpha.example", "v=DMARC1; p=quarantine; rua=mailto:x@reports.test")
	e.send("POST", "/domains/"+e.domA.ID+"/verify", cookie, url.Values{"csrf_token": {e.csrf(cookie)}})
	p := e.send("GET", "/domains/"+e.domA.ID, cookie, nil)
	for _, want := range []string{`id="published-record"`, "v=DMARC1; p=quarantine; rua=mailto:x@reports.test", "valid", "<code>p=quarantine</code>"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("live check lacks %q", want)
		}
	}
	// Another domain whose DNS fails: the record of the last check, said so.
	d := storetest.MustDomain(t, e.db, e.orgA.ID, "broken.example")
	if _, err := e.db.UpdateDomain(e.orgA.ID, d.ID, func(d *store.Domain) error {
		d.LastDNSRecord = "v=DMARC1; p=reject"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.dns.SetDrop("_dmarc.broken.example", true)
	p = e.send("GET", "/domains/"+d.ID, cookie, nil)
	for _, want := range []string{"did not answer in time", "last DNS check", "<code>reject</code>"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("fallback lacks %q", want)
		}
	}
}
