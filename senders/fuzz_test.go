package senders

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/dnscheck"
)

// The parsers of this package read records that anyone publishing DNS
// controls. Seeds: testdata/fuzz/FuzzParseDMARCTags and
// testdata/fuzz/FuzzCompileSPF (go test's corpus format), plus the ones
// added here.

// FuzzParseDMARCTags checks that any text parses without panicking, and
// that what it accepts turns into next records that parse back with the
// policy asked for, t=y exactly when ramping, no pct, and every other tag
// kept in its order.
func FuzzParseDMARCTags(f *testing.F) {
	for _, s := range []string{
		"v=DMARC1; p=none; rua=mailto:d@example.com",
		"v=DMARC1;p=quarantine;pct=50;sp=none;t=y",
		"V=dmarc1; P=Reject; PCT=100",
		"v=DMARC1; p=none; rua=mailto:a@x.test,mailto:b@y.test; ruf=mailto:f@x.test; fo=1:d; adkim=s; aspf=r; ri=3600",
		"v=DMARC2; p=none", "p=none; v=DMARC1", "", ";;;", "v=DMARC1; =x; p", "v=DMARC1; p=none; v=DMARC1; pct=abc",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, record string) {
		p := ParseDMARCTags(record)
		if p == nil {
			return
		}
		if len(p.tags) == 0 || p.tags[0][0] != "v" {
			t.Fatalf("accepted %q without v first: %q", record, p.tags)
		}
		_ = p.testing()
		var others []string
		for _, kv := range p.tags {
			switch kv[0] {
			case "v", "p", "t", "pct":
				continue
			}
			others = append(others, kv[0]+"="+kv[1])
		}
		for _, policy := range []string{"quarantine", "reject"} {
			for _, ramp := range []bool{false, true} {
				next := p.next(policy, ramp)
				q := ParseDMARCTags(next)
				if q == nil {
					t.Fatalf("next record of %q does not parse: %q", record, next)
				}
				if q.P == nil || *q.P != policy || (q.T != nil) != ramp || (ramp && *q.T != "y") || q.PCT != nil {
					t.Fatalf("next(%s, %v) of %q = %q", policy, ramp, record, next)
				}
				var kept []string
				for _, kv := range q.tags[1:] {
					if kv[0] != "p" && kv[0] != "t" {
						kept = append(kept, kv[0]+"="+kv[1])
					}
				}
				if strings.Join(kept, ";") != strings.Join(others, ";") {
					t.Fatalf("next(%s, %v) of %q = %q: kept %q, want %q", policy, ramp, record, next, kept, others)
				}
			}
		}
	})
}

// mapDNS answers SPF's DNS questions from maps, for fuzzing: a record that
// refers to itself or others meets them here without a network.
type mapDNS struct {
	txt   map[string][]string
	addrs map[string][]netip.Addr
	mx    map[string][]string
}

func notFound(name string) error { return &dnsErr{name} }

type dnsErr struct{ name string }

func (e *dnsErr) Error() string { return e.name + ": not found" }
func (e *dnsErr) Unwrap() error { return dnscheck.ErrNotFound }

func (m *mapDNS) LookupTXT(_ context.Context, name string) ([]string, error) {
	if v, ok := m.txt[strings.ToLower(name)]; ok {
		return v, nil
	}
	return nil, notFound(name)
}

func (m *mapDNS) LookupAddrs(_ context.Context, host string) ([]netip.Addr, error) {
	if v, ok := m.addrs[strings.ToLower(host)]; ok {
		return v, nil
	}
	return nil, notFound(host)
}

func (m *mapDNS) LookupMX(_ context.Context, name string) ([]string, error) {
	if v, ok := m.mx[strings.ToLower(name)]; ok {
		return v, nil
	}
	return nil, notFound(name)
}

// FuzzCompileSPF checks that any SPF record (published at example.com,
// with an include and a redirect target and names for a and mx) compiles
// without panicking and that every IP gets one of RFC 7208's results, the
// same one each time.
func FuzzCompileSPF(f *testing.F) {
	for _, s := range []string{
		"v=spf1 ip4:192.0.2.0/24 include:_spf.service.test a mx/30 -all",
		"v=spf1 ip6:2001:db8::/32 ~all",
		"v=spf1 redirect=_spf.service.test",
		"v=spf1 include:example.com -all",
		"v=spf1 a:host.test/24//64 mx:example.com ptr exists:%{i}.x.test ?all",
		"v=spf1 ip4:192.0.2.300 -all", "v=spf1 ip4:1.2.3.4/33", "v=spf1 redirect=a.test redirect=b.test",
		"v=spf1 exp=explain.test include:%{d}.test +all", "v=spf1 foo=bar 1ip4:x", "v=spf1", "V=SPF1 IP4:192.0.2.1 -ALL",
	} {
		f.Add(s)
	}
	ips := []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("198.51.100.7"),
		netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("::ffff:192.0.2.9"), netip.MustParseAddr("203.0.113.5")}
	valid := map[SPFResult]bool{SPFNone: true, SPFNeutral: true, SPFPass: true, SPFFail: true, SPFSoftFail: true,
		SPFTempError: true, SPFPermError: true}
	f.Fuzz(func(t *testing.T, record string) {
		dns := &mapDNS{
			txt: map[string][]string{
				"example.com":       {record},
				"_spf.service.test": {"v=spf1 ip4:198.51.100.0/24 include:example.com ~all"},
			},
			addrs: map[string][]netip.Addr{
				"example.com": {netip.MustParseAddr("203.0.113.5")},
				"host.test":   {netip.MustParseAddr("2001:db8::5")},
				"mx.test":     {netip.MustParseAddr("192.0.2.25")},
			},
			mx: map[string][]string{"example.com": {"mx.test"}},
		}
		p, err := CompileSPF(context.Background(), dns, "example.com")
		if err != nil || p == nil {
			t.Fatalf("CompileSPF(%q): %v", record, err)
		}
		for _, ip := range ips {
			r := p.Check(ip)
			if !valid[r] {
				t.Fatalf("Check(%s) of %q = %q", ip, record, r)
			}
			if again := p.Check(ip); again != r {
				t.Fatalf("Check(%s) of %q: %q then %q", ip, record, r, again)
			}
			if p.Authorizes(ip) != (r == SPFPass) {
				t.Fatalf("Authorizes(%s) disagrees with %q", ip, r)
			}
		}
	})
}
