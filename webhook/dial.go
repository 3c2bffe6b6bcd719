package webhook

import (
	"context"
	"errors"
	"net"
	"time"
)

// DialFunc dials network addresses the way net.Dialer.DialContext does.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// NewDialer returns the dialer webhook deliveries use, for other outbound
// clients held to the same address policy (IMAP intake, OAuth2 token URLs):
// it resolves host names with r, and every address is checked against p at
// the moment it is dialled, so a name that resolves to a private address
// later (DNS rebinding) is still refused. timeout bounds one connection
// attempt; 0 means DefaultTimeout.
func NewDialer(r Resolver, p Policy, timeout time.Duration) DialFunc {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	d := &dialer{
		resolver: r,
		net:      net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second, Control: p.control},
	}
	return d.dial
}

// RefusedReason reports whether err (from a NewDialer dial) is a refusal by
// the address policy, and why ("127.0.0.1 is a loopback address").
func RefusedReason(err error) (string, bool) {
	var refused *refusedError
	if errors.As(err, &refused) {
		return refused.why, true
	}
	return "", false
}

// UnresolvedHost reports whether err (from a NewDialer dial) is a failed
// lookup of a host name, and which.
func UnresolvedHost(err error) (string, bool) {
	var unresolved *resolveError
	if errors.As(err, &unresolved) {
		return unresolved.host, true
	}
	return "", false
}
