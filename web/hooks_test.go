package web_test

import (
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/internal/egress"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// TestWebhooksPage creates a webhook (secret shown once), refuses bad URLs
// with the API's reasons, tests it against a real HTTPS receiver, edits,
// deactivates, activates and deletes it.
func TestWebhooksPage(t *testing.T) {
	var got atomic.Int32
	rcv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.Header.Get("X-Webhook-Signature") != "" {
			got.Add(1)
		}
	}))
	defer rcv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(rcv.Certificate())
	e := newEnvPolicy(t, egress.Policy{AllowPrivate: true, RootCAs: pool})
	e.clock.Set(time.Now().UTC().Truncate(time.Second)) // receivers check timestamps
	cookie := e.signIn(e.fullA)
	token := e.csrf(cookie)

	for _, bad := range []string{"http://example.com/x", "https://2130706433/", "not a url"} {
		p := e.send("POST", "/settings/webhooks", cookie, url.Values{"csrf_token": {token}, "name": {"ops"}, "url": {bad}})
		if p.status != http.StatusUnprocessableEntity || !strings.Contains(p.body, `role="alert"`) {
			t.Errorf("url %q: %d", bad, p.status)
		}
	}
	if hs, n, _ := e.db.ListWebhooks(e.orgA.ID, store.Page{Page: 1, Limit: 10}); n != 0 {
		t.Fatalf("refused forms stored %v", hs)
	}
	p := e.send("POST", "/settings/webhooks", cookie, url.Values{"csrf_token": {token}, "name": {"ops"}, "url": {rcv.URL + "/hook"}})
	if p.status != http.StatusCreated {
		t.Fatalf("create: %d %s", p.status, p.body)
	}
	secret := regexp.MustCompile(`whsec_[0-9a-f]{64}`).FindString(p.body)
	if secret == "" {
		t.Fatal("secret not shown")
	}
	if p := e.send("GET", "/settings/webhooks", cookie, nil); strings.Contains(p.body, secret) || !strings.Contains(p.body, rcv.URL) {
		t.Error("secret shown again, or the webhook not listed")
	}
	hooks, _, _ := e.db.ListWebhooks(e.orgA.ID, store.Page{Page: 1, Limit: 10})
	id := hooks[0].ID

	p = e.send("POST", "/settings/webhooks/"+id+"/test", cookie, url.Values{"csrf_token": {token}})
	if p.status != 200 || !strings.Contains(p.body, "Test delivered: HTTP 200") || got.Load() != 1 {
		t.Errorf("test: %d, %d deliveries", p.status, got.Load())
	}
	p = e.send("POST", "/settings/webhooks/"+id, cookie, url.Values{"csrf_token": {token}, "name": {"renamed"}, "url": {rcv.URL + "/other"}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("edit: %d %s", p.status, p.body)
	}
	p = e.send("POST", "/settings/webhooks/"+id, cookie, url.Values{"csrf_token": {token}, "name": {""}, "url": {"ftp://x"}})
	if p.status != http.StatusUnprocessableEntity {
		t.Errorf("bad edit: %d", p.status)
	}
	e.send("POST", "/settings/webhooks/"+id, cookie, url.Values{"csrf_token": {token}, "action": {"deactivate"}})
	if h, _ := e.db.FindWebhook(e.orgA.ID, id); h.IsActive || h.Name != "renamed" || !strings.HasSuffix(h.URL, "/other") {
		t.Errorf("after edit and deactivate: %+v", h)
	}
	e.send("POST", "/settings/webhooks/"+id, cookie, url.Values{"csrf_token": {token}, "action": {"activate"}})
	if h, _ := e.db.FindWebhook(e.orgA.ID, id); !h.IsActive {
		t.Error("not active again")
	}
	// A failing receiver: the result says why.
	rcv.Close()
	p = e.send("POST", "/settings/webhooks/"+id+"/test", cookie, url.Values{"csrf_token": {token}})
	if !strings.Contains(p.body, "Test failed") {
		t.Errorf("test of a closed receiver: %d", p.status)
	}
	if p := e.send("POST", "/settings/webhooks/"+id+"/delete", cookie, url.Values{"csrf_token": {token}}); p.status != http.StatusSeeOther {
		t.Errorf("delete: %d", p.status)
	}
	if _, err := e.db.FindWebhook(e.orgA.ID, id); err == nil {
		t.Error("webhook survived deletion")
	}
}

