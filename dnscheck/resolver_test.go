package dnscheck

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dmarcd/dmarcd/internal/dnstest"
)

func mustResolver(tb testing.TB, cfg Config) *Resolver {
	tb.Helper()
	r, err := NewResolver(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// quickResolver asks only s, once per lookup; timeout is short enough for dropped-query tests.
func quickResolver(tb testing.TB, s *dnstest.Server) *Resolver {
	return mustResolver(tb, Config{Servers: []string{s.Addr}, Timeout: 200 * time.Millisecond, Attempts: 1})
}

// TestNewResolver ensures server addresses get a port, defaults apply, and bad settings are refused.
func TestNewResolver(t *testing.T) {
	r := mustResolver(t, Config{Servers: []string{"192.0.2.1", "192.0.2.2:5353", "2001:db8::1", "[2001:db8::2]", "[2001:db8::3]:54", " dns.example "}})
	want := []string{"192.0.2.1:53", "192.0.2.2:5353", "[2001:db8::1]:53", "[2001:db8::2]:53", "[2001:db8::3]:54", "dns.example:53"}
	if got := r.Servers(); !slices.Equal(got, want) {
		t.Errorf("Servers() = %v, want %v", got, want)
	}
	if r.timeout != DefaultTimeout || r.attempts != DefaultAttempts {
		t.Errorf("defaults: timeout %v attempts %d", r.timeout, r.attempts)
	}
	for _, cfg := range []Config{
		{Servers: []string{""}},
		{Servers: []string{"192.0.2.1:dns"}},
		{Servers: []string{"192.0.2.1:0"}},
		{Servers: []string{"192.0.2.1:70000"}},
		{Servers: []string{":53"}},
		{Servers: []string{"192.0.2.1"}, Timeout: -time.Second},
		{Servers: []string{"192.0.2.1"}, Attempts: -1},
	} {
		if _, err := NewResolver(cfg); err == nil || !strings.HasPrefix(err.Error(), "dnscheck: ") {
			t.Errorf("NewResolver(%+v) error = %v, want a dnscheck error", cfg, err)
		}
	}
}

// TestSystemServers ensures resolv.conf servers are read with port 53, and a missing or empty file falls back to 127.0.0.1:53.
func TestSystemServers(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(conf, []byte("# test\nnameserver 192.0.2.53\nnameserver 2001:db8::53\nsearch example.com\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := systemServersFrom(conf)
	if want := []string{"192.0.2.53:53", "[2001:db8::53]:53"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("systemServersFrom = %v, %v; want %v", got, err, want)
	}
	empty := filepath.Join(dir, "empty.conf")
	if err := os.WriteFile(empty, []byte("search example.com\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{empty, filepath.Join(dir, "missing.conf")} {
		got, err := systemServersFrom(path)
		if err != nil || !slices.Equal(got, []string{"127.0.0.1:53"}) {
			t.Errorf("systemServersFrom(%s) = %v, %v; want the fallback", filepath.Base(path), got, err)
		}
	}
	if _, err := systemServersFrom(filepath.Join(conf, "x")); err == nil {
		t.Error("systemServersFrom(below a file) succeeded, want an error")
	}
}

// TestLookupTXT ensures records come back joined, one per TXT record, including answers too big for 512 octets.
func TestLookupTXT(t *testing.T) {
	s := dnstest.Start(t)
	r := quickResolver(t, s)
	s.SetTXT("_dmarc.example.com", []string{"v=DMARC1; ", "p=reject; ", "rua=mailto:d@example.com"}, []string{"other"})
	got, err := r.LookupTXT(context.Background(), "_dmarc.example.com")
	if want := []string{"v=DMARC1; p=reject; rua=mailto:d@example.com", "other"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("LookupTXT = %q, %v; want %q", got, err, want)
	}

	long := strings.Repeat("x", 250)
	for range 6 { // about 3 kB: over 512 octets, under the 4096 of EDNS0
		s.AddTXT("big.example.com", long, long)
	}
	got, err = r.LookupTXT(context.Background(), "big.example.com.")
	if err != nil || len(got) != 6 || got[0] != long+long {
		t.Errorf("LookupTXT(big) = %d records, %v", len(got), err)
	}
	if n := s.Queries("big.example.com"); n != 1 {
		t.Errorf("big answer took %d queries; EDNS0 should make one enough", n)
	}
}

// TestLookupTXTTruncated ensures a truncated UDP answer is asked again over TCP.
func TestLookupTXTTruncated(t *testing.T) {
	s := dnstest.Start(t)
	s.AddTXT("_dmarc.example.com", "v=DMARC1; p=none")
	s.SetTruncateUDP("_dmarc.example.com", true)
	got, err := quickResolver(t, s).LookupTXT(context.Background(), "_dmarc.example.com")
	if err != nil || !slices.Equal(got, []string{"v=DMARC1; p=none"}) {
		t.Fatalf("LookupTXT = %q, %v", got, err)
	}
	if n := s.Queries("_dmarc.example.com"); n != 2 {
		t.Errorf("queries = %d, want 2 (UDP then TCP)", n)
	}
}

// TestLookupErrors ensures each kind of failure maps to ErrNotFound or ErrTemporary with the name and reason in the message.
func TestLookupErrors(t *testing.T) {
	s := dnstest.Start(t)
	s.SetA("nodata.example.com", "192.0.2.1")
	s.AddTXT("fail.example.com", "x")
	s.SetRcode("fail.example.com", dns.RcodeServerFailure)
	s.SetRcode("refused.example.com", dns.RcodeRefused)
	s.SetDrop("slow.example.com", true)
	r := quickResolver(t, s)
	tests := []struct {
		name   string
		kind   error
		reason string
	}{
		{"missing.example.com", ErrNotFound, "NXDOMAIN"},
		{"nodata.example.com", ErrNotFound, "NODATA"},
		{"fail.example.com", ErrTemporary, "SERVFAIL"},
		{"refused.example.com", ErrTemporary, "REFUSED"},
		{"slow.example.com", ErrTemporary, "timeout"},
		{strings.Repeat("a", 64) + ".example.com", ErrNotFound, "not a valid DNS name"},
	}
	for _, tt := range tests {
		_, err := r.LookupTXT(context.Background(), tt.name)
		if !errors.Is(err, tt.kind) {
			t.Errorf("LookupTXT(%s) error = %v, want %v", tt.name, err, tt.kind)
			continue
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "dnscheck: TXT lookup of "+tt.name) || !strings.Contains(msg, tt.reason) {
			t.Errorf("LookupTXT(%s) error %q, want the name and %q", tt.name, msg, tt.reason)
		}
	}
}

// TestLookupRetries ensures every server is tried in order, each Attempts times, and a cancelled context stops early.
func TestLookupRetries(t *testing.T) {
	bad, good := dnstest.Start(t), dnstest.Start(t)
	bad.SetRcode("_dmarc.example.com", dns.RcodeServerFailure)
	good.AddTXT("_dmarc.example.com", "v=DMARC1; p=none")
	r := mustResolver(t, Config{Servers: []string{bad.Addr, good.Addr}, Timeout: time.Second, Attempts: 3})
	got, err := r.LookupTXT(context.Background(), "_dmarc.example.com")
	if err != nil || len(got) != 1 {
		t.Fatalf("LookupTXT = %q, %v", got, err)
	}
	if b, g := bad.Queries("_dmarc.example.com"), good.Queries("_dmarc.example.com"); b != 3 || g != 1 {
		t.Errorf("queries bad=%d good=%d, want 3 and 1", b, g)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = r.LookupTXT(ctx, "_dmarc.example.com")
	if !errors.Is(err, ErrTemporary) || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled LookupTXT error = %v, want ErrTemporary and context.Canceled", err)
	}
	if g := good.Queries("_dmarc.example.com"); g != 1 {
		t.Errorf("cancelled lookup still queried: %d", g)
	}
}

// TestLookupAddrs ensures A and AAAA are merged, IP literals pass through, and half an answer is not returned.
func TestLookupAddrs(t *testing.T) {
	s := dnstest.Start(t)
	s.SetA("hook.example.com", "192.0.2.10", "2001:db8::10")
	s.SetA("v4.example.com", "192.0.2.11")
	s.SetA("flaky.example.com", "192.0.2.12")
	r := quickResolver(t, s)
	ctx := context.Background()

	got, err := r.LookupAddrs(ctx, "hook.example.com")
	want := []netip.Addr{netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("2001:db8::10")}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("LookupAddrs(hook) = %v, %v; want %v", got, err, want)
	}
	if got, err := r.LookupAddrs(ctx, "v4.example.com"); err != nil || len(got) != 1 {
		t.Errorf("LookupAddrs(v4) = %v, %v", got, err)
	}
	if got, err := r.LookupAddrs(ctx, "[::1]"); err != nil || !slices.Equal(got, []netip.Addr{netip.IPv6Loopback()}) {
		t.Errorf("LookupAddrs([::1]) = %v, %v", got, err)
	}
	if _, err := r.LookupAddrs(ctx, "missing.example.com"); !errors.Is(err, ErrNotFound) {
		t.Errorf("LookupAddrs(missing) error = %v, want ErrNotFound", err)
	}
	s.SetRcode("flaky.example.com", dns.RcodeServerFailure)
	if got, err := r.LookupAddrs(ctx, "flaky.example.com"); !errors.Is(err, ErrTemporary) {
		t.Errorf("LookupAddrs(flaky) = %v, %v; want ErrTemporary", got, err)
	}
}

// TestLookupTXTAsPublished ensures TXT text comes back as published, not in
// the zone-file escaping miekg/dns keeps it in (issue 24 item 11): a quote,
// a backslash and UTF-8 octets are themselves, and a record split into
// character-strings is joined as before.
func TestLookupTXTAsPublished(t *testing.T) {
	s := dnstest.Start(t)
	r := quickResolver(t, s)
	// dnstest packs strings with miekg/dns's zone-file rules: a backslash
	// escapes, so `\\` is one backslash on the wire.
	s.AddTXT("_dmarc.quoted.example", `"v=DMARC1; p=none; rua=mailto:d@quoted.example"`)
	s.AddTXT("_dmarc.mixed.example", `v=DMARC1; p=reject; `, `rua=mailto:dmarc@bücher.example; x=a\\b; y=tab`+"\t")
	for name, want := range map[string]string{
		"_dmarc.quoted.example": `"v=DMARC1; p=none; rua=mailto:d@quoted.example"`,
		"_dmarc.mixed.example":  `v=DMARC1; p=reject; rua=mailto:dmarc@bücher.example; x=a\b; y=tab` + "\t",
	} {
		got, err := r.LookupTXT(context.Background(), name)
		if err != nil || !slices.Equal(got, []string{want}) {
			t.Errorf("LookupTXT(%s) = %q, %v; want %q", name, got, err, want)
		}
	}
}

// TestUnescapeTXT ensures the zone-file escapes miekg/dns produces are
// undone: \X is X, \DDD is the octet DDD, and a dangling backslash stays.
func TestUnescapeTXT(t *testing.T) {
	for in, want := range map[string]string{
		"plain":            "plain",
		`a\"b`:             `a"b`,
		`a\\b`:             `a\b`,
		`caf\195\169`:      "café",
		`\009x`:            "\tx",
		`end\`:             `end\`,
		`\12`:              `12`,
		`v=DMARC1; p=none`: "v=DMARC1; p=none",
	} {
		if got := UnescapeTXT(in); got != want {
			t.Errorf("UnescapeTXT(%q) = %q, want %q", in, got, want)
		}
	}
}
