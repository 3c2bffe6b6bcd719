package cli

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/geo"
	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/ingest/ingesttest"
	"github.com/dmarcd/dmarcd/internal/dnstest"
	"github.com/dmarcd/dmarcd/senders"
	"github.com/dmarcd/dmarcd/store"
)

// TestDemoSendersByEvidence loads the demo's generated reports through the
// ingest pipeline with the MaxMind test databases, resolves reverse DNS
// against a real DNS server that has no PTR records (as many senders'
// addresses have none), and checks who sends: SendGrid, Amazon SES and
// Mailchimp are named by the DKIM and SPF domains of their reports
// (Mailchimp's signature is not aligned, and its hint says what to fix),
// the spoofers' addresses are never a service's nor the domain's own, and
// no Unidentified, AS or host group is authorized or blocks enforcement.
func TestDemoSendersByEvidence(t *testing.T) {
	g, err := geo.Open(geo.Config{CityPath: "../testdata/geo/GeoIP2-City-Test.mmdb", ASNPath: "../testdata/geo/GeoLite2-ASN-Test.mmdb"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	env := ingesttest.NewWith(t, func(c *ingest.Config) { c.Geo = g })
	db, p := env.DB, env.Pipeline
	if _, err := db.CreateOrganization(demoOrg, store.PlanUnlimited); err != nil {
		t.Fatal(err)
	}
	sum, err := loadDemoReports(context.Background(), db, p.Ingest, "reports.test")
	if err != nil || sum.Reports == 0 {
		t.Fatalf("demo: %+v, %v", sum, err)
	}
	srv := dnstest.Start(t) // no records: every PTR query is NXDOMAIN
	res, err := dnscheck.NewResolver(dnscheck.Config{Servers: []string{srv.Addr}, Timeout: 2 * time.Second, Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := senders.NewRDNSJob(db, res, senders.RDNSConfig{Rate: 100000}).RunOnce(context.Background()); err != nil || n < 500 {
		t.Fatalf("reverse DNS: %d lookups, %v", n, err)
	}
	// The demo domain publishes p=none with its reporting address.
	dom, err := db.FindDomainByID(sum.DomainID)
	if err != nil {
		t.Fatal(err)
	}
	srv.AddTXT("_dmarc."+demoDomain, dom.DMARCRecord)
	v := &senders.Views{DB: db, Known: senders.DefaultKnownSenders(), DMARC: res}
	to := time.Now()
	from := to.AddDate(0, 0, -29)
	dv, err := v.Domain(context.Background(), dom.OrgID, dom.ID, from, to)
	if err != nil || dv.Advice == nil {
		t.Fatalf("domain view: %v (%s)", err, dv.AdviceError)
	}
	byName := map[string]*senders.Group{}
	for _, gr := range dv.Groups {
		t.Logf("group %s [%s %s %s] %d addresses %d messages %.2f: %s", gr.Name, gr.Type, gr.Category, gr.Evidence, gr.SourceIPs, gr.Messages, gr.DMARCPassRate, gr.EvidenceText())
		byName[gr.Name] = gr
		switch gr.Type {
		case senders.GroupUnknown, senders.GroupAS, senders.GroupDomain:
			if gr.Category != senders.CategoryUnknown {
				t.Errorf("%s (%s) is %s", gr.Name, gr.Type, gr.Category)
			}
		}
		if gr.Name == "unknown" || gr.Evidence == "" || len(gr.EvidenceDetails) == 0 {
			t.Errorf("group %q, evidence %q %v", gr.Name, gr.Evidence, gr.EvidenceDetails)
		}
	}
	for _, name := range []string{"Twilio SendGrid", "Amazon SES", "Intuit Mailchimp"} {
		gr := byName[name]
		if gr == nil {
			t.Errorf("no group %s among %d", name, len(dv.Groups))
			continue
		}
		if gr.Type != senders.GroupService || gr.Category != senders.CategoryAuthorized ||
			gr.Evidence != senders.EvidenceDKIM && gr.Evidence != senders.EvidenceSPF {
			t.Errorf("%s: %s, %s, evidence %s", name, gr.Type, gr.Category, gr.Evidence)
		}
		t.Logf("%s: %d addresses, %d messages, %.0f %% pass: %s", name, gr.SourceIPs, gr.Messages, 100*gr.DMARCPassRate, gr.EvidenceText())
	}
	if mc := byName["Intuit Mailchimp"]; mc != nil && !strings.Contains(strings.Join(mc.Hints, " "), "DKIM passes for mcsv.net but is not aligned") {
		t.Errorf("Mailchimp's hints %q", mc.Hints)
	}
	if own := byName[demoDomain+" (own servers)"]; own == nil || own.Category != senders.CategoryAuthorized {
		t.Errorf("no authorized group of the domain's own servers: %+v", own)
	}
	spoofer := func(ip string) bool {
		for _, p := range []string{"185.220.", "45.155.", "103.77.", "2a0e:fd87:a::"} {
			if strings.HasPrefix(ip, p) {
				return true
			}
		}
		return false
	}
	spoofers := 0
	for _, s := range dv.Sources {
		if !spoofer(s.SourceIP) {
			continue
		}
		spoofers++
		gr := byName[s.Group]
		if gr == nil || gr.Type == senders.GroupService || gr.Type == senders.GroupOwn || s.Sender != nil {
			t.Errorf("spoofer %s in group %q", s.SourceIP, s.Group)
		}
	}
	if spoofers < 50 {
		t.Errorf("%d spoofing addresses in the demo", spoofers)
	}
	a := dv.Advice
	if a.Published == nil || *a.Published.P != "none" || len(a.BlockingSenders) == 0 {
		t.Fatalf("advice %s, published %+v, %d blocking", a.Stage, a.Published, len(a.BlockingSenders))
	}
	var blocking []string
	for _, b := range a.BlockingSenders {
		blocking = append(blocking, b.Name)
		if b.Category != senders.CategoryAuthorized || b.Type == senders.GroupUnknown || b.Type == senders.GroupAS || b.Type == senders.GroupDomain {
			t.Errorf("%s (%s, %s) blocks enforcement", b.Name, b.Type, b.Category)
		}
	}
	if !slices.Contains(blocking, "Intuit Mailchimp") {
		t.Errorf("blocking %v, want Mailchimp among them", blocking)
	}
	t.Logf("stage %s, blocking %v; %d unknown failing messages", a.Stage, blocking, a.UnknownFailingMessages)
}
