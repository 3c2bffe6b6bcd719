package egress

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// MaxURLLength is the longest URL accepted, in bytes.
const MaxURLLength = 2048

// ErrUnsafeURL is wrapped by every error that refuses a URL.
var ErrUnsafeURL = errors.New("unsafe URL")

// URLError says why a URL was refused. Reason is written for the API
// client and safe to show; Err, when set, is the underlying cause (a
// resolver error) and is left out of Error so that DNS server details stay
// in the logs.
type URLError struct {
	Reason string
	Err    error
}

// Error returns "egress: unsafe URL: " and the reason.
func (e *URLError) Error() string { return "egress: " + ErrUnsafeURL.Error() + ": " + e.Reason }

// Unwrap returns ErrUnsafeURL and the cause, so errors.Is finds both.
func (e *URLError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrUnsafeURL}
	}
	return []error{ErrUnsafeURL, e.Err}
}

func refuse(format string, args ...any) *URLError {
	return &URLError{Reason: fmt.Sprintf(format, args...)}
}

// ValidateURL checks a URL before it is saved (a webhook's). The URL must be
// https, have a host, carry no user-info and be at most MaxURLLength bytes;
// a host written as a number (2130706433, 0177.0.0.1, 0x7f.1) is refused
// whatever it points to. An IP literal, and every address the host resolves
// to with r, must be public unicast unless p.AllowPrivate. A host that does
// not resolve is refused too. Every refusal is a *URLError wrapping
// ErrUnsafeURL (and, for a failed lookup, the resolver's error, so callers
// can tell a temporary DNS failure). A done ctx returns ctx.Err().
func ValidateURL(ctx context.Context, raw string, r Resolver, p Policy) error {
	t, uerr := parseTarget(raw, p)
	if uerr != nil {
		return uerr
	}
	if t.addr.IsValid() {
		if why := p.refusal(t.addr); why != "" {
			return refuse("%s is %s", t.addr, why)
		}
		return nil
	}
	addrs, err := r.LookupAddrs(ctx, t.host)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil || len(addrs) == 0 {
		return &URLError{Reason: fmt.Sprintf("host %s could not be resolved", t.host), Err: err}
	}
	for _, a := range addrs {
		if why := p.refusal(a); why != "" {
			return refuse("host %s resolves to %s, %s", t.host, a, why)
		}
	}
	return nil
}

// CheckURL makes every check of ValidateURL that needs no DNS: a client
// repeats it before each request, so a URL stored before a rule tightened
// is still held to it. A refusal is a *URLError wrapping ErrUnsafeURL.
func CheckURL(raw string, p Policy) error {
	if _, uerr := parseTarget(raw, p); uerr != nil {
		return uerr
	}
	return nil
}

// target is a parsed URL: host in ASCII form, and addr set when the
// host is an IP literal.
type target struct {
	host string
	addr netip.Addr
}

// parseTarget makes every check of ValidateURL that needs no DNS.
func parseTarget(raw string, p Policy) (target, *URLError) {
	if len(raw) > MaxURLLength {
		return target{}, refuse("URL is longer than %d characters", MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return target{}, refuse("not a valid URL")
	}
	switch {
	case u.Scheme != "https":
		return target{}, refuse("URL must use https")
	case u.Opaque != "" || u.Host == "":
		return target{}, refuse("URL has no host")
	case u.User != nil:
		return target{}, refuse("URL must not contain a user name or password")
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return target{}, refuse("port %s is not between 1 and 65535", port)
		}
	}
	return parseHost(u.Hostname(), p)
}

// parseHost reads the host the way the HTTP client will dial it: IDNA
// mapped to ASCII (which also turns full-width digits into ASCII ones).
func parseHost(host string, p Policy) (target, *URLError) {
	if host == "" {
		return target{}, refuse("URL has no host")
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return target{host: host, addr: a}, nil
	}
	ascii, err := idna.Lookup.ToASCII(host)
	if err != nil {
		return target{}, refuse("host %q is not a valid host name", host)
	}
	ascii = strings.ToLower(ascii)
	if a, err := netip.ParseAddr(ascii); err == nil {
		return target{host: ascii, addr: a}, nil
	}
	name := strings.TrimSuffix(ascii, ".")
	if looksNumeric(name) {
		return target{}, refuse("host %s is written as a number (decimal, octal or hex); use a host name or a dotted-decimal address", host)
	}
	if !p.AllowPrivate && (name == "localhost" || strings.HasSuffix(name, ".localhost")) {
		return target{}, refuse("host %s is a loopback name", host)
	}
	return target{host: ascii}, nil
}

// looksNumeric reports whether a host that is not a canonical IP address
// would still be read as an IPv4 address by some parser: per the WHATWG URL
// standard, whenever its last label is a decimal, octal or 0x-hex number
// (2130706433, 0177.0.0.1, 0x7f.1, 127.1). No top-level domain is numeric,
// so no real host name is caught.
func looksNumeric(name string) bool {
	last := name[strings.LastIndexByte(name, '.')+1:]
	if last == "" {
		return false
	}
	digits, hexOK := last, false
	if len(last) >= 2 && last[0] == '0' && (last[1] == 'x' || last[1] == 'X') {
		digits, hexOK = last[2:], true
	}
	for _, c := range digits {
		isDec := c >= '0' && c <= '9'
		isHex := isDec || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
		if !isDec && !(hexOK && isHex) {
			return false
		}
	}
	return true
}