// TestPlanGates ensures a plan without webhooks or failure reports shows
// why instead of the pages' contents, and refuses the POSTs.
func TestPlanGates(t *testing.T) {
	e := newEnv(t)
	cookie := e.signIn(e.keyB) // starter plan
	token := e.csrf(cookie)
	if p := e.send("GET", "/forensic", cookie, nil); p.status != 403 || !strings.Contains(p.body, "Not in your plan") {
		t.Errorf("failure reports on starter: %d", p.status)
	}
	if p := e.send("GET", "/", cookie, nil); strings.Contains(p.body, `href="/forensic"`) {
		t.Error("starter plan shows the failure reports link")
	}
	if p := e.send("GET", "/settings/webhooks", cookie, nil); p.status != 200 || !strings.Contains(p.body, "business and unlimited") {
		t.Errorf("webhooks on starter: %d", p.status)
	}
	if p := e.send("POST", "/settings/webhooks", cookie, url.Values{"csrf_token": {token}, "name": {"x"}, "url": {"https://example.com"}}); p.status != 403 {
		t.Errorf("create on starter: %d", p.status)
	}
	ua := e.signIn(e.fullA)
	if p := e.send("GET", "/forensic", ua, nil); p.status != 200 || !strings.Contains(p.body, "No failure reports yet") {
		t.Errorf("failure reports on unlimited: %d", p.status)
	}
	if p := e.send("GET", "/forensic/"+store.NewID(), ua, nil); p.status != 404 {
		t.Errorf("unknown failure report: %d", p.status)
	}
}

// TestReportCSV ensures the UI's CSV is the API export's bytes and another
// organization's report is a 404.
func TestReportCSV(t *testing.T) {
	e := newEnv(t)
	rep := mustReport(t, e.db, e.domA, e.clock.Now().Add(-48*time.Hour), "google.com", goodRecords())
	other := mustReport(t, e.db, e.domB, e.clock.Now().Add(-48*time.Hour), "google.com", goodRecords())
	cookie := e.signIn(e.fullA)
	ui := e.send("GET", "/reports/"+rep.ID+"/csv", cookie, nil)
	api := e.send("GET", "/api/v1/reports/"+rep.ID+"/export/csv", "", nil, "X-API-Key", e.fullA)
	if ui.status != 200 || ui.body != api.body || !strings.HasPrefix(ui.body, "source_ip,count") ||
		ui.header.Get("Content-Type") != api.header.Get("Content-Type") {
		t.Errorf("UI CSV %d %q\nAPI CSV %q", ui.status, ui.body, api.body)
	}
	if p := e.send("GET", "/reports/"+other.ID+"/csv", cookie, nil); p.status != 404 {
		t.Errorf("B's CSV: %d", p.status)
	}
}

