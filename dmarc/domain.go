package dmarc

import (
	"errors"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"
)

// ErrInvalidDomain is wrapped by every error NormalizeDomain returns.
var ErrInvalidDomain = errors.New("invalid domain name")

// DomainError is why NormalizeDomain refused a name: the name (lower-case,
// cut short when long; empty for an empty input) and the reason, which
// names the label refused. Its message is meant for people and API
// clients; it unwraps to ErrInvalidDomain.
type DomainError struct {
	Name   string
	Reason string
}

func (e *DomainError) Error() string {
	if e.Name == "" {
		return "dmarc: " + e.Reason
	}
	return "dmarc: " + e.Name + ": " + e.Reason
}

// Unwrap makes errors.Is(err, ErrInvalidDomain) hold.
func (e *DomainError) Unwrap() error { return ErrInvalidDomain }

// refuse is the DomainError of name for reason.
func refuse(name, reason string) error {
	return &DomainError{Name: cut(strings.ToLower(name), 80), Reason: reason}
}

// refuseLabel is the DomainError of name for its label l.
func refuseLabel(name, l, why string) error {
	return refuse(name, "the label "+strconv.Quote(cut(l, 70))+" "+why)
}

// cut shortens s to n bytes and an ellipsis, on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

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
// and its subdomains (.localhost is reserved, RFC 6761), wildcards and
// underscores (which registered domains never carry) are refused. Every
// error is a *DomainError naming the label refused and why; it wraps
// ErrInvalidDomain and its message can be shown to an API client.
func NormalizeDomain(name string) (string, error) {
	name = strings.TrimSpace(name)
	name = strings.TrimSuffix(name, ".")
	if name == "" {
		return "", &DomainError{Reason: "domain name is empty"}
	}
	if isIPAddress(name) {
		return "", refuse(name, "an IP address, not a domain name")
	}
	if strings.ContainsAny(name, "/@: \t") {
		return "", refuse(name, "not a valid hostname (give the domain name alone, like example.com)")
	}
	labels := strings.Split(strings.ToLower(name), ".")
	for _, l := range labels {
		switch {
		case strings.Contains(l, "*"):
			return "", refuseLabel(name, l, "is a wildcard: register the domain itself")
		case strings.Contains(l, "_"):
			return "", refuseLabel(name, l, "contains an underscore, which host names never carry")
		}
	}
	ascii, err := idna.Lookup.ToASCII(name)
	if err != nil {
		// Say which label, when a plain ASCII one breaks a rule.
		if err := checkLabels(name, labels); err != nil {
			return "", err
		}
		return "", refuse(name, "not a valid hostname")
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
		return refuse(name, "longer than 253 octets")
	}
	labels := strings.Split(name, ".")
	if len(labels) < 2 {
		return refuse(name, "a domain name has at least two labels, like example.com")
	}
	if err := checkLabels(name, labels); err != nil {
		return err
	}
	tld := labels[len(labels)-1]
	if tld == "localhost" {
		return refuse(name, ".localhost is reserved for this machine's own names (RFC 6761) and never receives mail")
	}
	// RFC 3696 section 2: a top-level domain is never all-numeric, which
	// also keeps dotted-quad look-alikes such as 1.2.3.300 out.
	if strings.Trim(tld, "0123456789") == "" {
		return refuse(name, "the last label "+strconv.Quote(cut(tld, 70))+" is all digits, which no top-level domain is")
	}
	return nil
}

// checkLabels checks each ASCII label of name; labels with other
// characters are left to IDNA.
func checkLabels(name string, labels []string) error {
	for _, l := range labels {
		if err := checkLabel(name, l); err != nil {
			return err
		}
	}
	return nil
}

func checkLabel(name, l string) error {
	switch {
	case l == "":
		return refuse(name, "it has an empty label")
	case len(l) > maxLabelLen:
		return refuseLabel(name, l, "is longer than 63 octets")
	case l[0] == '-' || l[len(l)-1] == '-':
		return refuseLabel(name, l, "starts or ends with a hyphen")
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if c >= utf8.RuneSelf {
			return nil // an IDN label: IDNA judges it
		}
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return refuseLabel(name, l, "may contain only letters, digits and hyphens")
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
