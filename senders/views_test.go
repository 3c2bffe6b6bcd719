package senders

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/internal/dnstest"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

var t0 = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

type viewEnv struct {
	db  *store.DB
	org *store.Organization
	dom *store.Domain
	v   *Views
	n   int
}

func newViewEnv(t testing.TB, lastRecord string) *viewEnv {
	t.Helper()
	db := storetest.Open(t)
	org := storetest.MustOrganization(t, db, "acme", store.PlanUnlimited)
	dom := storetest.MustDomain(t, db, org.ID, "example.com")
	if lastRecord != "" {
		var err error
		dom, err = db.UpdateDomain(org.ID, dom.ID, func(d *store.Domain) error { d.LastDNSRecord = lastRecord; return nil })
		if err != nil {
			t.Fatal(err)
		}
	}
	return &viewEnv{db: db, org: org, dom: dom, v: &Views{DB: db, Known: DefaultKnownSenders()}}
}

// rec is a record: count messages from ip, with DKIM and SPF aligned
// results and raw auth domains.
func rec(ip string, count int64, dkim, spf string, spfDomain, dkimDomain string) *store.Record {
	r := &store.Record{SourceIP: ip, Count: count, Disposition: "none", DKIM: store.Verdict(dkim), SPF: store.Verdict(spf)}
	if spfDomain != "" {
		r.AuthResults.SPF = []store.SPFAuth{{Domain: spfDomain, Result: "pass"}}
	}
	if dkimDomain != "" {
		r.AuthResults.DKIM = []store.DKIMAuth{{Domain: dkimDomain, Result: "pass"}}
	}
	return r
}

// days ingests the records once a day for n days from t0.
func (e *viewEnv) days(t testing.TB, n int, recs ...*store.Record) {
	t.Helper()
	for d := range n {
		e.n++
		ingestSources(t, e.db, e.dom, fmt.Sprint("r", e.n), t0.AddDate(0, 0, d), recs)
	}
}

func (e *viewEnv) name(t testing.TB, ip, host string) {
	t.Helper()
	if err := e.db.PutRDNS([]store.RDNSEntry{{IP: ip, Status: store.RDNSConfirmed, Hostname: host, CheckedAt: t0}}); err != nil {
		t.Fatal(err)
	}
}

func (e *viewEnv) to() time.Time { return t0.AddDate(0, 0, 29) }

func (e *viewEnv) groups(t *testing.T) map[string]*Group {
	t.Helper()
	gs, err := e.v.Senders(context.Background(), e.org.ID, e.dom.ID, t0, e.to())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*Group{}
	for _, g := range gs {
		out[g.Name] = g
	}
	return out
}

