package senders

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/internal/dnstest"
)

func testResolver(t testing.TB, srv *dnstest.Server) *dnscheck.Resolver {
	t.Helper()
	r, err := dnscheck.NewResolver(dnscheck.Config{Servers: []string{srv.Addr}, Timeout: 2 * time.Second, Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func compile(t *testing.T, srv *dnstest.Server, domain string) *SPFPolicy {
	t.Helper()
	p, err := CompileSPF(context.Background(), testResolver(t, srv), domain)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSPFCases checks the evaluator against cases written from RFC 7208,
// served by a real DNS server on loopback.
func TestSPFCases(t *testing.T) {
	srv := dnstest.Start(t)
	srv.AddTXT("example.com", "v=spf1 ip4:192.0.2.0/24 include:_spf.service.test a mx/30 -all")
	srv.AddTXT("example.com", "google-site-verification=abc") // not SPF: ignored
	srv.SetA("example.com", "198.51.100.10")
	srv.SetMX("example.com", "mx1.example.com", "mx2.example.com")
	srv.SetA("mx1.example.com", "203.0.113.5")
	srv.SetA("mx2.example.com", "2001:db8::25")
	srv.AddTXT("_spf.service.test", "v=spf1 ip6:2001:db8:aa::/48 ip4:198.18.0.0/15 ~all")
	// redirect: the whole answer comes from the target (section 6.1).
	srv.AddTXT("redir.test", "v=spf1 ip4:192.0.2.99 redirect=example.com")
	// redirect ignored when "all" is present.
	srv.AddTXT("redirall.test", "v=spf1 redirect=example.com ?all")
	srv.AddTXT("redirnone.test", "v=spf1 redirect=nothing.test")
	srv.AddTXT("incnone.test", "v=spf1 include:nothing.test -all")
	srv.AddTXT("two.test", "v=spf1 -all")
	srv.AddTXT("two.test", "v=spf1 +all")
	srv.AddTXT("badmech.test", "v=spf1 ip4:192.0.2.1 foo:bar -all")
	srv.AddTXT("badip.test", "v=spf1 ip4:192.0.2.300 -all")
	srv.AddTXT("badcidr.test", "v=spf1 ip4:192.0.2.0/33 -all")
	srv.AddTXT("unknownmod.test", "v=spf1 foo=bar ip4:192.0.2.1 -all")
	srv.AddTXT("tworedir.test", "v=spf1 redirect=a.test redirect=b.test")
	srv.AddTXT("case.test", "V=SPF1 IP4:192.0.2.1 -ALL")
	srv.AddTXT("neutral.test", "v=spf1 ip4:192.0.2.1")
	srv.AddTXT("softfail.test", "v=spf1 ~all")
	srv.AddTXT("qual.test", "v=spf1 -ip4:192.0.2.1 +all")
	srv.AddTXT("void.test", "v=spf1 a:n1.void.test a:n2.void.test a:n3.void.test ip4:192.0.2.1 -all")
	srv.AddTXT("ptr.test", "v=spf1 ptr -all")
	srv.AddTXT("macro.test", "v=spf1 exists:%{i}.bl.test -all")
	srv.AddTXT("temp.test", "v=spf1 ip4:192.0.2.1 include:broken.test -all")
	srv.SetRcode("broken.test", dns.RcodeServerFailure)
	srv.AddTXT("exists.test", "v=spf1 exists:there.test -all")
	srv.SetA("there.test", "127.0.0.2")
	// The lookup limit: 11 includes, each a lookup; an IP matched by the
	// first include still passes, the others get permerror.
	chain := "v=spf1"
	for i := range 11 {
		name := fmt.Sprintf("l%d.limit.test", i)
		chain += " include:" + name
		srv.AddTXT(name, fmt.Sprintf("v=spf1 ip4:10.0.0.%d", i))
	}
	srv.AddTXT("limit.test", chain+" -all")
	srv.AddTXT("loop.test", "v=spf1 include:loop.test -all")

	cases := []struct {
		domain, ip string
		want       SPFResult
	}{
		{"example.com", "192.0.2.7", SPFPass},
		{"example.com", "198.18.1.1", SPFPass},     // include
		{"example.com", "2001:db8:aa::1", SPFPass}, // include, ip6
		{"example.com", "198.51.100.10", SPFPass},  // a
		{"example.com", "203.0.113.6", SPFPass},    // mx/30
		{"example.com", "203.0.113.9", SPFFail},    // outside mx/30
		{"example.com", "2001:db8::25", SPFPass},   // mx, AAAA
		{"example.com", "192.0.3.1", SPFFail},      // include softfails: no match, then -all
		{"nothing.test", "192.0.2.1", SPFNone},
		{"redir.test", "192.0.2.99", SPFPass},
		{"redir.test", "192.0.2.7", SPFPass}, // from the target
		{"redir.test", "192.0.3.1", SPFFail}, // the target's -all
		{"redirall.test", "192.0.2.7", SPFNeutral},
		{"redirnone.test", "192.0.2.1", SPFPermError},
		{"incnone.test", "192.0.2.1", SPFPermError},
		{"two.test", "192.0.2.1", SPFPermError},
		{"badmech.test", "192.0.2.1", SPFPermError},
		{"badip.test", "192.0.2.1", SPFPermError},
		{"badcidr.test", "192.0.2.1", SPFPermError},
		{"unknownmod.test", "192.0.2.1", SPFPass},
		{"tworedir.test", "192.0.2.1", SPFPermError},
		{"case.test", "192.0.2.1", SPFPass},
		{"neutral.test", "192.0.2.2", SPFNeutral},
		{"softfail.test", "192.0.2.2", SPFSoftFail},
		{"qual.test", "192.0.2.1", SPFFail},
		{"qual.test", "192.0.2.2", SPFPass},
		{"void.test", "192.0.2.1", SPFPermError}, // third void lookup
		{"ptr.test", "192.0.2.1", SPFFail},       // ptr never matches here
		{"macro.test", "192.0.2.1", SPFFail},
		{"temp.test", "192.0.2.1", SPFPass}, // matched before the failing include
		{"temp.test", "192.0.2.2", SPFTempError},
		{"exists.test", "192.0.2.2", SPFPass},
		{"limit.test", "10.0.0.0", SPFPass},
		{"limit.test", "10.0.0.9", SPFPass},       // the 10th lookup
		{"limit.test", "10.0.0.10", SPFPermError}, // the 11th
		{"limit.test", "192.0.2.1", SPFPermError},
		{"loop.test", "192.0.2.1", SPFPermError},
	}
	policies := map[string]*SPFPolicy{}
	for _, c := range cases {
		p := policies[c.domain]
		if p == nil {
			p = compile(t, srv, c.domain)
			policies[c.domain] = p
		}
		if got := p.Check(netip.MustParseAddr(c.ip)); got != c.want {
			t.Errorf("%s from %s: %s, want %s (record %q, problem %q)", c.domain, c.ip, got, c.want, p.Record, p.Problem)
		}
	}
}

// TestSPFCache ensures a compiled policy is reused while fresh, and that a
// temporary failure is asked again soon, then succeeds.
func TestSPFCache(t *testing.T) {
	srv := dnstest.Start(t)
	srv.AddTXT("example.com", "v=spf1 ip4:192.0.2.0/24 -all")
	srv.SetRcode("example.com", dns.RcodeServerFailure)
	c := NewSPFCache(testResolver(t, srv), time.Hour)
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	c.now = func() time.Time { return now }
	ip := netip.MustParseAddr("192.0.2.1")
	p, err := c.Policy(context.Background(), "example.com")
	if err != nil || p.Check(ip) != SPFTempError {
		t.Fatalf("SERVFAIL: %v %v", p.Check(ip), err)
	}
	srv.SetRcode("example.com", dns.RcodeSuccess)
	if p, _ = c.Policy(context.Background(), "example.com"); p.Check(ip) != SPFTempError {
		t.Errorf("within the temporary failure's minute: %s, want the cached temperror", p.Check(ip))
	}
	now = now.Add(2 * time.Minute)
	if p, _ = c.Policy(context.Background(), "example.com"); p.Check(ip) != SPFPass {
		t.Errorf("after SERVFAIL cleared: %s", p.Check(ip))
	}
	q := srv.Queries("example.com")
	now = now.Add(30 * time.Minute)
	_, _ = c.Policy(context.Background(), "example.com")
	if srv.Queries("example.com") != q {
		t.Errorf("a fresh policy was asked again")
	}
}
