package digest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/digest"
	"github.com/dmarcd/dmarcd/senders"
	"github.com/dmarcd/dmarcd/store"
)

// TestSizeWorstCase renders a digest with every list full to its caps
// and every string as long as clean keeps it and all markup (each "<" is
// four bytes in HTML): it fits MaxBytes, saying what it left out.
func TestSizeWorstCase(t *testing.T) {
	long := strings.Repeat("<", 400)
	lim := digest.DefaultLimits
	d := &digest.Digest{Organization: long, Period: digest.Week, From: now, To: now, PrevFrom: now, PrevTo: now,
		Messages: 1e9, DMARCPass: 5e8, PrevMessages: 1e9, PrevDMARCPass: 4e8, OpenAlerts: 5000, MoreDomains: 950}
	for i := range lim.Domains {
		dom := &digest.Domain{ID: fmt.Sprint(i), Name: fmt.Sprintf("d%d.%s.example", i, strings.Repeat("x", 230)), Messages: 1e7, DMARCPass: 9e6,
			PassRate: 0.9, PrevMessages: 1e7, PrevDMARCPass: 8e6, PrevPassRate: 0.8, Stage: senders.StageFixSenders, OpenAlerts: 99,
			Reasons: []string{long, long, long}, NextRecord: long, TLSSessions: 1e6, TLSFailed: 1e5, TLSFailureRate: 0.1, MoreTLSResults: 7,
			MoreNewSenders: 50, MoreFailing: 50}
		for range lim.NewSenders {
			dom.NewSenders = append(dom.NewSenders, digest.Sender{Name: long, Messages: 1e6, DMARCPassRate: 0.5})
		}
		for range lim.Failing {
			dom.Failing = append(dom.Failing, digest.Failing{Name: long, Category: "unknown", Messages: 1e6, Failed: 5e5,
				Evidence: long, Hints: []string{long, long}, MoreHints: 3})
		}
		for range lim.TLS {
			dom.TLSResults = append(dom.TLSResults, digest.TLSResult{Type: long, Failed: 1e4})
		}
		d.Domains = append(d.Domains, dom)
		if i < lim.Detailed {
			d.Detailed = append(d.Detailed, dom)
		}
	}
	for range lim.Alerts {
		d.Alerts = append(d.Alerts, &digest.Alert{Severity: "critical", Title: long, Domain: "d1.example", CreatedAt: now})
	}
	m, err := digest.Render(d, digest.RenderOptions{PublicURL: "https://dmarc.example.net"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(m.Subject) + len(m.Text) + len(m.HTML); n > digest.MaxBytes {
		t.Fatalf("%d bytes, over %d", n, digest.MaxBytes)
	}
	if !strings.Contains(m.Text, "more domains with something to fix") {
		t.Errorf("the text part does not say what it left out")
	}
	if len(d.Detailed) != lim.Detailed {
		t.Errorf("Render changed the digest it was given")
	}
}

// TestSizeBigOrganization builds the digest of an organization of 120
// domains with mail from every kind of sender: it fits MaxBytes and
// lists the domains left out of its table.
func TestSizeBigOrganization(t *testing.T) {
	e := newTestEnv(t)
	day := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	for i := range 120 {
		name := fmt.Sprintf("brand%03d.example", i)
		if err := e.DB.CreateDomain(&store.Domain{OrgID: e.acme.ID, Name: name, ReportingEmail: fmt.Sprintf("b%d@reports.test", i), DMARCRecord: "v=DMARC1; p=none"}); err != nil {
			t.Fatal(err)
		}
		e.report(t, e.acme, name, day, 60)
	}
	d, err := (&digest.Builder{DB: e.DB}).Build(context.Background(), e.acme.ID, digest.Day, now)
	if err != nil {
		t.Fatal(err)
	}
	m, err := digest.Render(d, digest.RenderOptions{PublicURL: "https://dmarc.example.net"})
	if err != nil {
		t.Fatal(err)
	}
	n := len(m.Subject) + len(m.Text) + len(m.HTML)
	t.Logf("%d domains: text %d bytes, HTML %d bytes", 122, len(m.Text), len(m.HTML))
	if n > digest.MaxBytes {
		t.Fatalf("%d bytes, over %d", n, digest.MaxBytes)
	}
	if d.MoreDomains != 122-digest.DefaultLimits.Domains || !strings.Contains(m.Text, fmt.Sprintf("and %d more domains", d.MoreDomains)) {
		t.Errorf("%d domains left out of the table, the text says:\n%s", d.MoreDomains, m.Text)
	}
}
