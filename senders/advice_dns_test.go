package senders

import (
	"context"
	"errors"
	"testing"

	"github.com/miekg/dns"

	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/internal/dnstest"
	"github.com/dmarcd/dmarcd/store"
)

// TestAdvicePublishedByDNS ensures policy-advice reads the policy as DNS
// publishes it, never as reports saw it: a pending domain (no DNS check
// yet) is looked up through a real DNS server, and without a _dmarc
// record it is no_record with published null, although its imported
// reports say p=reject; once it publishes p=none with a rua (and a
// verification made the views forget the answer they kept), the next
// record keeps the rua (and every other tag). A DNS that cannot answer is
// an error that says so, and the domain page's combined view still has
// its senders.
func TestAdvicePublishedByDNS(t *testing.T) {
	srv := dnstest.Start(t)
	e := newViewEnv(t, "")
	if e.dom.Status != store.DomainPending || e.dom.LastDNSRecord != "" {
		t.Fatalf("domain %s, last DNS record %q: want a pending domain never checked", e.dom.Status, e.dom.LastDNSRecord)
	}
	e.v.DMARC = testResolver(t, srv)
	for d := range 14 {
		e.n++
		dr, err := e.db.NewReportDraft(store.Report{DomainID: e.dom.ID, Domain: e.dom.Name, OrgID: e.dom.OrgID,
			OrgName: "google.com", ExternalReportID: "imported-" + string(rune('a'+d)), DateBegin: t0.AddDate(0, 0, d),
			DateEnd: t0.AddDate(0, 0, d+1).Add(-1), ReceivedAt: t0.AddDate(0, 0, d+1),
			PolicyPublished: store.PolicyPublished{Domain: "example.com", P: "reject", PCT: 100, ADKIM: "r", ASPF: "r"}})
		if err != nil {
			t.Fatal(err)
		}
		dr.Add(auth("192.0.2.10", 100, "pass", "pass", "dkim:example.com:pass", "spf:example.com:pass"))
		dr.Finish()
		if _, err := e.db.NewIngester().Commit(&store.IngestBatch{Reports: []*store.ReportDraft{dr}}); err != nil {
			t.Fatal(err)
		}
	}
	advise := func() (*Advice, error) {
		return e.v.PolicyAdvice(context.Background(), e.org.ID, e.dom.ID, t0, t0.AddDate(0, 0, 13))
	}
	a, err := advise()
	if err != nil {
		t.Fatal(err)
	}
	if a.Stage != StageNoRecord || a.Published != nil || a.NextRecord == nil || *a.NextRecord != e.dom.DMARCRecord {
		t.Fatalf("no _dmarc record: stage %s, published %+v, next %v; want no_record, null, the suggested record", a.Stage, a.Published, a.NextRecord)
	}
	if jsonOf(t, a.Published) != "null" {
		t.Errorf("published %s", jsonOf(t, a.Published))
	}
	if srv.Queries("_dmarc.example.com") != 1 {
		t.Errorf("%d lookups of _dmarc.example.com, want 1", srv.Queries("_dmarc.example.com"))
	}

	// The record appears: the answer of a minute ago is kept, until a
	// verification (which reads DNS) makes the views forget it.
	srv.AddTXT("_dmarc.example.com", "v=DMARC1; p=none; rua=mailto:r@reports.example.net,mailto:dmarc@example.com; ruf=mailto:f@example.com; fo=1")
	if a, err = advise(); err != nil || a.Stage != StageNoRecord {
		t.Fatalf("within the minute: %v, %v", a, err)
	}
	e.v.ForgetPublished("example.com")
	if a, err = advise(); err != nil {
		t.Fatal(err)
	}
	want := "v=DMARC1; p=quarantine; t=y; rua=mailto:r@reports.example.net,mailto:dmarc@example.com; ruf=mailto:f@example.com; fo=1"
	if a.Stage != StageReadyForQuarantine || a.NextRecord == nil || *a.NextRecord != want || a.Published == nil || *a.Published.P != "none" {
		t.Fatalf("p=none published: stage %s, next %v, published %+v; want ready_for_quarantine, %q", a.Stage, a.NextRecord, a.Published, want)
	}
	// Within publishedTTL the answer comes from the cache.
	before := srv.Queries("_dmarc.example.com")
	if _, err := advise(); err != nil || srv.Queries("_dmarc.example.com") != before {
		t.Errorf("a second advice looked up again (%v)", err)
	}

	// A DNS that fails is an error, never a guess.
	srv.SetRcode("_dmarc.example.com", dns.RcodeServerFailure)
	e.v = &Views{DB: e.db, Known: e.v.Known, DMARC: e.v.DMARC}
	if _, err := advise(); !errors.Is(err, dnscheck.ErrTemporary) {
		t.Errorf("SERVFAIL: %v, want dnscheck.ErrTemporary", err)
	}
	dv, err := e.v.Domain(context.Background(), e.org.ID, e.dom.ID, t0, t0.AddDate(0, 0, 13))
	if err != nil || dv.Advice != nil || dv.AdviceError == "" || len(dv.Groups) != 1 {
		t.Errorf("domain view on SERVFAIL: %v, advice %+v, %q, %d groups", err, dv.Advice, dv.AdviceError, len(dv.Groups))
	}

	// A domain whose DNS check saw no record is no_record without a lookup.
	if _, err := e.db.UpdateDomain(e.org.ID, e.dom.ID, func(d *store.Domain) error { d.LastDNSRecord = noRecord; return nil }); err != nil {
		t.Fatal(err)
	}
	before = srv.Queries("_dmarc.example.com")
	if a, err = advise(); err != nil || a.Stage != StageNoRecord || srv.Queries("_dmarc.example.com") != before {
		t.Errorf("checked, no record: %v, stage %v, %d lookups", err, a, srv.Queries("_dmarc.example.com")-before)
	}
}
