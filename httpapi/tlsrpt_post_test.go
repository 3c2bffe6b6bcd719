package httpapi

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/ingest"
	tlshttps "github.com/dmarcd/dmarcd/ingest/https"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// TestPostTLSReportRoute ensures POST /tlsrpt/<local part> is 404 without
// a TLS report handler, and with one (a real pipeline behind
// ingest/https) stores the report without an API key, for the domain of
// that reporting address only.
func TestPostTLSReportRoute(t *testing.T) {
	e := newEnv(t, 1000)
	d := storetest.MustDomain(t, e.db, e.orgA.ID, "example.com")
	local, _, _ := strings.Cut(d.ReportingEmail, "@")
	report, err := os.ReadFile("../dmarc/tlsrpt/testdata/google.json")
	if err != nil {
		t.Fatal(err)
	}
	r := e.do("POST", "/tlsrpt/"+local, "", string(report), "Content-Type", "application/tlsrpt+json")
	if r.status != 404 || r.errorCode(t) != "not_found" {
		t.Fatalf("without a handler: %d %s", r.status, r.body)
	}

	p, err := ingest.New(ingest.Config{Store: e.db})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	h, err := tlshttps.New(tlshttps.Config{Ingest: p.Ingest, Store: e.db, ReportingDomain: "reports.example.net"})
	if err != nil {
		t.Fatal(err)
	}
	e.api.cfg.TLSReports = h
	r = e.do("POST", "/tlsrpt/"+local, "", string(report), "Content-Type", "application/tlsrpt+json")
	if r.status != 201 {
		t.Fatalf("with a handler: %d %s", r.status, r.body)
	}
	l, err := e.db.ListTLSReports(e.orgA.ID, store.TLSFilter{DomainID: d.ID, Page: store.Page{Page: 1, Limit: 10}})
	if err != nil || len(l.Reports) != 1 {
		t.Fatalf("stored: %+v, %v", l, err)
	}
	if r := e.do("POST", "/tlsrpt/nobody", "", string(report)); r.status != 404 {
		t.Fatalf("unknown local part: %d %s", r.status, r.body)
	}
}

// TestCreateDomainTLSRecordHTTPS ensures dns_records add the HTTPS URI
// to the TLS-RPT record's rua when the public URL is https, and only then.
func TestCreateDomainTLSRecordHTTPS(t *testing.T) {
	for _, tt := range []struct{ public, suffix string }{
		{"https://dmarc.example.net", ",https://dmarc.example.net/tlsrpt/"},
		{"http://127.0.0.1:8080", ""},
	} {
		e := newEnv(t, 1000)
		e.withApp(func(c *app.Config) { c.PublicURL = tt.public })
		r := e.do("POST", "/api/v1/domains", e.keyA, map[string]string{"name": "new.example"})
		if r.status != 201 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		m := r.json(t)
		email := m["reporting_email"].(string)
		local := email[:len(email)-len("@reports.example.net")]
		recs := m["dns_records"].([]any)
		want := "v=TLSRPTv1; rua=mailto:" + email
		if tt.suffix != "" {
			want += tt.suffix + local
		}
		if got := recs[len(recs)-1].(map[string]any)["value"]; got != want {
			t.Errorf("public URL %s: record %q, want %q", tt.public, got, want)
		}
	}
}
