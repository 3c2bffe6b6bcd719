// Package dnscheck looks up DMARC records in the DNS and judges them: the
// check-dmarc report, domain verification and the record dmarcd suggests.
//
// Its Resolver is a stub resolver over miekg/dns that asks configured
// recursive servers and tells a missing answer (ErrNotFound) from one that
// cannot be had now (ErrTemporary).
package dnscheck

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// ErrNotFound means the DNS answered that the record does not exist:
// NXDOMAIN, or NOERROR without records of the asked type (NODATA).
var ErrNotFound = errors.New("no such record")

// ErrTemporary means no answer could be had now (SERVFAIL, REFUSED, a
// timeout, a network error, a cancelled context): try again later.
var ErrTemporary = errors.New("DNS temporarily unavailable")

// Defaults for the zero Config.
const (
	DefaultTimeout  = 2 * time.Second
	DefaultAttempts = 2
	resolvConf      = "/etc/resolv.conf"
	fallbackServer  = "127.0.0.1:53"
	ednsBufferSize  = 4096 // RFC 6891; large enough for split DMARC TXT records
)

// Config says which recursive servers a Resolver asks and how patiently.
type Config struct {
	Servers  []string      // "host:port"; a bare host gets :53; empty means SystemServers
	Timeout  time.Duration // per query attempt; 0 means DefaultTimeout
	Attempts int           // tries per server before the next; 0 means DefaultAttempts
}

// SystemServers returns the name servers of /etc/resolv.conf as host:port,
// or 127.0.0.1:53 when the file is missing or lists none. It returns an
// error when the file exists but cannot be read.
func SystemServers() ([]string, error) {
	return systemServersFrom(resolvConf)
}

func systemServersFrom(path string) ([]string, error) {
	cc, err := dns.ClientConfigFromFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return []string{fallbackServer}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dnscheck: read %s: %w", path, err)
	}
	var servers []string
	for _, s := range cc.Servers {
		servers = append(servers, net.JoinHostPort(s, cc.Port))
	}
	if len(servers) == 0 {
		return []string{fallbackServer}, nil
	}
	return servers, nil
}

// Resolver sends queries to recursive servers. It is safe for concurrent use.
type Resolver struct {
	servers  []string
	timeout  time.Duration
	attempts int
}

// NewResolver returns a Resolver for cfg. It returns an error for a server
// address that is not host or host:port, a negative Timeout or Attempts, or
// when SystemServers fails.
func NewResolver(cfg Config) (*Resolver, error) {
	if cfg.Timeout < 0 || cfg.Attempts < 0 {
		return nil, errors.New("dnscheck: timeout and attempts must not be negative")
	}
	r := &Resolver{timeout: cfg.Timeout, attempts: cfg.Attempts}
	if r.timeout == 0 {
		r.timeout = DefaultTimeout
	}
	if r.attempts == 0 {
		r.attempts = DefaultAttempts
	}
	servers := cfg.Servers
	if len(servers) == 0 {
		var err error
		if servers, err = SystemServers(); err != nil {
			return nil, err
		}
	}
	for _, s := range servers {
		addr, err := serverAddr(s)
		if err != nil {
			return nil, err
		}
		r.servers = append(r.servers, addr)
	}
	return r, nil
}

// Servers returns the host:port addresses the Resolver asks, in order.
func (r *Resolver) Servers() []string { return append([]string(nil), r.servers...) }

// serverAddr turns "host", "[v6]", "v6" or "host:port" into host:port.
func serverAddr(s string) (string, error) {
	s = strings.TrimSpace(s)
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		host, port = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"), "53"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || host == "" || strings.ContainsAny(host, "[] ") {
		return "", fmt.Errorf("dnscheck: DNS server %q is not host or host:port", s)
	}
	return net.JoinHostPort(host, port), nil
}

// LookupTXT returns the TXT records of name, one string per record with its
// character-strings joined without separator (RFC 7208 section 3.3 and
// RFC 6376 section 3.6.2.2 read split TXT records the same way), each as
// published: without the zone-file escaping of miekg/dns (see
// unescapeTXT). Errors
// wrap ErrNotFound or ErrTemporary and name the query and the reason.
func (r *Resolver) LookupTXT(ctx context.Context, name string) ([]string, error) {
	rrs, err := r.lookup(ctx, name, dns.TypeTXT)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(rrs))
	for _, rr := range rrs {
		var b strings.Builder
		for _, str := range rr.(*dns.TXT).Txt {
			b.WriteString(UnescapeTXT(str))
		}
		out = append(out, b.String())
	}
	return out, nil
}

// LookupAddrs returns the A and AAAA addresses of host; an IP literal is
// returned as is. Both types must be answered: a temporary failure of
// either is an ErrTemporary error, so an address check never sees half of
// the set. It wraps ErrNotFound when host has neither.
func (r *Resolver) LookupAddrs(ctx context.Context, host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return []netip.Addr{ip.Unmap()}, nil
	}
	var addrs []netip.Addr
	missing := 0
	var notFound error
	for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
		rrs, err := r.lookup(ctx, host, qtype)
		if errors.Is(err, ErrNotFound) {
			missing++
			notFound = err
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, rr := range rrs {
			addrs = append(addrs, rrAddr(rr))
		}
	}
	if missing == 2 {
		return nil, fmt.Errorf("dnscheck: no A or AAAA records for %s: %w", host, notFound)
	}
	return addrs, nil
}

func rrAddr(rr dns.RR) netip.Addr {
	var ip net.IP
	switch rr := rr.(type) {
	case *dns.A:
		ip = rr.A
	case *dns.AAAA:
		ip = rr.AAAA
	}
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}