// TestVerify ensures Verify shows why it failed, changes nothing then, and
// activates the domain once the record is published.
func TestVerify(t *testing.T) {
	e := newEnv(t)
	cookie := e.signIn(e.fullA)
	token := e.csrf(cookie)
	path := "/domains/" + e.domA.ID + "/verify"
	p := e.send("POST", path, cookie, url.Values{"csrf_token": {token}})
	if p.status != http.StatusUnprocessableEntity || !strings.Contains(p.body, "Verification failed:") {
		t.Fatalf("verify without a record: %d", p.status)
	}
	if d, _ := e.db.FindDomain(e.orgA.ID, e.domA.ID); d.Status != store.DomainPending {
		t.Errorf("status %s after a failed verify", d.Status)
	}
	e.dns.SetTXT("_dmarc.alpha.example", []string{"v=DMARC1; p=none; rua=mailto:" + e.domA.ReportingEmail})
	p = e.send("POST", path, cookie, url.Values{"csrf_token": {token}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("verify: %d %s", p.status, p.body)
	}
	if d, _ := e.db.FindDomain(e.orgA.ID, e.domA.ID); d.Status != store.DomainActive {
		t.Errorf("status %s after verify", d.Status)
	}
	if p := e.send("GET", p.header.Get("Location"), cookie, nil); !strings.Contains(p.body, "Verified:") || strings.Contains(p.body, "Publish these DNS records") {
		t.Error("the verified domain's page")
	}
}

// mustFailure stores a failure report of d with hostile text everywhere.
func mustFailure(tb testing.TB, db *store.DB, d *store.Domain, arrival time.Time, text string) string {
	tb.Helper()
	r := &store.FailureReport{DomainID: d.ID, Domain: d.Name, OrgID: d.OrgID,
		ReceivedAt: arrival.Add(time.Minute), ArrivalDate: arrival, Reporter: sp(text), SourceIP: sp("198.51.100.9"),
		OriginalMailFrom: sp(text), OriginalRcptTo: sp("user@" + d.Name), Subject: sp(text), MessageID: sp(text),
		AuthFailure: []string{"dmarc"}, DeliveryResult: sp("reject"),
		AuthenticationResults: store.FailureAuthResults{DMARC: sp("fail")}}
	f, err := store.NewFailureDraft(&store.FailureReportDetail{FailureReport: r,
		Headers: []store.FailureHeader{{Name: text, Value: text}}})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := db.NewIngester().Commit(&store.IngestBatch{Failures: []*store.FailureDraft{f}}); err != nil || !f.Outcome().Stored {
		tb.Fatalf("storing a failure report: %v", err)
	}
	return f.Report().ID
}

// TestFailurePages lists and shows failure reports, hostile text escaped,
// and another organization's report is a 404.
func TestFailurePages(t *testing.T) {
	e := newEnv(t)
	h := strings.Join(hostile, " ")
	id := mustFailure(t, e.db, e.domA, e.clock.Now().Add(-time.Hour), h)
	if _, err := e.db.SetOrganizationPlan(e.orgB.ID, store.PlanBusiness); err != nil {
		t.Fatal(err)
	}
	other := mustFailure(t, e.db, e.domB, e.clock.Now().Add(-time.Hour), "b's report")
	cookie := e.signIn(e.fullA)
	for _, path := range []string{"/forensic", "/forensic/" + id} {
		p := e.send("GET", path, cookie, nil)
		if p.status != 200 || !strings.Contains(p.body, "198.51.100.9") || !strings.Contains(p.body, "&lt;script&gt;") {
			t.Errorf("GET %s: %d", path, p.status)
		}
		if strings.Contains(p.body, "<script>alert") || handlerAttr.MatchString(p.body) || strings.Contains(p.body, "b&#39;s report") {
			t.Errorf("GET %s renders hostile text or B's report", path)
		}
	}
	if p := e.send("GET", "/forensic/"+other, cookie, nil); p.status != 404 {
		t.Errorf("B's failure report: %d", p.status)
	}
	// A DKIM failure kind of RFC 6591 shows as reported beside its family.
	r := &store.FailureReport{DomainID: e.domA.ID, Domain: e.domA.Name, OrgID: e.domA.OrgID, ReceivedAt: e.clock.Now(),
		SourceIP: sp("192.0.2.77"), AuthFailure: []string{"dkim"}, AuthFailureReported: []string{"bodyhash"}}
	f, err := store.NewFailureDraft(&store.FailureReportDetail{FailureReport: r})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.NewIngester().Commit(&store.IngestBatch{Failures: []*store.FailureDraft{f}}); err != nil {
		t.Fatal(err)
	}
	if p := e.send("GET", "/forensic/"+f.Report().ID, cookie, nil); !strings.Contains(p.body, "(reported as bodyhash)") {
		t.Errorf("a bodyhash failure's page does not say it was reported as bodyhash")
	}
	if p := e.send("GET", "/forensic/"+id, cookie, nil); strings.Contains(p.body, "reported as") {
		t.Errorf("a dmarc failure's page says how it was reported")
	}
}

// TestReportFilters covers the reports list's filters and bad dates.
func TestReportFilters(t *testing.T) {
	e := newEnv(t)
	second := storetest.MustDomain(t, e.db, e.orgA.ID, "second.example")
	r1 := mustReport(t, e.db, e.domA, time.Date(2026, 11, 10, 0, 0, 0, 0, time.UTC), "google.com", goodRecords())
	r2 := mustReport(t, e.db, second, time.Date(2026, 11, 15, 0, 0, 0, 0, time.UTC), "yahoo.com", goodRecords())
	cookie := e.signIn(e.readA)
	for _, c := range []struct {
		query    string
		status   int
		has, not []string
	}{
		{"", 200, []string{r1.ID, r2.ID}, nil},
		{"?domain=" + second.ID, 200, []string{r2.ID}, []string{r1.ID}},
		{"?from=2026-11-12", 200, []string{r2.ID}, []string{r1.ID}},
		{"?to=2026-11-10", 200, []string{r1.ID}, []string{r2.ID}},
		{"?from=2026-11-16", 200, []string{"No reports match"}, []string{r1.ID, r2.ID}},
		{"?from=yesterday", 400, []string{"Dates are written"}, []string{r1.ID}},
		{"?domain=" + e.domB.ID, 404, nil, []string{r1.ID}},
		{"?page=x", 200, []string{r1.ID}, nil},
	} {
		p := e.send("GET", "/reports"+c.query, cookie, nil)
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
