package browsertest

import (
	"fmt"
	"net/smtp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/dmarcd/dmarcd/internal/dnstest"
	"github.com/dmarcd/dmarcd/internal/reportgen"
)

// phoneOverflow lists what sticks out of the viewport's width or of its
// own scrolling box under sel, as "what right-edge" pairs; "" when all fits.
func (b *browser) phoneOverflow(sel string) string {
	b.t.Helper()
	return get(b, "overflow of "+sel, chromedp.Evaluate[string](`(() => {
		const out = [];
		document.querySelectorAll(`+"`"+sel+"`"+`).forEach(e => {
			const s = e.closest(".scroll");
			if (s && s.scrollWidth > s.clientWidth + 1) out.push("scrolls " + s.scrollWidth + ">" + s.clientWidth);
			const r = e.getBoundingClientRect();
			if (r.width > 0 && (r.right > innerWidth + 0.5 || r.left < -0.5)) out.push(e.tagName + "." + e.className + " " + Math.round(r.left) + ".." + Math.round(r.right));
		});
		return Array.from(new Set(out)).slice(0, 6).join("; ");
	})()`))
}

// smallChartText lists the chart labels drawn smaller than 11 CSS pixels
// (their font size times the SVG's scale on screen), and how many y-axis
// labels the page's charts have.
func (b *browser) smallChartText() (small string, axis int) {
	b.t.Helper()
	small = get(b, "chart text", chromedp.Evaluate[string](`Array.from(document.querySelectorAll("svg.chart text")).
		map(t => [t.textContent, parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a]).
		filter(x => x[1] < 11).map(x => x[0] + "=" + x[1].toFixed(1) + "px").slice(0, 6).join(" ")`))
	axis = get(b, "axis labels", chromedp.Evaluate[int](`document.querySelectorAll("svg.chart text.axis").length`))
	return small, axis
}

// dropNotices removes the page's notices, so that waiting for one after
// a form's POST waits for the page that answers it.
const dropNotices = `document.querySelectorAll("p.ok").forEach(e => e.remove())`

