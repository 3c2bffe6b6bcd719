package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/alert"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// TestSourcesPagingAndFailingFilter ensures the sources list, sorted by
// messages, pages with Previous/Next (not Newer/Older, which would say
// time), and that "failing only" keeps the sources with failing mail,
// across pages and with the other filters.
func TestSourcesPagingAndFailingFilter(t *testing.T) {
	e := newEnv(t)
	var recs []*store.Record
	for i := range 60 {
		r := senderRecords("alpha.example")[0]
		if i%20 == 7 { // 192.0.2.07, .27, .47 fail
			r = senderRecords("alpha.example")[1]
		}
		r.SourceIP = "192.0.2." + strconv.Itoa(i/10) + strconv.Itoa(i%10)
		r.Count = int64(100 + i)
		recs = append(recs, r)
	}
	mustReport(t, e.db, e.domA, time.Date(2026, 11, 10, 0, 0, 0, 0, time.UTC), "google.com", recs)
	cookie := e.signIn(e.readA)
	base := "/domains/" + e.domA.ID + "/sources"
	p := e.send("GET", base, cookie, nil)
	if p.status != 200 || !strings.Contains(p.body, "Next ›") || strings.Contains(p.body, "Older") || strings.Contains(p.body, "Newer") {
		t.Errorf("page 1 of sources by messages: %d, pager %q", p.status, between(p.body, `<nav class="pager"`, "</nav>"))
	}
	p = e.send("GET", base+"?page=2", cookie, nil)
	if !strings.Contains(p.body, "‹ Previous") || strings.Contains(p.body, "Newer") {
		t.Errorf("page 2: pager %q", between(p.body, `<nav class="pager"`, "</nav>"))
	}
	if !strings.Contains(p.body, `name="failing"`) {
		t.Error("no failing-only filter on the sources page")
	}
	p = e.send("GET", base+"?failing=1", cookie, nil)
	for _, ip := range []string{"192.0.2.07<", "192.0.2.27<", "192.0.2.47<"} {
		if !strings.Contains(p.body, ip) {
			t.Errorf("failing only lacks %s", ip)
		}
	}
	for _, ip := range []string{"192.0.2.59<", "192.0.2.08<"} {
		if strings.Contains(p.body, ip) {
			t.Errorf("failing only shows %s, which passes", ip)
		}
	}
	if !strings.Contains(p.body, "3 of 60 IPs") || strings.Contains(p.body, "page 1 of") || !strings.Contains(p.body, `name="failing" value="1" checked`) {
		t.Errorf("failing only: %q", between(p.body, "<h1>", "</h1>"))
	}
	// The filter stays on across the date filter's form and the pages.
	p = e.send("GET", base+"?failing=1&from=2026-11-11", cookie, nil)
	if p.status != 200 || strings.Contains(p.body, "192.0.2.07<") {
		t.Errorf("failing only and a later date: %d", p.status)
	}
}

// TestOverviewPagerWords ensures the overview's pager says Newer/Older
// for its domains newest first, and Previous/Next once sorted by name.
func TestOverviewPagerWords(t *testing.T) {
	e := newEnv(t)
	for i := range 55 {
		storetest.MustDomain(t, e.db, e.orgA.ID, "d"+strconv.Itoa(i)+".example")
	}
	cookie := e.signIn(e.readA)
	if p := e.send("GET", "/", cookie, nil); !strings.Contains(p.body, "Older ›") {
		t.Errorf("newest first: pager %q", between(p.body, `<nav class="pager"`, "</nav>"))
	}
	if p := e.send("GET", "/?sort=name", cookie, nil); !strings.Contains(p.body, "Next ›") || strings.Contains(p.body, "Older") {
		t.Errorf("by name: pager %q", between(p.body, `<nav class="pager"`, "</nav>"))
	}
}