// TestSendersGrouping groups a known service (by its passing SPF
// domain), an unknown host (by base domain), a source without name (by
// AS), a forwarder, and an SPF-authorized IP, with hints naming what to
// change.
func TestSendersGrouping(t *testing.T) {
	srv := dnstest.Start(t)
	srv.AddTXT("example.com", "v=spf1 ip4:192.0.2.0/28 -all")
	e := newViewEnv(t, "")
	e.v.SPF = NewSPFCache(testResolver(t, srv), 0)
	e.name(t, "198.51.100.1", "mail1.mcsv.net")
	e.name(t, "198.51.100.2", "mail2.mcsv.net")
	e.name(t, "203.0.113.9", "relay.unknown-host.example.org")
	e.name(t, "203.0.113.50", "fwd.lists.example.net")
	asn, org := uint32(64496), "Spoof Net"
	spoof := rec("100.64.0.1", 40, "fail", "fail", "", "")
	spoof.Geo = &store.Geo{ASN: &asn, ASOrg: &org}
	e.days(t, 1,
		rec("198.51.100.1", 50, "fail", "fail", "mcsv.net", ""), // Mailchimp, SPF not aligned
		rec("198.51.100.2", 50, "fail", "fail", "mcsv.net", ""),
		rec("203.0.113.9", 10, "fail", "fail", "", ""),
		rec("203.0.113.50", 20, "pass", "fail", "lists.example.net", "example.com"), // forwarder
		rec("192.0.2.5", 30, "pass", "pass", "example.com", "example.com"),          // our own, in SPF
		spoof)
	g := e.groups(t)
	mc := g["Intuit Mailchimp"]
	if mc == nil || mc.Type != GroupService || mc.Category != CategoryAuthorized || mc.SourceIPs != 2 || mc.Messages != 100 || mc.Status != "failing" ||
		mc.Evidence != EvidenceSPF || mc.EvidenceText() != "SPF mcsv.net, 2 addresses" {
		t.Fatalf("mailchimp group %+v", mc)
	}
	if !strings.Contains(strings.Join(mc.Hints, " "), "SPF passes for mcsv.net but is not aligned") ||
		!strings.Contains(strings.Join(mc.Hints, " "), "_domainkey.example.com") {
		t.Errorf("mailchimp hints %q", mc.Hints)
	}
	if u := g["example.org"]; u == nil || u.Type != GroupDomain || u.Category != CategoryUnknown || len(u.Hints) == 0 {
		t.Errorf("unknown host group %+v", u)
	}
	if f := g["example.com forwarded via example.net"]; f == nil || f.Category != CategoryForwarder || f.Status != "passing" ||
		f.Type != GroupOwn || f.Evidence != EvidenceOwnDomain {
		t.Errorf("forwarder group %+v", f)
	}
	if a := g["AS64496 Spoof Net"]; a == nil || a.Type != GroupAS || a.Category != CategoryUnknown || !strings.Contains(a.Hints[0], "spoofing") {
		t.Errorf("AS group %+v", a)
	}
	if own := g["example.com (own servers)"]; own == nil || own.Category != CategoryAuthorized || own.Status != "passing" || len(own.Hints) != 0 {
		t.Errorf("SPF-authorized group without name %+v", own)
	}
	srcs, err := e.v.Sources(context.Background(), e.org.ID, e.dom.ID, t0, e.to(), "")
	if err != nil {
		t.Fatal(err)
	}
	if srcs[0].SourceIP != "198.51.100.1" && srcs[0].SourceIP != "198.51.100.2" || srcs[0].Sender == nil ||
		srcs[0].Sender.Name != "Intuit Mailchimp" || *srcs[0].BaseDomain != "mcsv.net" {
		t.Errorf("first source %+v", srcs[0])
	}
	for _, s := range srcs {
		if s.SourceIP == "203.0.113.9" && (s.Sender != nil || s.Hostname == nil) {
			t.Errorf("unknown host source %+v: sender must be null, hostname set", s)
		}
	}
	other := storetest.MustOrganization(t, e.db, "other", store.PlanUnlimited)
	if _, err := e.v.Senders(context.Background(), other.ID, e.dom.ID, t0, e.to()); err == nil {
		t.Error("another organization's domain answered")
	}
}

// TestStatusBands checks the edges: 95 % passing, 51 % partial, 50 %
// failing.
func TestStatusBands(t *testing.T) {
	e := newViewEnv(t, "")
	for i, c := range []struct {
		pass int64
		want string
	}{{95, "passing"}, {94, "partial"}, {51, "partial"}, {50, "failing"}} {
		ip := fmt.Sprintf("203.0.113.%d", i+1)
		e.name(t, ip, fmt.Sprintf("mx.band%d.example", i))
		e.days(t, 1, rec(ip, c.pass, "pass", "fail", "", "example.com"), rec(ip, 100-c.pass, "fail", "fail", "", ""))
	}
	g := e.groups(t)
	for i, want := range []string{"passing", "partial", "partial", "failing"} {
		name := fmt.Sprintf("example.com forwarded via band%d.example", i)
		if g[name] == nil || g[name].Status != want {
			t.Errorf("%s: %+v, want %s", name, g[name], want)
		}
	}
}

