// Package egress is dmarcd's outbound network policy: every connection
// the server opens to a host a customer named (webhook receivers, IMAP
// mailboxes, OAuth2 token URLs, MTA-STS policy hosts) goes through it, so
// that a URL or host name cannot steer the server at its own network
// (SSRF).
//
// What is refused. Every address actually dialled is checked at the
// moment of connecting (NewDialer), after name resolution, so a name that
// resolves to a public address when a URL is saved and to an internal one
// later (DNS rebinding) still reaches nothing internal. Refused unless
// Policy.AllowPrivate: loopback, private (RFC 1918, unique local),
// carrier-grade NAT, link-local (cloud metadata at 169.254.169.254),
// documentation, benchmarking, reserved and every other IANA
// special-purpose range that is not globally reachable, also when written
// inside an IPv6 address (IPv4-mapped, NAT64, 6to4). Refused whatever
// the policy: unspecified, multicast and broadcast addresses, which are
// never a server. URLs (ValidateURL, Client) must be https, carry no user
// name or password, and not write their host as a number (2130706433,
// 0177.0.0.1), which parsers read differently.
//
// The allow-private flags (--webhook-allow-private, --imap-allow-private)
// set Policy.AllowPrivate for one kind of client; the CA-file flags
// (--webhook-ca-file, --imap-ca-file) set Policy.RootCAs with LoadCAFile:
// the system's authorities plus those in the file. TLS is 1.2 or later,
// always verified; no proxy is used (it would dial for us, unchecked) and
// no redirect followed (a public host could send us to an internal one).
//
// A new outbound client gets its connections here, never from net.Dial:
// NewDialer(resolver, policy, timeout) for a TCP client (a mail relay),
// Policy.TLSConfig for its TLS, NewTransport for an HTTP client of its own
// (ClickHouse over HTTP), or NewClient for one-shot HTTPS requests.
package egress

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/netip"
	"os"
)

// Policy says which destinations an outbound client may reach and which
// certificates it trusts. The zero value refuses every non-public address
// and trusts the system's authorities.
type Policy struct {
	// AllowPrivate lets the client reach loopback, private, link-local and
	// other non-public unicast addresses (--webhook-allow-private,
	// --imap-allow-private). Unspecified, multicast and broadcast
	// addresses stay refused: they are never a server.
	AllowPrivate bool
	// RootCAs are the certificate authorities trusted for servers; nil
	// means the system pool. See LoadCAFile.
	RootCAs *x509.CertPool
}

// TLSConfig returns the TLS settings of every outbound connection under p:
// TLS 1.2 or later, certificates verified against p.RootCAs, for
// serverName ("" lets an HTTP transport fill it in from the URL).
func (p Policy) TLSConfig(serverName string) *tls.Config {
	return &tls.Config{ServerName: serverName, MinVersion: tls.VersionTLS12, RootCAs: p.RootCAs}
}

// LoadCAFile returns the system's trusted certificate authorities plus
// those in the PEM file at path (--webhook-ca-file, --imap-ca-file), for
// Policy.RootCAs. It returns an error when the file cannot be read or
// holds no certificate.
func LoadCAFile(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("egress: CA file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool() // no system store: the file alone is trusted
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("egress: CA file %s holds no PEM certificate", path)
	}
	return pool, nil
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
