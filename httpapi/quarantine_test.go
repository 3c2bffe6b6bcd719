package httpapi

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/internal/reportgen"
	"github.com/dmarcd/dmarcd/store"
)

// withPipeline runs an ingest pipeline over e's store, serving retries.
func (e *env) withPipeline(t *testing.T) *ingest.Pipeline {
	t.Helper()
	p, err := ingest.New(ingest.Config{Store: e.db, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	e.withApp(func(c *app.Config) { c.Quarantine = p })
	return p
}

func mustIngest(t *testing.T, p *ingest.Pipeline, raw []byte, d ingest.Arrival) *ingest.Result {
	t.Helper()
	res, err := p.Ingest(context.Background(), bytes.NewReader(raw), d)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestQuarantineAPI ensures an organization sees, reads, retries and
// deletes its own quarantine entries, and that another organization's
// entries and those of no organization are not found (404), whatever the
// method; a read key may look but not change.
func TestQuarantineAPI(t *testing.T) {
	e := newEnv(t, 1000)
	p := e.withPipeline(t)
	domA := e.createDomain(e.keyA, "alpha.example")
	domB := e.createDomain(e.keyB, "beta.example")
	addrA, addrB := domA["reporting_email"].(string), domB["reporting_email"].(string)
	junk := []byte("From: someone@junk.test\r\nSubject: hello\r\n\r\nnot a report\r\n")

	a := mustIngest(t, p, junk, ingest.Arrival{Source: ingest.SourceSMTP, Recipient: addrA, Name: "someone@junk.test -> " + addrA})
	b := mustIngest(t, p, junk, ingest.Arrival{Source: ingest.SourceSMTP, Recipient: addrB, Name: "someone@junk.test -> " + addrB})
	none := mustIngest(t, p, []byte("nothing"), ingest.Arrival{Source: ingest.SourceImport, Name: "stray.txt"})
	report := reportgen.Generate(5, 3, reportgen.Options{Domain: "later.example", Begin: e.clock.Now().AddDate(0, 0, -2)})
	later := mustIngest(t, p, report, ingest.Arrival{Source: ingest.SourceImport, OrgID: e.orgA.ID, Name: "later.xml"})
	for _, r := range []*ingest.Result{a, b, none, later} {
		if r.Quarantined == "" {
			t.Fatalf("not quarantined: %+v", r)
		}
	}

	r := e.do("GET", "/api/v1/quarantine", e.readA, nil)
	body := r.json(t)
	data, _ := body["data"].([]any)
	if r.status != 200 || len(data) != 2 || body["pagination"].(map[string]any)["total"].(float64) != 2 {
		t.Fatalf("list of A: %d %s", r.status, r.body)
	}
	r = e.do("GET", "/api/v1/quarantine/"+a.Quarantined, e.readA, nil)
	got := r.json(t)
	if r.status != 200 || got["mail_from"] != "someone@junk.test" || got["recipient"] != addrA || got["domain_id"] != domA["id"] ||
		got["source"] != "smtp" || got["truncated"] != false || got["size"].(float64) != float64(len(junk)) || got["reason"] == "" {
		t.Errorf("entry of A: %d %s", r.status, r.body)
	}
	r = e.do("GET", "/api/v1/quarantine/"+a.Quarantined+"/raw", e.readA, nil)
	if r.status != 200 || !bytes.Equal(r.body, junk) || r.header.Get("Content-Type") != "message/rfc822" {
		t.Errorf("raw of A: %d %q %s", r.status, r.body, r.header.Get("Content-Type"))
	}

	// Another organization's entry, one of none, or a malformed id: 404.
	for _, id := range []string{b.Quarantined, none.Quarantined, "not-an-id"} {
		for _, c := range []struct{ method, path, key string }{
			{"GET", "/api/v1/quarantine/" + id, e.keyA},
			{"GET", "/api/v1/quarantine/" + id + "/raw", e.keyA},
			{"POST", "/api/v1/quarantine/" + id + "/retry", e.keyA},
			{"DELETE", "/api/v1/quarantine/" + id, e.keyA},
		} {
			if r := e.do(c.method, c.path, c.key, nil); r.status != http.StatusNotFound || r.errorCode(t) != "not_found" {
				t.Errorf("%s %s: %d %s, want 404", c.method, c.path, r.status, r.body)
			}
		}
	}
	if _, _, err := e.db.FindQuarantine(b.Quarantined); err != nil {
		t.Errorf("B's entry after A's attempts: %v", err)
	}
	if r := e.do("GET", "/api/v1/quarantine", e.keyB, nil); len(r.json(t)["data"].([]any)) != 1 {
		t.Errorf("list of B: %s", r.body)
	}

	// A read key may not retry or delete.
	for _, c := range [][2]string{{"POST", "/retry"}, {"DELETE", ""}} {
		if r := e.do(c[0], "/api/v1/quarantine/"+a.Quarantined+c[1], e.readA, nil); r.status != http.StatusForbidden {
			t.Errorf("%s with a read key: %d", c[0], r.status)
		}
	}

	// Retry: junk stays; a report whose domain is now registered is stored.
	r = e.do("POST", "/api/v1/quarantine/"+a.Quarantined+"/retry", e.keyA, nil)
	if got := r.json(t); r.status != 200 || got["quarantined"] != a.Quarantined {
		t.Errorf("retry of junk: %d %s", r.status, r.body)
	}
	e.createDomain(e.keyA, "later.example")
	r = e.do("POST", "/api/v1/quarantine/"+later.Quarantined+"/retry", e.keyA, nil)
	if got := r.json(t); r.status != 200 || got["quarantined"] != "" || len(got["reports"].([]any)) != 1 {
		t.Errorf("retry of a report: %d %s", r.status, r.body)
	}
	if _, _, err := e.db.FindQuarantine(later.Quarantined); err == nil {
		t.Error("entry kept after its report was stored")
	}

	if r := e.do("DELETE", "/api/v1/quarantine/"+a.Quarantined, e.keyA, nil); r.status != http.StatusNoContent {
		t.Errorf("delete: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/api/v1/quarantine/"+a.Quarantined, e.keyA, nil); r.status != http.StatusNotFound {
		t.Errorf("after delete: %d", r.status)
	}
	if _, total, _ := e.db.ListQuarantine(store.Page{Page: 1, Limit: 10}); total != 2 {
		t.Errorf("%d entries left, want B's and the stray one", total)
	}
}
