package senders

import (
	"context"
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/internal/dnstest"
	"github.com/dmarcd/dmarcd/store"
)

// auth is a record of count messages from ip with the DMARC-evaluated
// (aligned) results dkim and spf and the raw results given as
// "dkim:domain:result" and "spf:domain:result".
func auth(ip string, count int64, dkim, spf store.Verdict, results ...string) *store.Record {
	r := &store.Record{SourceIP: ip, Count: count, Disposition: "none", DKIM: dkim, SPF: spf, HeaderFrom: "example.com"}
	for _, s := range results {
		p := strings.SplitN(s, ":", 3)
		if p[0] == "dkim" {
			r.AuthResults.DKIM = append(r.AuthResults.DKIM, store.DKIMAuth{Domain: p[1], Result: p[2]})
		} else {
			r.AuthResults.SPF = append(r.AuthResults.SPF, store.SPFAuth{Domain: p[1], Result: p[2]})
		}
	}
	return r
}

// TestIdentityFromEvidence names each source from the evidence of its
// reports, through a real DNS server for reverse DNS: services by a
// verified DKIM signature (aligned or not: the hint says what to fix) or
// a passing SPF domain, the domain's own mail and forwarded mail, the AS,
// and Unidentified. Spoofed mail with a forged PTR naming a service, with
// a failing signature of that service, or with failing claims of the
// domain itself is never grouped with the service nor with the domain's
// own servers, and no group of it is authorized or blocks enforcement.
func TestIdentityFromEvidence(t *testing.T) {
	srv := dnstest.Start(t)
	// The forger's PTR names SendGrid; SendGrid's name does not resolve
	// back to it. Every other address has no PTR at all.
	srv.SetPTR(reverse(t, "203.0.113.66"), "o1.sendgrid.net")
	srv.SetA("o1.sendgrid.net", "167.89.0.1")
	e := newViewEnv(t, "v=DMARC1; p=none; rua=mailto:r@reports.example.net")
	telstra, asn := "Telstra Pty Ltd", uint32(1221)
	viaAS := auth("1.128.0.9", 20, "fail", "fail")
	viaAS.Geo = &store.Geo{ASN: &asn, ASOrg: &telstra}
	ownAS := auth("1.128.0.10", 60, "pass", "pass", "dkim:example.com:pass", "spf:example.com:pass")
	ownAS.Geo = &store.Geo{ASN: &asn, ASOrg: &telstra}
	e.days(t, 14,
		// SendGrid: one address signing for example.com and SendGrid, one
		// for SendGrid only (not aligned: DMARC fails).
		auth("167.89.0.1", 100, "pass", "fail", "dkim:example.com:pass", "dkim:sendgrid.net:pass", "spf:em1.sendgrid.net:pass"),
		auth("167.89.0.2", 30, "fail", "fail", "dkim:SendGrid.net:pass", "spf:sendgrid.net:softfail"),
		// Amazon SES by its passing MAIL FROM domain; its signature fails.
		auth("54.240.0.1", 40, "fail", "fail", "dkim:amazonses.com:fail", "spf:amazonses.com:pass"),
		// The domain's own servers, and mail forwarded on.
		auth("192.0.2.10", 200, "pass", "pass", "dkim:example.com:pass", "spf:example.com:pass"),
		auth("198.51.100.20", 15, "pass", "fail", "dkim:example.com:pass", "spf:lists.example.org:pass"),
		ownAS,
		// Spoofers: a forged PTR for SendGrid, a failing SendGrid
		// signature, failing claims of example.com.
		auth("203.0.113.66", 50, "fail", "fail", "spf:spoof.example:pass"),
		auth("203.0.113.67", 25, "fail", "fail", "dkim:sendgrid.net:fail", "spf:sendgrid.net:fail"),
		auth("203.0.113.68", 35, "fail", "fail", "dkim:example.com:fail", "spf:example.com:softfail"),
		viaAS)
	if n, err := NewRDNSJob(e.db, testResolver(t, srv), RDNSConfig{Rate: 1000}).RunOnce(context.Background()); err != nil || n != 10 {
		t.Fatalf("reverse DNS: %d lookups, %v", n, err)
	}
	g := e.groups(t)
	for name, want := range map[string]struct {
		typ, evidence, category, text string
		ips                           int
	}{
		"Twilio SendGrid":                        {GroupService, EvidenceDKIM, CategoryAuthorized, "DKIM d=sendgrid.net, 2 addresses", 2},
		"Amazon SES":                             {GroupService, EvidenceSPF, CategoryAuthorized, "SPF amazonses.com, 1 address", 1},
		"example.com (own servers)":              {GroupOwn, EvidenceOwnDomain, CategoryAuthorized, "DKIM d=example.com, 1 address", 1},
		"example.com (forwarded)":                {GroupOwn, EvidenceOwnDomain, CategoryForwarder, "DKIM d=example.com, 1 address", 1},
		"example.com via AS1221 Telstra Pty Ltd": {GroupOwn, EvidenceOwnDomain, CategoryAuthorized, "DKIM d=example.com, 1 address", 1},
		"AS1221 Telstra Pty Ltd":                 {GroupAS, EvidenceASN, CategoryUnknown, "AS1221 only, 1 address", 1},
		Unidentified:                             {GroupUnknown, EvidenceNone, CategoryUnknown, "no verified DKIM, passing SPF or host name, 3 addresses", 3},
	} {
		got := g[name]
		if got == nil {
			t.Errorf("no group %q", name)
			continue
		}
		if got.Type != want.typ || got.Evidence != want.evidence || got.Category != want.category || got.SourceIPs != want.ips || got.EvidenceText() != want.text {
			t.Errorf("%s: type %s, evidence %s, category %s, %d addresses, %q; want %+v", name, got.Type, got.Evidence, got.Category, got.SourceIPs, got.EvidenceText(), want)
		}
	}
	if len(g) != 7 {
		t.Errorf("%d groups, want 7: %v", len(g), g)
	}
	if h := strings.Join(g["Twilio SendGrid"].Hints, " "); !strings.Contains(h, "DKIM passes for sendgrid.net but is not aligned: have Twilio SendGrid sign with a key for example.com") {
		t.Errorf("SendGrid's hints say nothing of the alignment: %q", h)
	}

	srcs, err := e.v.Sources(context.Background(), e.org.ID, e.dom.ID, t0, e.to(), "")
	if err != nil {
		t.Fatal(err)
	}
	byIP := map[string]*Source{}
	for _, s := range srcs {
		byIP[s.SourceIP] = s
		if s.DKIMDomains == nil || s.SPFDomains == nil {
			t.Errorf("%s: null domain lists", s.SourceIP)
		}
	}
	for _, ip := range []string{"203.0.113.66", "203.0.113.67", "203.0.113.68"} {
		if s := byIP[ip]; s.Group != Unidentified || s.Sender != nil || s.category != CategoryUnknown {
			t.Errorf("spoofer %s in group %q (sender %v, %s)", ip, s.Group, s.Sender, s.category)
		}
	}
	if s := byIP["203.0.113.66"]; s.Hostname != nil {
		t.Errorf("the forged PTR counts as a name: %q", *s.Hostname)
	}
	sg := byIP["167.89.0.2"]
	if sg.Group != "Twilio SendGrid" || sg.Sender == nil || len(sg.DKIMDomains) != 1 ||
		sg.DKIMDomains[0] != (DomainCount{Domain: "sendgrid.net", Messages: 14 * 30, Pass: 14 * 30}) ||
		sg.SPFDomains[0] != (DomainCount{Domain: "sendgrid.net", Messages: 14 * 30, Pass: 0}) {
		t.Errorf("167.89.0.2: group %q, DKIM %+v, SPF %+v", sg.Group, sg.DKIMDomains, sg.SPFDomains)
	}
	one, err := e.v.Sources(context.Background(), e.org.ID, e.dom.ID, t0, e.to(), "Twilio SendGrid")
	if err != nil || len(one) != 2 || one[0].SourceIP != "167.89.0.1" || one[1].SourceIP != "167.89.0.2" {
		t.Errorf("?group=Twilio SendGrid: %d sources, %v", len(one), err)
	}
	if none, err := e.v.Sources(context.Background(), e.org.ID, e.dom.ID, t0, e.to(), "No such group"); err != nil || len(none) != 0 {
		t.Errorf("an unknown group lists %d sources, %v", len(none), err)
	}

	a, err := e.v.PolicyAdvice(context.Background(), e.org.ID, e.dom.ID, t0, t0.AddDate(0, 0, 13))
	if err != nil {
		t.Fatal(err)
	}
	if a.Stage != StageFixSenders || len(a.BlockingSenders) == 0 {
		t.Fatalf("advice %s with %d blocking senders, want fix_senders", a.Stage, len(a.BlockingSenders))
	}
	for _, b := range a.BlockingSenders {
		if b.Category != CategoryAuthorized || b.Type == GroupUnknown || b.Type == GroupAS {
			t.Errorf("%s (%s, %s) blocks enforcement", b.Name, b.Type, b.Category)
		}
	}
	if want := int64(14 * (50 + 25 + 35 + 20)); a.UnknownFailingMessages != want {
		t.Errorf("unknown failing %d, want %d", a.UnknownFailingMessages, want)
	}
}