// TestBrowserIssue24 walks what issue 24 changed in the interface, at a
// phone's 390 px and on a desktop: a pending domain's DNS records and
// Copy buttons wrap on a phone; the reports list keeps Messages, Pass
// and Fail in view; chart labels are at least 11 px on screen and the
// charts have a y-axis; the quarantine page (list, an entry, Retry,
// Delete); the alerts page's bulk dismissal; the sources' failing-only
// filter.
func TestBrowserIssue24(t *testing.T) {
	if skipReason != "" {
		t.Skip(skipReason)
	}
	ns := dnstest.Start(t)
	s := startServer(t, "--dns-server", ns.Addr, "--dns-timeout", "300ms")
	b := newBrowser(t, s.url)
	b.run("sign in", chromedp.Navigate(s.url+"/"), visible(`#key`), sendKeys(`#key`, s.key), submit(`#key`), visible(`.tiles`))

	// A pending domain: its records, on a phone.
	b.run("add a domain", chromedp.Navigate(s.url+"/domains/new"), visible(`#name`),
		sendKeys(`#name`, "example.com"), submit(`#name`), visible(`table.records`))
	location := get(b, "location", chromedp.Location())
	domainID := location[strings.LastIndex(location, "/")+1:]
	_, dom := s.api(t, "GET", "/api/v1/domains/"+domainID, s.key)
	email, _ := dom["reporting_email"].(string)
	b.run("phone", chromedp.EmulateViewport(390, 844), chromedp.Navigate(location), visible(`table.records`))
	b.noHorizontalScroll("phone-domain-pending")
	if o := b.phoneOverflow("table.records code, table.records button.copy"); o != "" {
		t.Errorf("DNS records at 390 px do not wrap: %s", o)
	}
	if n := get(b, "copy buttons", chromedp.Evaluate[int](`document.querySelectorAll("table.records button.copy:not([hidden])").length`)); n < 2 {
		t.Errorf("%d Copy buttons shown, want one per record", n)
	}
	b.screenshot("phone-domain-pending")
	b.run("desktop", chromedp.EmulateViewport(1280, 900))

	// Verified, with reports by SMTP, and a mail that holds none.
	ns.SetTXT("_dmarc.example.com", []string{"v=DMARC1; p=none; rua=mailto:" + email})
	b.run("verify", chromedp.Navigate(location), click(`form[action$="/verify"] button`), visible(`p.ok`))
	now := time.Now().UTC()
	for i := range 6 {
		xml := reportgen.Generate(int64(i+1), 40, reportgen.Options{Domain: "example.com", OrgName: []string{"google.com", "yahoo.com"}[i%2],
			Begin: now.Truncate(24*time.Hour).AddDate(0, 0, -(i + 1))})
		if err := smtp.SendMail(s.smtp, nil, "noreply-dmarc@google.com", []string{email}, reportMail(email, xml)); err != nil {
			t.Fatalf("SMTP: %v", err)
		}
	}
	junk := fmt.Sprintf("From: someone@example.net\r\nTo: %s\r\nSubject: Question about DMARC\r\n\r\nHello, is this the right address?\r\n", email)
	if err := smtp.SendMail(s.smtp, nil, "someone@example.net", []string{email}, []byte(junk)); err != nil {
		t.Fatalf("SMTP: %v", err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, list := s.api(t, "GET", "/api/v1/reports?domain_id="+domainID, s.key)
		_, q := s.api(t, "GET", "/api/v1/quarantine", s.key)
		p, _ := list["pagination"].(map[string]any)
		qp, _ := q["pagination"].(map[string]any)
		if p != nil && p["total"] == 6.0 && qp != nil && qp["total"] == 1.0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reports and the quarantined mail not stored: %v %v\n%s", list["pagination"], q["pagination"], s.logText())
		}
	}

	// Charts: a y-axis, and labels of at least 11 px, on both widths.
	for _, width := range []int64{1280, 390} {
		b.run("viewport", chromedp.EmulateViewport(width, 844))
		for _, path := range []string{"/", "/domains/" + domainID} {
			b.run("charts", chromedp.Navigate(s.url+path), visible(`svg.chart`))
			if small, axis := b.smallChartText(); small != "" || axis < 2 {
				t.Errorf("%s at %d px: chart labels under 11 px: %q; %d y-axis labels", path, width, small, axis)
			}
		}
	}
	// TestBrowser takes the phone-overview, phone-domain and phone-reports
	// screenshots; this one shows a chart on a phone.
	b.run("phone domain", chromedp.Navigate(s.url+"/domains/"+domainID), visible(`svg.chart`))
	b.run("phone domain chart", eval(`document.querySelector("svg.chart").scrollIntoView()`))
	b.screenshot("phone-domain-chart")

	// The reports list on a phone: the counts stay in view.
	b.run("phone reports", chromedp.Navigate(s.url+"/reports"), visible(`table.reports`))
	b.noHorizontalScroll("phone-reports")
	if o := b.phoneOverflow(`table.reports tbody tr:first-child td[data-label]`); o != "" {
		t.Errorf("the reports list at 390 px hides its counts: %s", o)
	}
	// Each count is labelled on a phone, where the table's head is hidden.
	if got := get(b, "count labels", chromedp.Evaluate[string](`Array.from(document.querySelectorAll("table.reports tbody tr:first-child td[data-label]")).
		map(td => getComputedStyle(td, "::before").content).join(" ")`)); got != `"Messages" "Pass" "Fail"` {
		t.Errorf("a report row's counts on a phone are labelled %s", got)
	}
	b.run("phone quarantine", chromedp.Navigate(s.url+"/settings/quarantine"), visible(`table.quarantine`))
	b.noHorizontalScroll("phone-quarantine")
	b.screenshot("phone-quarantine")
	b.run("phone alerts", chromedp.Navigate(s.url+"/alerts"), visible(`ul.alerts`))
	b.noHorizontalScroll("phone-alerts")
	b.screenshot("phone-alerts")
	b.run("desktop", chromedp.EmulateViewport(1280, 900))

	// The quarantine: the tab, the list with the reason, the entry, Retry
	// (still nothing usable: it stays), Delete.
	b.run("quarantine", chromedp.Navigate(s.url+"/settings"), click(`a[href="/settings/quarantine"]`), visible(`table.quarantine`))
	if body := b.text("table.quarantine"); !strings.Contains(body, "no DMARC or TLS report in the input") || !strings.Contains(body, "someone@example.net") {
		t.Errorf("quarantine list: %s", body)
	}
	b.screenshot("quarantine")
	b.run("an entry", click(`table.quarantine a`), visible(`pre.raw`))
	if got := b.text("pre.raw"); !strings.Contains(got, "is this the right address?") {
		t.Errorf("the entry's bytes: %q", got)
	}
	b.screenshot("quarantine-entry")
	b.run("retry", click(`form[action$="/retry"] button`), visible(`p.ok`))
	if got := b.text("p.ok"); !strings.Contains(got, "still holds no usable report") {
		t.Errorf("after Retry: %q", got)
	}
	b.run("delete", eval(dropNotices), click(`details.confirm summary`), click(`form[action$="/delete"] button`), visible(`p.ok`))
	if got := b.body(); !strings.Contains(got, "The entry is deleted.") || !strings.Contains(got, "The quarantine is empty.") {
		t.Errorf("after Delete: %q", b.text("main"))
	}
	if _, q := s.api(t, "GET", "/api/v1/quarantine", s.key); q["pagination"].(map[string]any)["total"] != 0.0 {
		t.Errorf("the API still lists quarantine entries: %v", q["pagination"])
	}

	// Alerts: dismiss one selected, then all of the domain's.
	_, open := s.api(t, "GET", "/api/v1/alerts?status=pending", s.key)
	pending, _ := open["data"].([]any)
	if len(pending) < 2 {
		t.Fatalf("the reports raised %d alerts, want at least 2", len(pending))
	}
	b.run("alerts", chromedp.Navigate(s.url+"/alerts?domain="+domainID), visible(`form.bulk`))
	if !strings.Contains(b.body(), "not yet delivered") {
		t.Error("the alerts page does not say what pending means")
	}
	b.run("select one", click(`ul.alerts input[name=id]`))
	b.screenshot("alerts-selected")
	b.run("dismiss selected", click(`button[value=selected]`), visible(`p.ok`))
	if got := b.text("p.ok"); got != "Dismissed 1 alert." {
		t.Errorf("after dismissing one: %q", got)
	}
	b.run("dismiss all", eval(dropNotices), click(`form.bulk details summary`), click(`button[value=all]`), visible(`p.ok`))
	if got := b.text("p.ok"); got != fmt.Sprintf("Dismissed %d alerts.", len(pending)-1) && !(len(pending) == 2 && got == "Dismissed 1 alert.") {
		t.Errorf("after dismissing all: %q, want the other %d", got, len(pending)-1)
	}
	for _, st := range []string{"pending", "sent"} {
		if _, a := s.api(t, "GET", "/api/v1/alerts?status="+st+"&domain_id="+domainID, s.key); a["pagination"].(map[string]any)["total"] != 0.0 {
			t.Errorf("%s alerts left after dismissing all: %v", st, a["pagination"])
		}
	}

	// Sources: failing only.
	b.run("sources", chromedp.Navigate(s.url+"/domains/"+domainID+"/sources"), visible(`table.sources`),
		click(`input[name=failing]`), eval(`document.querySelector("h1").remove()`), submit(`input[name=failing]`), visible(`h1`))
	if h1 := b.text("h1"); !strings.Contains(h1, " of ") || !strings.Contains(h1, "with failing mail") {
		t.Errorf("failing only: %q", h1)
	}
	b.screenshot("sources-failing")

	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		t.Errorf("browser console: %s", p)
	}
	t.Logf("screenshots in %s", b.shots)
}
