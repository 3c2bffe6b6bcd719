package dmarc

import (
	"errors"
	"net/netip"
	"strings"

	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"
)

// ErrInvalidDomain is wrapped by every error NormalizeDomain returns.
var ErrInvalidDomain = errors.New("invalid domain name")

// domainError carries a message meant for API clients; it unwraps to
// ErrInvalidDomain so callers can tell the kind with errors.Is.
type domainError struct{ msg string }

func (e *domainError) Error() string { return "dmarc: " + e.msg }
func (e *domainError) Unwrap() error { return ErrInvalidDomain }

func invalidDomain(msg string) error { return &domainError{msg: msg} }

// Limits from RFC 1035 section 2.3.4 (presentation form, no trailing dot).
const (
	maxLabelLen  = 63
	maxDomainLen = 253
)

// NormalizeDomain returns name in the canonical form dmarcd stores: trimmed,
// lower-case, without a trailing dot, IDNs in their ASCII (xn--) form.
//
// The result is a hostname of at least two labels of letters, digits and
// inner hyphens (RFC 1123 section 2.1), each of 1 to 63 octets, 253 octets
// in all, whose top-level label is not all digits. IP addresses, localhost
// and its subdomains, wildcards and underscores (which registered domains
// never carry) are refused. Every error wraps ErrInvalidDomain and its
// message can be shown to an API client.
func NormalizeDomain(name string) (string, error) {
	name = strings.TrimSpace(name)
	name = strings.TrimSuffix(name, ".")
	if name == "" {
		return "", invalidDomain("domain name is empty")
	}
	if isIPAddress(name) {
		return "", invalidDomain("domain name must not be an IP address")
	}
	if strings.Contains(name, "*") {
		return "", invalidDomain("domain name must not contain a wildcard")
	}
	if strings.Contains(name, "_") {
		return "", invalidDomain("domain name must not contain an underscore")
	}
	ascii, err := idna.Lookup.ToASCII(name)
	if err != nil {
		return "", invalidDomain("domain name is not a valid hostname")
	}
	// idna.Lookup maps to lower case already; this covers pure ASCII input
	// that the profile passes through.
	ascii = strings.ToLower(ascii)
	if err := checkHostname(ascii); err != nil {
		return "", err
	}
	return ascii, nil
}

// isIPAddress reports whether s is an IPv4 or IPv6 literal, bracketed or not.
func isIPAddress(s string) bool {
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	_, err := netip.ParseAddr(s)
	return err == nil
}

// checkHostname applies the RFC 1035/1123 hostname rules to an A-label name.
func checkHostname(name string) error {
	if len(name) > maxDomainLen {
		return invalidDomain("domain name is longer than 253 octets")
	}
	labels := strings.Split(name, ".")
	if len(labels) < 2 {
		return invalidDomain("domain name must have at least two labels")
	}
	for _, l := range labels {
		if err := checkLabel(l); err != nil {
			return err
		}
	}
	tld := labels[len(labels)-1]
	if tld == "localhost" {
		return invalidDomain("domain name must not be localhost")
	}
	// RFC 3696 section 2: a top-level domain is never all-numeric, which
	// also keeps dotted-quad look-alikes such as 1.2.3.300 out.
	if strings.Trim(tld, "0123456789") == "" {
		return invalidDomain("domain name must not end in a numeric label")
	}
	return nil
}

func checkLabel(l string) error {
	switch {
	case l == "":
		return invalidDomain("domain name has an empty label")
	case len(l) > maxLabelLen:
		return invalidDomain("domain name has a label longer than 63 octets")
	case l[0] == '-' || l[len(l)-1] == '-':
		return invalidDomain("domain name label must not start or end with a hyphen")
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return invalidDomain("domain name may contain only letters, digits, hyphens and dots")
		}
	}
	return nil
}

// OrganizationalDomain returns the RFC 7489 section 3.2 Organizational
// Domain of name: its public suffix plus one label, from the Public Suffix
// List compiled into golang.org/x/net/publicsuffix. When the list gives no
// answer (name is itself a public suffix, or malformed) it returns name.
// RFC 9989 replaces this with the DNS tree walk; dmarcd still uses it to
// decide which reporting addresses are external to a domain.
func OrganizationalDomain(name string) string {
	od, err := publicsuffix.EffectiveTLDPlusOne(strings.ToLower(strings.TrimSuffix(name, ".")))
	if err != nil {
		return name
	}
	return od
}
