// Package clientaddr tells the address of the client of an HTTP request:
// the peer's, or behind reverse proxies the operator trusts, the address
// they forwarded in X-Forwarded-For. Every per-address limit and every log
// line that names a client reads it here, so they all agree.
package clientaddr

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Proxies are the reverse proxies whose X-Forwarded-For is believed. A nil
// *Proxies trusts none: the client is the peer.
type Proxies struct {
	prefixes []netip.Prefix
}

// ParseProxies reads CIDRs (10.0.0.0/8, 2001:db8::/32) and single
// addresses (127.0.0.1); none is a nil *Proxies.
func ParseProxies(list []string) (*Proxies, error) {
	if len(list) == 0 {
		return nil, nil
	}
	p := &Proxies{}
	for _, s := range list {
		s = strings.TrimSpace(s)
		var pre netip.Prefix
		var err error
		if strings.Contains(s, "/") {
			pre, err = netip.ParsePrefix(s)
		} else {
			var a netip.Addr
			if a, err = netip.ParseAddr(s); err == nil {
				pre = netip.PrefixFrom(a, a.BitLen())
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%q is neither an address nor a CIDR like 10.0.0.0/8", s)
		}
		p.prefixes = append(p.prefixes, unmapPrefix(pre).Masked())
	}
	return p, nil
}

// String lists the trusted networks, comma-separated.
func (p *Proxies) String() string {
	if p == nil {
		return ""
	}
	s := make([]string, len(p.prefixes))
	for i, pre := range p.prefixes {
		s[i] = pre.String()
	}
	return strings.Join(s, ",")
}

func (p *Proxies) trusts(a netip.Addr) bool {
	if p == nil {
		return false
	}
	for _, pre := range p.prefixes {
		if pre.Contains(a) {
			return true
		}
	}
	return false
}

// Addr is the client address of r, the one function that computes it: the
// peer's address, unless the peer is a trusted proxy; then the right-most
// X-Forwarded-For address that is not a trusted proxy (the left part is
// whatever the client sent, so it is never believed). When every forwarded
// address is trusted the left-most one is the client; an entry that is no
// address ends the walk at the hop before it.
func (p *Proxies) Addr(r *http.Request) string {
	peer, ok := parseAddr(r.RemoteAddr)
	if !ok {
		return r.RemoteAddr
	}
	if !p.trusts(peer) {
		return peer.String()
	}
	client := peer
	values := r.Header.Values("X-Forwarded-For")
	for i := len(values) - 1; i >= 0; i-- {
		hops := strings.Split(values[i], ",")
		for j := len(hops) - 1; j >= 0; j-- {
			hop := strings.TrimSpace(hops[j])
			if hop == "" && len(hops) == 1 {
				continue // an empty header line
			}
			a, ok := parseAddr(hop)
			if !ok {
				return client.String()
			}
			client = a
			if !p.trusts(a) {
				return a.String()
			}
		}
	}
	return client.String()
}

// parseAddr reads an address with or without a port or brackets.
func parseAddr(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return a.Unmap(), true
	}
	if host, _, err := net.SplitHostPort(s); err == nil {
		if a, err := netip.ParseAddr(host); err == nil {
			return a.Unmap(), true
		}
	}
	return netip.Addr{}, false
}

func unmapPrefix(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() {
		bits := p.Bits() - 96
		if bits < 0 {
			bits = 0
		}
		return netip.PrefixFrom(a.Unmap(), bits)
	}
	return p
}

type ctxKey struct{}

// Wrap computes the client address of every request once, before h runs,
// for Of to read: wrap the outermost handler of a server.
func (p *Proxies) Wrap(h http.Handler) http.Handler {
	if p == nil {
		// No proxy is trusted: Of finds the peer in RemoteAddr itself, so
		// no request needs a copy with the address in its context.
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, p.Addr(r))))
	})
}

// Of is the client address of r as Wrap computed it; without Wrap, the
// peer's address (no proxy trusted).
func Of(r *http.Request) string {
	if a, ok := r.Context().Value(ctxKey{}).(string); ok {
		return a
	}
	return (*Proxies)(nil).Addr(r)
}
