package egress_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/internal/dnstest"
	"github.com/dmarcd/dmarcd/internal/egress"
)

// publicIP stands for a host on the internet. Tests only ever resolve to
// it, never dial it.
const publicIP = "93.184.216.34"

func mustResolver(tb testing.TB, srv *dnstest.Server) *dnscheck.Resolver {
	tb.Helper()
	r, err := dnscheck.NewResolver(dnscheck.Config{Servers: []string{srv.Addr}, Timeout: time.Second, Attempts: 1})
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// zone serves the names the URL tests resolve.
func zone(t *testing.T) *dnstest.Server {
	srv := dnstest.Start(t)
	srv.SetA("hooks.example.com", publicIP, "2606:2800:220:1:248:1893:25c8:1946")
	srv.SetA("private.example.com", "10.1.2.3")
	srv.SetA("mixed.example.com", publicIP, "127.0.0.1")
	srv.SetA("v6loop.example.com", "::1")
	srv.SetA("mapped.example.com", "64:ff9b::a00:1")
	srv.SetA("xn--bcher-kva.example.com", "10.9.9.9")
	srv.SetRcode("servfail.example.com", dns.RcodeServerFailure)
	return srv
}

// TestValidateURL ensures every unsafe URL is refused with a reason naming
// the problem, and public https URLs pass (validated only, never dialled).
func TestValidateURL(t *testing.T) {
	r := mustResolver(t, zone(t))
	long := "https://hooks.example.com/" + strings.Repeat("a", egress.MaxURLLength)
	ok := []string{
		"https://hooks.example.com/dmarc",
		"https://HOOKS.example.com:8443/dmarc?x=1#frag",
		"https://hooks.example.com./dmarc",
		"https://" + publicIP + "/",
		"https://[2606:2800:220:1:248:1893:25c8:1946]/",
		"https://[64:ff9b::5db8:d822]/", // NAT64 of a public address
		"https://[2002:5db8:d822::1]/",  // 6to4 of a public address
		"https://hooks.example.com/" + strings.Repeat("a", egress.MaxURLLength-len("https://hooks.example.com/")),
	}
	for _, u := range ok {
		if err := egress.ValidateURL(context.Background(), u, r, egress.Policy{}); err != nil {
			t.Errorf("ValidateURL(%.60s) = %v, want nil", u, err)
		}
	}
	bad := []struct{ url, reason string }{
		{"http://hooks.example.com/", "https"},
		{"HTTP://hooks.example.com/", "https"},
		{"ftp://hooks.example.com/", "https"},
		{"hooks.example.com/dmarc", "https"},
		{"https:hooks.example.com", "no host"},
		{"https:///dmarc", "no host"},
		{"https://%zz/", "not a valid URL"},
		{"https://user:pass@hooks.example.com/", "user name or password"},
		{"https://user@hooks.example.com/", "user name or password"},
		{"https://hooks.example.com:0/", "port"},
		{"https://hooks.example.com:65536/", "port"},
		{long, "longer than 2048"},
		{"https://2130706433/", "number"},
		{"https://0177.0.0.1/", "number"},
		{"https://0x7f000001/", "number"},
		{"https://0x7f.1/", "number"},
		{"https://127.1/", "number"},
		{"https://127.0.0.1./", "number"},
		{"https://017700000001/", "number"},
		{"https://1.2.3.4.5/", "number"},
		{"https://127.0.0.1/", "127.0.0.1 is a loopback address"},
		{"https://127.9.9.9:8443/", "loopback"},
		{"https://[::1]/", "::1 is a loopback address"},
		{"https://[::ffff:127.0.0.1]/", "IPv4-mapped loopback"},
		{"https://[::ffff:10.0.0.1]/", "IPv4-mapped private"},
		{"https://[::7f00:1]/", "IPv4-compatible"},
		{"https://[64:ff9b::7f00:1]/", "NAT64 loopback"},
		{"https://[64:ff9b:1::1]/", "local-use NAT64"},
		{"https://[2002:7f00:1::1]/", "6to4 loopback"},
		{"https://169.254.169.254/latest/meta-data/", "link-local"},
		{"https://10.0.0.1/", "private"},
		{"https://172.16.0.1/", "private"},
		{"https://172.31.255.255/", "private"},
		{"https://192.168.1.1/", "private"},
		{"https://100.64.0.1/", "carrier-grade NAT"},
		{"https://[fc00::1]/", "unique local"},
		{"https://[fd12:3456::1]/", "unique local"},
		{"https://[fe80::1]/", "link-local"},
		{"https://[fe80::1%25eth0]/", "link-local"},
		{"https://[ff02::1]/", "multicast"},
		{"https://224.0.0.1/", "multicast"},
		{"https://0.0.0.0/", "unspecified"},
		{"https://[::]/", "unspecified"},
		{"https://255.255.255.255/", "broadcast"},
		{"https://192.0.2.10/", "documentation"},
		{"https://[2001:db8::1]/", "documentation"},
		{"https://198.18.0.1/", "benchmarking"},
		{"https://240.0.0.1/", "reserved"},
		{"https://[3fff::1]/", "documentation"},
		{"https://[4000::1]/", "non-global"},
		{"https://１２７.０.０.１/", "loopback"}, // full-width digits map to 127.0.0.1
		{"https://localhost/", "loopback name"},
		{"https://api.localhost/", "loopback name"},
		{"https://private.example.com/", "resolves to 10.1.2.3, a private address"},
		{"https://mixed.example.com/", "resolves to 127.0.0.1, a loopback address"},
		{"https://v6loop.example.com/", "loopback"},
		{"https://mapped.example.com/", "NAT64 private"},
		{"https://bücher.example.com/", "private"},
		{"https://nxdomain.example.com/", "could not be resolved"},
		{"https://servfail.example.com/", "could not be resolved"},
	}
	for _, c := range bad {
		err := egress.ValidateURL(context.Background(), c.url, r, egress.Policy{})
		var ue *egress.URLError
		if !errors.Is(err, egress.ErrUnsafeURL) || !errors.As(err, &ue) || !strings.Contains(ue.Reason, c.reason) {
			t.Errorf("ValidateURL(%.60s) = %v; want ErrUnsafeURL mentioning %q", c.url, err, c.reason)
		}
	}
}

// TestValidateURLKeepsResolverCause ensures a refusal for a failed lookup
// still lets the caller tell a temporary DNS failure from a missing name,
// and keeps resolver details out of the message.
func TestValidateURLKeepsResolverCause(t *testing.T) {
	srv := zone(t)
	r := mustResolver(t, srv)
	err := egress.ValidateURL(context.Background(), "https://servfail.example.com/", r, egress.Policy{})
	if !errors.Is(err, dnscheck.ErrTemporary) || strings.Contains(err.Error(), srv.Addr) {
		t.Errorf("servfail: %v; want ErrTemporary, without the DNS server address", err)
	}
	err = egress.ValidateURL(context.Background(), "https://nxdomain.example.com/", r, egress.Policy{})
	if !errors.Is(err, dnscheck.ErrNotFound) {
		t.Errorf("nxdomain: %v; want ErrNotFound", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := egress.ValidateURL(ctx, "https://hooks.example.com/", r, egress.Policy{}); !errors.Is(err, context.Canceled) || errors.Is(err, egress.ErrUnsafeURL) {
		t.Errorf("cancelled: %v; want context.Canceled, not a refusal", err)
	}
}

// TestValidateURLAllowPrivate ensures --webhook-allow-private admits internal
// unicast addresses but none of the rules about the URL's form, nor
// addresses that are never a server.
func TestValidateURLAllowPrivate(t *testing.T) {
	r := mustResolver(t, zone(t))
	p := egress.Policy{AllowPrivate: true}
	for _, u := range []string{
		"https://127.0.0.1:8443/", "https://[::1]/", "https://10.0.0.1/", "https://private.example.com/",
		"https://mixed.example.com/", "https://169.254.1.1/", "https://[::ffff:192.168.0.1]/",
	} {
		if err := egress.ValidateURL(context.Background(), u, r, p); err != nil {
			t.Errorf("AllowPrivate: ValidateURL(%s) = %v, want nil", u, err)
		}
	}
	for _, u := range []string{
		"http://127.0.0.1/", "https://2130706433/", "https://0177.0.0.1/", "https://u:p@127.0.0.1/",
		"https://0.0.0.0/", "https://[::]/", "https://224.0.0.1/", "https://[ff02::1]/", "https://255.255.255.255/",
		"https://nxdomain.example.com/",
	} {
		if err := egress.ValidateURL(context.Background(), u, r, p); !errors.Is(err, egress.ErrUnsafeURL) {
			t.Errorf("AllowPrivate: ValidateURL(%s) = %v, want ErrUnsafeURL", u, err)
		}
	}
}
