package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// DefaultTimeout bounds one connection attempt (and a TLS handshake) when
// the caller gives none.
const DefaultTimeout = 10 * time.Second

// Resolver looks up the addresses of a host name; dnscheck.Resolver (the
// server's --dns-server) is one, SystemResolver another.
type Resolver interface {
	LookupAddrs(ctx context.Context, host string) ([]netip.Addr, error)
}

// SystemResolver resolves with the operating system's resolver, for a
// client that was given none.
type SystemResolver struct{}

// LookupAddrs returns the IPv4 and IPv6 addresses of host.
func (SystemResolver) LookupAddrs(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// DialFunc dials network addresses the way net.Dialer.DialContext does.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// NewDialer returns the dialer of every outbound client: it resolves host
// names with r, tries the addresses in turn, and checks every address
// against p at the moment it is dialled, so a name that resolves to a
// private address later (DNS rebinding) is still refused. timeout bounds
// one connection attempt; 0 means DefaultTimeout. A refusal is an error
// RefusedReason recognizes; a failed lookup, one UnresolvedHost does.
//
// A new TCP client (a mail relay, say) needs nothing else:
//
//	conn, err := egress.NewDialer(resolver, policy, timeout)(ctx, "tcp", "relay.example.net:587")
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

// refusedError is the dial-time refusal of an address by the policy.
type refusedError struct{ why string }

func (e *refusedError) Error() string { return "egress: address refused: " + e.why }

// resolveError is a failed lookup of the host to dial.
type resolveError struct {
	host string
	err  error
}

func (e *resolveError) Error() string { return "egress: resolve " + e.host + ": " + e.err.Error() }
func (e *resolveError) Unwrap() error { return e.err }

// control runs after the socket is made and before it connects, with the
// address really being dialled: whatever resolved to it, this is the last
// word.
func (p Policy) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &refusedError{why: "cannot read the address " + address}
	}
	if why := p.refusal(ap.Addr()); why != "" {
		return &refusedError{why: ap.Addr().String() + " is " + why}
	}
	return nil
}

// dialer resolves with the configured Resolver (so outbound clients use
// the server's --dns-server) and dials the addresses in turn.
type dialer struct {
	resolver Resolver
	net      net.Dialer
}

func (d *dialer) dial(ctx context.Context, network, hostport string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, fmt.Errorf("egress: dial %s: %w", hostport, err)
	}
	addrs, err := d.lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	var firstRefusal, lastErr error
	for _, a := range addrs {
		conn, err := d.net.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return conn, nil
		}
		var refused *refusedError
		if errors.As(err, &refused) {
			if firstRefusal == nil {
				firstRefusal = err
			}
		} else {
			lastErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	if lastErr != nil {
		return nil, lastErr
	}
	return nil, firstRefusal
}

func (d *dialer) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	addrs, err := d.resolver.LookupAddrs(ctx, host)
	if err == nil && len(addrs) == 0 {
		err = errors.New("no addresses")
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &resolveError{host: host, err: err}
	}
	return addrs, nil
}
