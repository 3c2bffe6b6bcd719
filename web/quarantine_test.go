package web_test

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/ingest/ingesttest"
	"github.com/dmarcd/dmarcd/internal/egress"
	"github.com/dmarcd/dmarcd/internal/reportgen"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// quarantineEnv is newEnv with a running ingest pipeline as the web
// application layer's quarantine retrier, as serve wires it.
func quarantineEnv(t *testing.T) (*env, *ingest.Pipeline) {
	t.Helper()
	var p *ingest.Pipeline
	e := newEnvWith(t, egress.Policy{}, func(c *app.Config) {
		p = startPipeline(t, c.Store, c.Now)
		c.Quarantine = p
	})
	return e, p
}

// startPipeline runs an ingest pipeline over db until the test ends, on
// the clock now (nil: the wall clock).
func startPipeline(t *testing.T, db *store.DB, now func() time.Time) *ingest.Pipeline {
	t.Helper()
	p, _ := ingesttest.Start(t, ingest.Config{Store: db, Now: now})
	return p
}

func quarantined(t *testing.T, p *ingest.Pipeline, raw []byte, d ingest.Arrival) string {
	t.Helper()
	res, err := p.Ingest(context.Background(), bytes.NewReader(raw), d)
	if err != nil || res.Quarantined == "" {
		t.Fatalf("ingest %s: %+v %v, want it quarantined", d.Name, res, err)
	}
	return res.Quarantined
}

