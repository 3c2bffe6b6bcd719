package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/senders"
)

// TestVerifyForgetsThePublishedRecord ensures a verification makes the
// sender views forget the record they looked up for a domain without a
// DNS check: the advice of a pending domain was no_record a moment ago,
// the person published the record and verified, and the advice reads the
// record now rather than an answer kept for a minute. The domain's
// records are every one of dns_records, the TLS-RPT one included.
func TestVerifyForgetsThePublishedRecord(t *testing.T) {
	var views *senders.Views
	e := newEnv(t, func(c *app.Config) {
		views = &senders.Views{DB: c.Store, Known: senders.DefaultKnownSenders(), DMARC: c.DNS.(*dnscheck.Checker).Resolver}
		c.Published = views
	})
	if r := e.app.DMARCResolver(); r == nil {
		t.Fatal("no resolver from the DNS checker")
	}
	ctx := context.Background()
	from, to := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 14, 0, 0, 0, 0, time.UTC)
	a, err := views.PolicyAdvice(ctx, e.alpha.ID, e.domA.ID, from, to)
	if err != nil || a.Stage != senders.StageNoRecord {
		t.Fatalf("before: %v, %v", a, err)
	}
	e.dns.AddTXT("_dmarc.alpha.example", "v=DMARC1; p=none; rua=mailto:"+e.domA.ReportingEmail)
	if _, err := e.app.VerifyDomain(ctx, e.fullA, e.domA.ID); err != nil {
		t.Fatal(err)
	}
	if a, err = views.PolicyAdvice(ctx, e.alpha.ID, e.domA.ID, from, to); err != nil || a.Published == nil || *a.Published.P != "none" {
		t.Errorf("after the verification: %+v, %v", a, err)
	}
	recs := e.app.DomainRecords(e.domA)
	if len(recs) != 3 || recs[2].Name != "_smtp._tls.alpha.example" || !strings.HasPrefix(recs[2].Value, "v=TLSRPTv1; rua=mailto:"+e.domA.ReportingEmail) {
		t.Errorf("records %+v", recs)
	}
}