// TestAdviceStages walks every stage of the advice.
func TestAdviceStages(t *testing.T) {
	good := func(e *viewEnv, t *testing.T, n int) {
		e.name(t, "198.51.100.1", "o1.sendgrid.net")
		e.days(t, n, rec("198.51.100.1", 100, "pass", "pass", "example.com", "example.com"))
	}
	advise := func(t *testing.T, e *viewEnv) *Advice {
		t.Helper()
		a, err := e.v.PolicyAdvice(context.Background(), e.org.ID, e.dom.ID, t0, t0.AddDate(0, 0, 13))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	str := func(p *string) string {
		if p == nil {
			return "<nil>"
		}
		return *p
	}
	t.Run("no_record", func(t *testing.T) {
		e := newViewEnv(t, "(none)")
		good(e, t, 10)
		a := advise(t, e)
		if a.Stage != StageNoRecord || a.Published != nil || str(a.NextRecord) != e.dom.DMARCRecord {
			t.Errorf("%+v next %s, want the suggested %s", a, str(a.NextRecord), e.dom.DMARCRecord)
		}
	})
	t.Run("not_enough_data", func(t *testing.T) {
		e := newViewEnv(t, "v=DMARC1; p=none")
		good(e, t, 6)
		if a := advise(t, e); a.Stage != StageNotEnoughData || a.NextRecord != nil {
			t.Errorf("6 days: %+v", a)
		}
		e2 := newViewEnv(t, "v=DMARC1; p=none")
		e2.days(t, 10, rec("198.51.100.1", 9, "pass", "pass", "", ""))
		if a := advise(t, e2); a.Stage != StageNotEnoughData {
			t.Errorf("90 messages: %+v", a)
		}
	})
	t.Run("fix_senders", func(t *testing.T) {
		e := newViewEnv(t, "v=DMARC1; p=none")
		good(e, t, 10)
		e.name(t, "198.51.100.7", "mail.mcsv.net")
		e.days(t, 10, rec("198.51.100.7", 10, "fail", "fail", "mcsv.net", "")) // ~9 % of legitimate mail, failing
		a := advise(t, e)
		if a.Stage != StageFixSenders || len(a.BlockingSenders) != 1 || a.BlockingSenders[0].Name != "Intuit Mailchimp" || a.NextRecord != nil {
			t.Errorf("%+v", a)
		}
	})
	t.Run("spoofing_does_not_block", func(t *testing.T) {
		e := newViewEnv(t, "v=DMARC1; p=none; rua=mailto:d@reports.example.net; pct=50; adkim=s")
		good(e, t, 14)
		e.days(t, 14, rec("100.64.0.9", 5000, "fail", "fail", "spoof.example", ""))
		a := advise(t, e)
		if a.Stage != StageReadyForQuarantine || a.UnknownFailingMessages != 70000 || a.LegitimatePassRate != 1 {
			t.Fatalf("%+v", a)
		}
		if got, want := str(a.NextRecord), "v=DMARC1; p=quarantine; t=y; rua=mailto:d@reports.example.net; adkim=s"; got != want {
			t.Errorf("next %q, want %q (rua and adkim kept, pct dropped)", got, want)
		}
		if a.Published == nil || *a.Published.PCT != 50 || *a.Published.P != "none" || a.Published.T != nil || a.Published.SP != nil {
			t.Errorf("published %+v", a.Published)
		}
	})
	for _, c := range []struct{ published, stage, next string }{
		{"v=DMARC1; p=quarantine; t=y; rua=mailto:x@y.example", StageReadyForQuarantine, "v=DMARC1; p=quarantine; rua=mailto:x@y.example"},
		{"v=DMARC1; p=quarantine; pct=20; sp=none", StageReadyForQuarantine, "v=DMARC1; p=quarantine; sp=none"},
		{"v=DMARC1; p=quarantine; rua=mailto:x@y.example", StageReadyForReject, "v=DMARC1; p=reject; t=y; rua=mailto:x@y.example"},
		{"v=DMARC1; p=reject; t=y; rua=mailto:x@y.example", StageReadyForReject, "v=DMARC1; p=reject; rua=mailto:x@y.example"},
		{"v=DMARC1; p=reject; pct=100; rua=mailto:x@y.example", StageEnforced, "<nil>"},
		{"v=DMARC1; p=reject", StageEnforced, "<nil>"},
	} {
		t.Run(c.stage+" "+c.published, func(t *testing.T) {
			e := newViewEnv(t, c.published)
			good(e, t, 14)
			a := advise(t, e)
			if a.Stage != c.stage || str(a.NextRecord) != c.next {
				t.Errorf("stage %s next %q, want %s %q", a.Stage, str(a.NextRecord), c.stage, c.next)
			}
		})
	}
}

// TestKnownSenders checks base domains with the overrides and a sender
// map file that adds and replaces rows.
func TestKnownSenders(t *testing.T) {
	k := DefaultKnownSenders()
	for host, want := range map[string]string{
		"mail1.mcsv.net.":                     "mcsv.net",
		"a.b.example.co.uk":                   "example.co.uk",
		"ec2-1-2-3-4.compute-1.amazonaws.com": "amazonaws.com",
		"123-applefibernet.com":               "applefibernet.com",
		"host.tigobusiness.com.ni":            "tigobusiness.com.ni",
		"":                                    "",
	} {
		if got := k.BaseDomain(host); got != want {
			t.Errorf("BaseDomain(%q) = %q, want %q", host, got, want)
		}
	}
	if s, ok := k.Lookup("amazonses.com"); !ok || s.Name != "Amazon SES" || !s.IsService() {
		t.Errorf("amazonses.com: %+v %v", s, ok)
	}
	if s, _ := k.Lookup("1blu.de"); s.IsService() {
		t.Errorf("a web host counts as a service: %+v", s)
	}
	path := t.TempDir() + "/map.csv"
	writeFile(t, path, "base_reverse_dns,name,type\nmcsv.net,Our Mailchimp,Marketing\nmy-esp.example,My ESP,Marketing\n")
	k2, err := k.WithFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := k2.Lookup("mcsv.net"); s.Name != "Our Mailchimp" {
		t.Errorf("replaced row: %+v", s)
	}
	if _, ok := k2.Lookup("my-esp.example"); !ok || k2.Len() != k.Len()+1 {
		t.Errorf("added row missing or count %d vs %d", k2.Len(), k.Len())
	}
	if s, _ := k.Lookup("mcsv.net"); s.Name != "Intuit Mailchimp" {
		t.Errorf("the original map changed: %+v", s)
	}
	for _, bad := range []string{"mcsv.net,Only two\n", "base_reverse_dns,name,type\n,No base,SaaS\n", "a b.example,Name,SaaS\n"} {
		writeFile(t, path, bad)
		if _, err := k.WithFile(path); err == nil {
			t.Errorf("malformed map %q accepted", bad)
		}
	}
	if _, err := k.WithFile(t.TempDir() + "/missing.csv"); err == nil {
		t.Error("missing file accepted")
	}
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestDomainView checks that the combined view of the domain page equals
// the three views read one by one.
func TestDomainView(t *testing.T) {
	e := newViewEnv(t, "v=DMARC1; p=none; rua=mailto:a@example.net")
	e.days(t, 30, rec("192.0.2.1", 100, "pass", "pass", "example.com", "example.com"),
		rec("198.51.100.7", 5, "fail", "fail", "spoof.example", "spoof.example"))
	from := e.to().AddDate(0, 0, -29)
	ctx := context.Background()
	dv, err := e.v.Domain(ctx, e.org.ID, e.dom.ID, from, e.to())
	if err != nil {
		t.Fatal(err)
	}
	srcs, err1 := e.v.Sources(ctx, e.org.ID, e.dom.ID, from, e.to(), "")
	groups, err2 := e.v.Senders(ctx, e.org.ID, e.dom.ID, from, e.to())
	adv, err3 := e.v.PolicyAdvice(ctx, e.org.ID, e.dom.ID, from, e.to())
	if err := errors.Join(err1, err2, err3); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(jsonOf(t, dv.Sources), jsonOf(t, srcs)) || !reflect.DeepEqual(jsonOf(t, dv.Groups), jsonOf(t, groups)) ||
		!reflect.DeepEqual(jsonOf(t, dv.Advice), jsonOf(t, adv)) {
		t.Errorf("the combined view differs from the three views")
	}
	if dv.Advice.Stage != StageReadyForQuarantine || len(dv.Sources) != 2 {
		t.Errorf("stage %s, %d sources", dv.Advice.Stage, len(dv.Sources))
	}
	if _, err := e.v.Domain(ctx, "nobody", e.dom.ID, from, e.to()); err == nil {
		t.Error("another organization's domain is served")
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestHintsOfUnnamedSources ensures the hints of the Unidentified group
// speak of "these unidentified sources", in a sentence that reads.
func TestHintsOfUnnamedSources(t *testing.T) {
	th := DefaultThresholds
	g := &Group{Name: Unidentified, Type: GroupUnknown, Category: CategoryUnknown, DMARCPassRate: 0.2}
	h := hints("example.com", g, th)
	if len(h) != 1 || !strings.HasPrefix(h[0], "These unidentified sources are neither in the SPF record of example.com") {
		t.Errorf("unknown category: %q", h)
	}
	g.Category = CategoryAuthorized
	g.DKIMAlignedRate, g.SPFAlignedRate = 0, 1
	h = hints("example.com", g, th)
	if len(h) != 1 || !strings.Contains(h[0], "turn on DKIM signing at these unidentified sources") {
		t.Errorf("authorized, no DKIM: %q", h)
	}
}