// mustAlertOf raises an alert of severity sev on d (a DNS change check).
func mustAlertOf(tb testing.TB, db *store.DB, d *store.Domain, sev, title string) *store.Alert {
	tb.Helper()
	cur, err := db.FindDomainByID(d.ID)
	if err != nil {
		tb.Fatal(err)
	}
	a, err := db.RecordDNSCheck(store.DNSCheck{DomainID: d.ID, Seen: cur.LastDNSRecord, Record: cur.LastDNSRecord,
		Alert: &alert.Candidate{Type: alert.TypeDNSRecordChanged, Severity: sev, Title: title, Message: title + " happened",
			Details: json.RawMessage(`{}`)}})
	if err != nil || a == nil {
		tb.Fatalf("raising %s: %v %v", title, a, err)
	}
	return a
}

// TestAlertsFiltersAndBulkDismiss covers the alerts page's domain filter,
// "pending" said as not yet delivered, dismissing the selected alerts and
// all alerts of a filter (post/redirect/get with the count), and that
// none of it reaches another organization's alerts or a read-only key.
func TestAlertsFiltersAndBulkDismiss(t *testing.T) {
	e := newEnv(t)
	domA2 := storetest.MustDomain(t, e.db, e.orgA.ID, "second.example")
	a1 := mustAlertOf(t, e.db, e.domA, alert.SeverityWarning, "A1 alpha warning")
	a2 := mustAlertOf(t, e.db, e.domA, alert.SeverityCritical, "A2 alpha critical")
	a3 := mustAlertOf(t, e.db, domA2, alert.SeverityWarning, "A3 second warning")
	a4 := mustAlertOf(t, e.db, domA2, alert.SeverityWarning, "A4 second warning")
	b1 := mustAlertOf(t, e.db, e.domB, alert.SeverityWarning, "B1 beta warning")
	status := func(a *store.Alert, org string) string {
		got := storetest.Alert(t, e.db, org, a.ID)
		if got == nil {
			t.Fatalf("no alert %s", a.ID)
		}
		return got.Status
	}

	cookie := e.signIn(e.fullA)
	p := e.send("GET", "/alerts", cookie, nil)
	if p.status != 200 || !strings.Contains(p.body, "not yet delivered") || !strings.Contains(p.body, `<option value="`+domA2.ID+`"`) {
		t.Errorf("alerts page: %d; no 'not yet delivered' or no domain filter", p.status)
	}
	p = e.send("GET", "/alerts?domain="+domA2.ID, cookie, nil)
	if !strings.Contains(p.body, "A3 second") || strings.Contains(p.body, "A1 alpha") {
		t.Errorf("domain filter: %d", p.status)
	}
	if p := e.send("GET", "/alerts?domain="+e.domB.ID, cookie, nil); p.status != http.StatusNotFound || strings.Contains(p.body, "B1 beta") {
		t.Errorf("another organization's domain as filter: %d", p.status)
	}
	if !strings.Contains(p.body, `name="id" value="`+a3.ID+`"`) {
		t.Error("no checkbox to select an alert")
	}

	token := e.csrf(cookie)
	// Selected: a1 and B's alert (ignored), by a full key.
	p = e.send("POST", "/alerts", cookie, url.Values{"csrf_token": {token}, "dismiss": {"selected"}, "id": {a1.ID, b1.ID}})
	if p.status != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/alerts?") || !strings.Contains(p.header.Get("Location"), "dismissed=1") {
		t.Fatalf("dismiss selected: %d %q", p.status, p.header.Get("Location"))
	}
	if status(a1, e.orgA.ID) != store.AlertDismissed || status(a2, e.orgA.ID) == store.AlertDismissed || status(b1, e.orgB.ID) == store.AlertDismissed {
		t.Errorf("after dismissing a1 (and B's): a1 %s, a2 %s, b1 %s", status(a1, e.orgA.ID), status(a2, e.orgA.ID), status(b1, e.orgB.ID))
	}
	if p := e.send("GET", p.header.Get("Location"), cookie, nil); !strings.Contains(p.body, "Dismissed 1 alert.") {
		t.Errorf("no notice after dismissing: %q", alertText(p.body))
	}
	// All of a filter: the warnings of second.example.
	p = e.send("POST", "/alerts", cookie, url.Values{"csrf_token": {token}, "dismiss": {"all"}, "domain": {domA2.ID}, "severity": {"warning"}})
	if p.status != http.StatusSeeOther || !strings.Contains(p.header.Get("Location"), "dismissed=2") || !strings.Contains(p.header.Get("Location"), "domain="+domA2.ID) {
		t.Fatalf("dismiss all of a filter: %d %q", p.status, p.header.Get("Location"))
	}
	if status(a3, e.orgA.ID) != store.AlertDismissed || status(a4, e.orgA.ID) != store.AlertDismissed || status(a2, e.orgA.ID) == store.AlertDismissed {
		t.Errorf("after dismissing the filter: a3 %s, a4 %s, a2 %s", status(a3, e.orgA.ID), status(a4, e.orgA.ID), status(a2, e.orgA.ID))
	}
	// A filter naming another organization's domain changes nothing.
	if p := e.send("POST", "/alerts", cookie, url.Values{"csrf_token": {token}, "dismiss": {"all"}, "domain": {e.domB.ID}}); p.status != http.StatusNotFound {
		t.Errorf("dismiss all of B's domain: %d", p.status)
	}
	if status(b1, e.orgB.ID) == store.AlertDismissed {
		t.Error("B's alert dismissed by A")
	}
	// Without the CSRF token, or with a read key: 403, nothing changes.
	if p := e.send("POST", "/alerts", cookie, url.Values{"dismiss": {"all"}}); p.status != http.StatusForbidden {
		t.Errorf("without a token: %d", p.status)
	}
	read := e.signIn(e.readA)
	if p := e.send("GET", "/alerts", read, nil); strings.Contains(p.body, `name="id"`) || strings.Contains(p.body, `action="/alerts"`+` method="post"`) || strings.Contains(p.body, "Dismiss") {
		t.Error("a read-only key sees dismiss controls")
	}
	if p := e.send("POST", "/alerts", read, url.Values{"csrf_token": {e.csrf(read)}, "dismiss": {"all"}}); p.status != http.StatusForbidden {
		t.Errorf("read key: %d", p.status)
	}
	if status(a2, e.orgA.ID) == store.AlertDismissed {
		t.Error("a2 dismissed by a refused POST")
	}
	// All of no filter: everything open left (a2).
	p = e.send("POST", "/alerts", cookie, url.Values{"csrf_token": {token}, "dismiss": {"all"}})
	if p.status != http.StatusSeeOther || !strings.Contains(p.header.Get("Location"), "dismissed=1") || status(a2, e.orgA.ID) != store.AlertDismissed {
		t.Errorf("dismiss all: %d %q, a2 %s", p.status, p.header.Get("Location"), status(a2, e.orgA.ID))
	}
}

// TestUnnamedReporter ensures a report whose reporter gave no name is
// listed with a link that can be seen and clicked, and its page's title
// has no gap.
func TestUnnamedReporter(t *testing.T) {
	e := newEnv(t)
	rep := mustReport(t, e.db, e.domA, storetest.Epoch().Add(-48*time.Hour), "", goodRecords())
	cookie := e.signIn(e.readA)
	if p := e.send("GET", "/reports", cookie, nil); !strings.Contains(p.body, `<a href="/reports/`+rep.ID+`">(unnamed reporter)</a>`) {
		t.Errorf("reports list: %s", between(p.body, "<tbody>", "</tbody>"))
	}
	p := e.send("GET", "/reports/"+rep.ID, cookie, nil)
	if title := between(p.body, "<title>", "</title>"); strings.Contains(title, "  ") || !strings.Contains(title, "unnamed reporter") {
		t.Errorf("report page title %q", title)
	}
	if h1 := between(p.body, "<h1>", "</h1>"); strings.HasSuffix(h1, "from ") || !strings.Contains(h1, "unnamed reporter") {
		t.Errorf("report page heading %q", h1)
	}
}
