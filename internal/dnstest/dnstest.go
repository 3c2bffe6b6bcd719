// Package dnstest runs a real DNS server on 127.0.0.1 for tests: UDP and
// TCP on the same port, so truncation fallback works as against a real
// server. The zone is held in memory and may change at any time.
//
// Answers follow RFC 1034/2308 closely enough for a stub resolver: unknown
// names are NXDOMAIN; a name that exists (it has records, or is an empty
// non-terminal above a name that has) but lacks the asked type is
// NOERROR/NODATA; UDP answers larger than the client's buffer (512 octets
// without EDNS0, RFC 1035 section 4.2.1; the advertised size with it,
// RFC 6891 section 6.2.5) are truncated with TC=1.
package dnstest

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// Server is a DNS server bound to a loopback port. Its methods are safe for
// concurrent use, also while queries are being served.
type Server struct {
	// Addr is "127.0.0.1:port", served over UDP and TCP.
	Addr string

	tb      testing.TB
	mu      sync.Mutex
	names   map[string]*entry // by canonical name
	queries map[string]int
	servers []*dns.Server
}

// entry holds everything set for one owner name.
type entry struct {
	txt      [][]string
	addrs    []netip.Addr
	mx       []string // exchange host names, in preference order
	ptr      []string
	rcode    int // 0: answer from the zone
	drop     bool
	truncUDP bool
}

func (e *entry) hasData() bool {
	return len(e.txt) > 0 || len(e.addrs) > 0 || len(e.mx) > 0 || len(e.ptr) > 0
}

// Start runs a server on 127.0.0.1 and stops it when the test ends. It
// fails the test when no port is free for both UDP and TCP.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s := &Server{tb: tb, names: make(map[string]*entry), queries: make(map[string]int)}
	pc, l := listenPair(tb)
	s.Addr = pc.LocalAddr().String()
	s.serve(&dns.Server{PacketConn: pc, Handler: s})
	s.serve(&dns.Server{Listener: l, Handler: s})
	tb.Cleanup(s.stop)
	return s
}

// listenPair binds UDP on a free port, then TCP on the same one; another
// process may hold that TCP port, so it tries a few ports.
func listenPair(tb testing.TB) (net.PacketConn, net.Listener) {
	tb.Helper()
	var lastErr error
	for range 20 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			tb.Fatalf("dnstest: listen udp: %v", err)
		}
		l, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, l
		}
		lastErr = err
		pc.Close()
	}
	tb.Fatalf("dnstest: no port free for both udp and tcp: %v", lastErr)
	return nil, nil
}

func (s *Server) serve(srv *dns.Server) {
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	errc := make(chan error, 1)
	go func() { errc <- srv.ActivateAndServe() }()
	select {
	case <-started:
		s.servers = append(s.servers, srv)
	case err := <-errc:
		s.tb.Fatalf("dnstest: serve: %v", err)
	}
}

func (s *Server) stop() {
	for _, srv := range s.servers {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := srv.ShutdownContext(ctx); err != nil {
			s.tb.Errorf("dnstest: shutdown: %v", err)
		}
		cancel()
	}
}

// key makes names case-insensitive and trailing-dot-insensitive.
func key(name string) string { return strings.ToLower(dns.Fqdn(name)) }

// entryLocked returns the entry for name, creating it. s.mu must be held.
func (s *Server) entryLocked(name string) *entry {
	k := key(name)
	e := s.names[k]
	if e == nil {
		e = &entry{}
		s.names[k] = e
	}
	return e
}

// SetTXT replaces the TXT records of name. Each record is one or more
// character-strings (of at most 255 octets each), which clients join; no
// records removes the name's TXT records.
func (s *Server) SetTXT(name string, records ...[]string) {
	s.tb.Helper()
	for _, r := range records {
		s.checkStrings(name, r)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entryLocked(name)
	e.txt = nil
	for _, r := range records {
		e.txt = append(e.txt, append([]string(nil), r...))
	}
}

// AddTXT appends one TXT record, made of strs, to name.
func (s *Server) AddTXT(name string, strs ...string) {
	s.tb.Helper()
	s.checkStrings(name, strs)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entryLocked(name)
	e.txt = append(e.txt, append([]string(nil), strs...))
}

func (s *Server) checkStrings(name string, strs []string) {
	s.tb.Helper()
	if len(strs) == 0 {
		s.tb.Fatalf("dnstest: TXT record for %s has no strings", name)
	}
	for _, str := range strs {
		if len(str) > 255 {
			s.tb.Fatalf("dnstest: TXT string for %s is longer than 255 octets; split it", name)
		}
	}
}

// SetA replaces the A and AAAA records of name; each address goes to the
// type of its family. It fails the test on an unparsable address.
func (s *Server) SetA(name string, addrs ...string) {
	s.tb.Helper()
	parsed := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		ip, err := netip.ParseAddr(a)
		if err != nil {
			s.tb.Fatalf("dnstest: SetA(%s): %v", name, err)
		}
		parsed = append(parsed, ip.Unmap())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entryLocked(name).addrs = parsed
}

// SetMX replaces the MX records of name with hosts, preference 10, 20, ...
func (s *Server) SetMX(name string, hosts ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entryLocked(name).mx = append([]string(nil), hosts...)
}

// SetPTR replaces the PTR records of name (a reverse name such as
// "1.2.0.192.in-addr.arpa", see dns.ReverseAddr) with hosts.
func (s *Server) SetPTR(name string, hosts ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entryLocked(name).ptr = append([]string(nil), hosts...)
}

// SetRcode makes every query for name answer with rcode (for example
// dns.RcodeServerFailure); dns.RcodeSuccess restores normal answers.
func (s *Server) SetRcode(name string, rcode int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entryLocked(name).rcode = rcode
}

// SetDrop makes the server never answer queries for name, so clients time out.
func (s *Server) SetDrop(name string, drop bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entryLocked(name).drop = drop
}

// SetTruncateUDP makes UDP answers for name empty with TC=1, while TCP
// answers normally.
func (s *Server) SetTruncateUDP(name string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entryLocked(name).truncUDP = on
}

// Remove forgets everything set for name; its query count stays.
func (s *Server) Remove(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.names, key(name))
}

// Queries returns how many queries, of any type and over any transport,
// came for name.
func (s *Server) Queries(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries[key(name)]
}
