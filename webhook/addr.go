package webhook

import (
	"crypto/x509"
	"net/netip"
)

// Policy says which destinations deliveries may reach and which
// certificates they trust.
type Policy struct {
	// AllowPrivate lets webhooks reach loopback, private, link-local and
	// other non-public unicast addresses (--webhook-allow-private).
	// Unspecified, multicast and broadcast addresses stay refused: they are
	// never a server.
	AllowPrivate bool
	// RootCAs are the certificate authorities trusted for receivers; nil
	// means the system pool. See LoadCAFile.
	RootCAs *x509.CertPool
}

// block is a range of addresses that is no public unicast destination.
type block struct {
	prefix netip.Prefix
	kind   string // "a <kind> address" reads well
	always bool   // refused even with AllowPrivate
}

// spec writes a block compactly.
type spec struct {
	cidr, kind string
	always     bool
}

func mustBlocks(specs ...spec) []block {
	out := make([]block, len(specs))
	for i, s := range specs {
		out[i] = block{netip.MustParsePrefix(s.cidr), s.kind, s.always}
	}
	return out
}

// v4Blocks is the IANA IPv4 special-purpose registry, less the ranges that
// are globally reachable; the first match wins.
var v4Blocks = mustBlocks(
	spec{"255.255.255.255/32", "broadcast", true},
	spec{"0.0.0.0/8", "unspecified (this-network)", true},
	spec{"10.0.0.0/8", "private", false},
	spec{"100.64.0.0/10", "shared (carrier-grade NAT)", false},
	spec{"127.0.0.0/8", "loopback", false},
	spec{"169.254.0.0/16", "link-local", false},
	spec{"172.16.0.0/12", "private", false},
	spec{"192.0.0.0/24", "IETF protocol assignment", false},
	spec{"192.0.2.0/24", "documentation", false},
	spec{"192.88.99.0/24", "6to4 relay anycast", false},
	spec{"192.168.0.0/16", "private", false},
	spec{"198.18.0.0/15", "benchmarking", false},
	spec{"198.51.100.0/24", "documentation", false},
	spec{"203.0.113.0/24", "documentation", false},
	spec{"224.0.0.0/4", "multicast", true},
	spec{"240.0.0.0/4", "reserved", false},
)

// v6Blocks lists the non-public IPv6 ranges checked before the rule that
// only 2000::/3 is global unicast; the first match wins. Ranges that embed
// an IPv4 address (mapped, NAT64, 6to4) are judged by that address instead.
var v6Blocks = mustBlocks(
	spec{"::/128", "unspecified", true},
	spec{"::1/128", "loopback", false},
	spec{"::/96", "IPv4-compatible IPv6 (deprecated)", false},
	spec{"64:ff9b:1::/48", "local-use NAT64", false},
	spec{"100::/64", "discard-only", false},
	spec{"2001::/32", "Teredo", false},
	spec{"2001:2::/48", "benchmarking", false},
	spec{"2001:db8::/32", "documentation", false},
	spec{"3fff::/20", "documentation", false},
	spec{"fc00::/7", "private (unique local)", false},
	spec{"fe80::/10", "link-local", false},
	spec{"fec0::/10", "site-local (deprecated)", false},
	spec{"ff00::/8", "multicast", true},
)

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
	global6   = netip.MustParsePrefix("2000::/3")
)

// classify names the kind of a non-public address, or returns "" for a
// public one; always reports that even AllowPrivate does not permit it.
func classify(a netip.Addr) (kind string, always bool) {
	a = a.WithZone("")
	if a.Is4In6() {
		return embedded("IPv4-mapped", a.Unmap())
	}
	if a.Is4() {
		return match(v4Blocks, a)
	}
	b := a.As16()
	if nat64.Contains(a) {
		return embedded("NAT64", netip.AddrFrom4([4]byte(b[12:16])))
	}
	if sixToFour.Contains(a) {
		return embedded("6to4", netip.AddrFrom4([4]byte(b[2:6])))
	}
	if kind, always := match(v6Blocks, a); kind != "" {
		return kind, always
	}
	if !global6.Contains(a) {
		return "non-global (unassigned)", false
	}
	return "", false
}

func match(blocks []block, a netip.Addr) (string, bool) {
	for _, b := range blocks {
		if b.prefix.Contains(a) {
			return b.kind, b.always
		}
	}
	return "", false
}

// embedded judges an IPv6 address by the IPv4 address inside it, since
// traffic to it ends up there.
func embedded(via string, v4 netip.Addr) (string, bool) {
	kind, always := match(v4Blocks, v4)
	if kind == "" {
		return "", false
	}
	return via + " " + kind, always
}

// refusal returns what makes the policy refuse a, as "a loopback
// address", or "" when a may be dialled.
func (p Policy) refusal(a netip.Addr) string {
	kind, always := classify(a)
	if kind == "" || (p.AllowPrivate && !always) {
		return ""
	}
	return article(kind) + " " + kind + " address"
}

func article(word string) string {
	switch word[0] {
	case 'a', 'e', 'i', 'o', 'u', 'I':
		return "an"
	}
	return "a"
}
