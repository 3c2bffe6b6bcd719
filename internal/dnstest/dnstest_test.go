package dnstest

import (
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// exchange sends one query for name/qtype over network ("udp" or "tcp").
func exchange(t *testing.T, s *Server, network, name string, qtype uint16, edns bool) (*dns.Msg, error) {
	t.Helper()
	m := new(dns.Msg).SetQuestion(dns.Fqdn(name), qtype)
	if edns {
		m.SetEdns0(4096, false)
	}
	c := &dns.Client{Net: network, Timeout: 300 * time.Millisecond}
	r, _, err := c.Exchange(m, s.Addr)
	return r, err
}

func mustExchange(t *testing.T, s *Server, network, name string, qtype uint16, edns bool) *dns.Msg {
	t.Helper()
	r, err := exchange(t, s, network, name, qtype, edns)
	if err != nil {
		t.Fatalf("%s %s %s: %v", network, name, dns.TypeToString[qtype], err)
	}
	return r
}

func txtStrings(r *dns.Msg) [][]string {
	var out [][]string
	for _, rr := range r.Answer {
		if txt, ok := rr.(*dns.TXT); ok {
			out = append(out, txt.Txt)
		}
	}
	return out
}

// TestTXT ensures TXT records come back as set, split strings intact, over UDP and TCP, case-insensitively.
func TestTXT(t *testing.T) {
	s := Start(t)
	s.SetTXT("_dmarc.Example.COM.", []string{"v=DMARC1; ", "p=none"})
	s.AddTXT("_dmarc.example.com", "other")
	want := [][]string{{"v=DMARC1; ", "p=none"}, {"other"}}
	for _, network := range []string{"udp", "tcp"} {
		r := mustExchange(t, s, network, "_DMARC.example.com", dns.TypeTXT, false)
		got := txtStrings(r)
		if r.Rcode != dns.RcodeSuccess || len(got) != 2 || !slices.Equal(got[0], want[0]) || !slices.Equal(got[1], want[1]) {
			t.Errorf("%s: rcode %d answer %q, want %q", network, r.Rcode, got, want)
		}
	}
	if n := s.Queries("_dmarc.example.com."); n != 2 {
		t.Errorf("Queries = %d, want 2", n)
	}
}

// TestNegativeAnswers ensures unknown names are NXDOMAIN while existing names without the type, and empty non-terminals, are NODATA.
func TestNegativeAnswers(t *testing.T) {
	s := Start(t)
	s.SetA("host.example.com", "192.0.2.1")
	s.AddTXT("_dmarc.sub.example.org", "v=DMARC1")
	tests := []struct {
		name  string
		rcode int
	}{
		{"nothing.example.com", dns.RcodeNameError},
		{"host.example.com", dns.RcodeSuccess},     // has A, no TXT
		{"sub.example.org", dns.RcodeSuccess},      // empty non-terminal
		{"example.org", dns.RcodeSuccess},          // empty non-terminal
		{"ub.example.org", dns.RcodeNameError},     // suffix of a label, not a parent
		{"x.host.example.com", dns.RcodeNameError}, // below an existing name
	}
	for _, tt := range tests {
		r := mustExchange(t, s, "udp", tt.name, dns.TypeTXT, false)
		if r.Rcode != tt.rcode || len(r.Answer) != 0 {
			t.Errorf("%s: rcode %s with %d answers, want %s and none", tt.name,
				dns.RcodeToString[r.Rcode], len(r.Answer), dns.RcodeToString[tt.rcode])
		}
	}
	s.Remove("host.example.com")
	if r := mustExchange(t, s, "udp", "host.example.com", dns.TypeA, false); r.Rcode != dns.RcodeNameError {
		t.Errorf("after Remove: rcode %s, want NXDOMAIN", dns.RcodeToString[r.Rcode])
	}
}

// TestSetA ensures addresses are served as A or AAAA by family.
func TestSetA(t *testing.T) {
	s := Start(t)
	s.SetA("h.example.com", "192.0.2.1", "2001:db8::1", "198.51.100.2")
	r := mustExchange(t, s, "udp", "h.example.com", dns.TypeA, false)
	var v4 []string
	for _, rr := range r.Answer {
		v4 = append(v4, rr.(*dns.A).A.String())
	}
	if !slices.Equal(v4, []string{"192.0.2.1", "198.51.100.2"}) {
		t.Errorf("A = %v", v4)
	}
	r = mustExchange(t, s, "tcp", "h.example.com", dns.TypeAAAA, false)
	if len(r.Answer) != 1 || r.Answer[0].(*dns.AAAA).AAAA.String() != "2001:db8::1" {
		t.Errorf("AAAA = %v", r.Answer)
	}
}

// TestRcodeAndDrop ensures forced rcodes are answered and dropped names never are.
func TestRcodeAndDrop(t *testing.T) {
	s := Start(t)
	s.AddTXT("fail.example.com", "x")
	s.SetRcode("fail.example.com", dns.RcodeServerFailure)
	if r := mustExchange(t, s, "udp", "fail.example.com", dns.TypeTXT, false); r.Rcode != dns.RcodeServerFailure {
		t.Errorf("rcode %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
	s.SetRcode("fail.example.com", dns.RcodeSuccess)
	if r := mustExchange(t, s, "udp", "fail.example.com", dns.TypeTXT, false); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Errorf("after reset: rcode %s, %d answers", dns.RcodeToString[r.Rcode], len(r.Answer))
	}

	s.SetDrop("slow.example.com", true)
	for _, network := range []string{"udp", "tcp"} {
		_, err := exchange(t, s, network, "slow.example.com", dns.TypeTXT, false)
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("%s: err = %v, want a timeout", network, err)
		}
	}
	if n := s.Queries("slow.example.com"); n != 2 {
		t.Errorf("Queries = %d, want 2", n)
	}
}

// TestTruncation ensures big answers are truncated over UDP without EDNS0, fit with EDNS0, and SetTruncateUDP forces TC.
func TestTruncation(t *testing.T) {
	s := Start(t)
	for i := range 6 {
		s.AddTXT("big.example.com", strings.Repeat(string(rune('a'+i)), 200))
	}
	r := mustExchange(t, s, "udp", "big.example.com", dns.TypeTXT, false)
	if !r.Truncated || len(r.Answer) == 6 {
		t.Errorf("UDP without EDNS0: TC=%v with %d answers, want truncated", r.Truncated, len(r.Answer))
	}
	r = mustExchange(t, s, "udp", "big.example.com", dns.TypeTXT, true)
	if r.Truncated || len(r.Answer) != 6 || r.IsEdns0() == nil {
		t.Errorf("UDP with EDNS0: TC=%v with %d answers", r.Truncated, len(r.Answer))
	}
	r = mustExchange(t, s, "tcp", "big.example.com", dns.TypeTXT, false)
	if r.Truncated || len(r.Answer) != 6 {
		t.Errorf("TCP: TC=%v with %d answers", r.Truncated, len(r.Answer))
	}

	s.AddTXT("tc.example.com", "small")
	s.SetTruncateUDP("tc.example.com", true)
	r = mustExchange(t, s, "udp", "tc.example.com", dns.TypeTXT, true)
	if !r.Truncated || len(r.Answer) != 0 {
		t.Errorf("forced TC over UDP: TC=%v with %d answers", r.Truncated, len(r.Answer))
	}
	r = mustExchange(t, s, "tcp", "tc.example.com", dns.TypeTXT, true)
	if r.Truncated || len(r.Answer) != 1 {
		t.Errorf("forced TC, TCP: TC=%v with %d answers", r.Truncated, len(r.Answer))
	}
}