// TestQuarantinePages covers the quarantine pages of a full key: the
// list with each entry's reason, one entry with its bytes, retry (still
// unusable: the entry stays with its new count; usable once the domain
// is registered: stored and removed), delete; hostile names escaped; a
// read key sees no tab and gets 403; another organization's entry and
// one of none are 404 for every method; a POST without the CSRF token
// changes nothing.
func TestQuarantinePages(t *testing.T) {
	e, p := quarantineEnv(t)
	hostileName := `<script>alert(1)</script> -> ` + e.domA.ReportingEmail
	junk := []byte("From: someone@junk.test\r\nSubject: hello <b>there</b>\r\n\r\nnot a report\r\n")
	idJunk := quarantined(t, p, junk, ingest.Arrival{Source: ingest.SourceSMTP, Recipient: e.domA.ReportingEmail, Name: hostileName})
	idB := quarantined(t, p, junk, ingest.Arrival{Source: ingest.SourceSMTP, Recipient: e.domB.ReportingEmail, Name: "x -> " + e.domB.ReportingEmail})
	idNone := quarantined(t, p, []byte("nothing"), ingest.Arrival{Source: ingest.SourceImport, Name: "stray.txt"})
	report := reportgen.Generate(5, 3, reportgen.Options{Domain: "later.example", Begin: e.clock.Now().AddDate(0, 0, -2)})
	idLater := quarantined(t, p, report, ingest.Arrival{Source: ingest.SourceImport, OrgID: e.orgA.ID, Name: "later.xml"})

	full := e.signIn(e.fullA)
	if p := e.send("GET", "/settings", full, nil); !strings.Contains(p.body, `href="/settings/quarantine"`) {
		t.Error("no Quarantine tab for a full key")
	}
	l := e.send("GET", "/settings/quarantine", full, nil)
	if l.status != 200 || !strings.Contains(l.body, idJunk) || !strings.Contains(l.body, idLater) || !strings.Contains(l.body, "later.xml") ||
		!strings.Contains(l.body, "no registered domain for later.example") || !strings.Contains(l.body, "no DMARC or TLS report in the input") {
		t.Fatalf("quarantine list: %d\n%s", l.status, between(l.body, "<main", "</main>"))
	}
	if strings.Contains(l.body, idB) || strings.Contains(l.body, idNone) || strings.Contains(l.body, "stray.txt") {
		t.Error("the list shows another organization's entry or one of none")
	}
	for _, body := range []string{l.body, e.send("GET", "/settings/quarantine/"+idJunk, full, nil).body} {
		if strings.Contains(body, "<script>alert") || strings.Contains(body, "<b>there") {
			t.Error("hostile text rendered as markup")
		}
	}
	en := e.send("GET", "/settings/quarantine/"+idJunk, full, nil)
	if en.status != 200 || !strings.Contains(en.body, "not a report") || !strings.Contains(en.body, `action="/settings/quarantine/`+idJunk+`/retry"`) ||
		!strings.Contains(en.body, `action="/settings/quarantine/`+idJunk+`/delete"`) || !strings.Contains(en.body, e.domA.Name) {
		t.Errorf("entry page: %d\n%s", en.status, between(en.body, "<main", "</main>"))
	}
	raw := e.send("GET", "/settings/quarantine/"+idJunk+"/raw", full, nil)
	if raw.status != 200 || raw.body != string(junk) || raw.header.Get("Content-Type") != "message/rfc822" ||
		!strings.Contains(raw.header.Get("Content-Disposition"), "attachment") {
		t.Errorf("raw: %d %q %v", raw.status, raw.body, raw.header)
	}

	// A read key: no tab, 403 for every quarantine route, nothing changes.
	read := e.signIn(e.readA)
	rtoken := e.csrf(read)
	if p := e.send("GET", "/settings", read, nil); strings.Contains(p.body, "/settings/quarantine") {
		t.Error("a read key sees the Quarantine tab")
	}
	for _, path := range []string{"/settings/quarantine", "/settings/quarantine/" + idJunk, "/settings/quarantine/" + idJunk + "/raw"} {
		if p := e.send("GET", path, read, nil); p.status != http.StatusForbidden || strings.Contains(p.body, "not a report") {
			t.Errorf("read key GET %s: %d", path, p.status)
		}
	}
	for _, action := range []string{"retry", "delete"} {
		if p := e.send("POST", "/settings/quarantine/"+idJunk+"/"+action, read, url.Values{"csrf_token": {rtoken}}); p.status != http.StatusForbidden {
			t.Errorf("read key POST %s: %d", action, p.status)
		}
	}

	// Another organization's entry, one of none, a malformed id: 404.
	token := e.csrf(full)
	for _, id := range []string{idB, idNone, "not-an-id"} {
		for _, path := range []string{"/settings/quarantine/" + id, "/settings/quarantine/" + id + "/raw"} {
			if p := e.send("GET", path, full, nil); p.status != http.StatusNotFound || strings.Contains(p.body, "not a report") {
				t.Errorf("GET %s: %d", path, p.status)
			}
		}
		for _, action := range []string{"retry", "delete"} {
			if p := e.send("POST", "/settings/quarantine/"+id+"/"+action, full, url.Values{"csrf_token": {token}}); p.status != http.StatusNotFound {
				t.Errorf("POST %s of %s: %d", action, id, p.status)
			}
		}
	}
	for _, id := range []string{idB, idNone} {
		if _, _, err := e.db.FindQuarantine(id); err != nil {
			t.Errorf("entry %s gone after another organization's requests: %v", id, err)
		}
	}
	// Without the CSRF token: 403, nothing deleted.
	if p := e.send("POST", "/settings/quarantine/"+idJunk+"/delete", full, url.Values{}); p.status != http.StatusForbidden {
		t.Errorf("delete without a token: %d", p.status)
	}

	// Retry of junk: still unusable, the entry stays, the page says so.
	r := e.send("POST", "/settings/quarantine/"+idJunk+"/retry", full, url.Values{"csrf_token": {token}})
	if r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/settings/quarantine/"+idJunk) {
		t.Fatalf("retry of junk: %d %q", r.status, r.header.Get("Location"))
	}
	if got := e.send("GET", r.header.Get("Location"), full, nil); !strings.Contains(got.body, "still holds no usable report") {
		t.Errorf("after a retry that found nothing: %s", alertText(got.body)+between(got.body, `class="ok"`, "</p>"))
	}
	if entry, _, err := e.db.FindQuarantine(idJunk); err != nil || entry.Retries != 1 {
		t.Errorf("junk after retry: %+v %v, want kept with 1 retry", entry, err)
	}

	// Register later.example, retry: stored, the entry goes.
	later := storetest.MustDomain(t, e.db, e.orgA.ID, "later.example")
	r = e.send("POST", "/settings/quarantine/"+idLater+"/retry", full, url.Values{"csrf_token": {token}})
	if r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/settings/quarantine?") {
		t.Fatalf("retry of later.xml: %d %q", r.status, r.header.Get("Location"))
	}
	if got := e.send("GET", r.header.Get("Location"), full, nil); !strings.Contains(got.body, "1 report stored") || strings.Contains(got.body, idLater) {
		t.Errorf("after a retry that stored: %s", between(got.body, `class="ok"`, "</p>"))
	}
	if _, total, _ := e.db.ListReports(e.orgA.ID, store.ReportFilter{DomainID: later.ID, Page: store.Page{Page: 1, Limit: 10}}); total != 1 {
		t.Errorf("%d reports of later.example after the retry, want 1", total)
	}
	if _, _, err := e.db.FindQuarantine(idLater); err == nil {
		t.Error("the stored entry is still in the quarantine")
	}

	// Delete.
	r = e.send("POST", "/settings/quarantine/"+idJunk+"/delete", full, url.Values{"csrf_token": {token}})
	if r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/settings/quarantine?") {
		t.Fatalf("delete: %d %q", r.status, r.header.Get("Location"))
	}
	if _, _, err := e.db.FindQuarantine(idJunk); err == nil {
		t.Error("deleted entry still there")
	}
	if got := e.send("GET", r.header.Get("Location"), full, nil); !strings.Contains(got.body, "deleted") || !strings.Contains(got.body, "The quarantine is empty") {
		t.Errorf("after delete: %s", between(got.body, "<main", "</main>"))
	}
}
