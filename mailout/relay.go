package mailout

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/dmarcd/dmarcd/internal/egress"
)

// TLS modes of the relay connection (--mail-relay-tls).
const (
	// TLSStartTLS: plain connection, then STARTTLS before anything else
	// (submission, port 587). A relay that offers no STARTTLS is an error.
	TLSStartTLS = "starttls"
	// TLSImplicit: TLS from the first byte (port 465).
	TLSImplicit = "tls"
	// TLSNone: no encryption; allowed only for a relay on loopback.
	TLSNone = "none"
)

// DefaultTimeout bounds one whole send (connect, TLS, AUTH, the message).
const DefaultTimeout = 60 * time.Second

// RelayConfig is the relay dmarcd sends through (serve's --mail-relay-*).
type RelayConfig struct {
	// Addr is host:port of the relay.
	Addr string
	// TLS is TLSStartTLS, TLSImplicit or TLSNone ("" means TLSStartTLS).
	TLS string
	// User and Password sign in with AUTH PLAIN when User is set; only
	// over TLS or to a loopback relay.
	User     string
	Password string
	// From is the envelope sender and From header (--mail-from).
	From string
	// HelloName is the name dmarcd greets the relay with (EHLO); "" means
	// "localhost".
	HelloName string
	// Resolver and Policy dial the relay (internal/egress). The policy's
	// AllowPrivate must be set for a relay on a private or loopback
	// address; NewRelay sets it for TLSNone, whose relay is on loopback.
	Resolver egress.Resolver
	Policy   egress.Policy
	// Timeout bounds one send; 0 means DefaultTimeout.
	Timeout time.Duration
}

// Relay sends built messages through the configured relay, one
// connection per message. It is safe for concurrent use. Its String
// names the relay, never the password.
type Relay struct {
	cfg  RelayConfig
	host string
	dial egress.DialFunc
}

// NewRelay checks cfg and returns its Relay. It refuses (with an error
// naming the flag) a malformed address, an unknown TLS mode, TLSNone for
// a relay that is not on loopback (an IP loopback address or
// "localhost"), a missing or malformed From, and a password without a
// user.
func NewRelay(cfg RelayConfig) (*Relay, error) {
	host, port, err := net.SplitHostPort(cfg.Addr)
	if err != nil || host == "" || port == "" {
		return nil, fmt.Errorf("--mail-relay %q: want host:port, e.g. smtp.example.net:587", cfg.Addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return nil, fmt.Errorf("--mail-relay %q: bad port", cfg.Addr)
	}
	if cfg.TLS == "" {
		cfg.TLS = TLSStartTLS
	}
	switch cfg.TLS {
	case TLSStartTLS, TLSImplicit:
	case TLSNone:
		if !isLoopback(host) {
			return nil, fmt.Errorf("--mail-relay-tls none sends mail (and any password) in clear text: it is allowed only for a relay on loopback "+
				"(127.0.0.1, ::1 or localhost), not %s; use starttls (port 587) or tls (port 465)", host)
		}
		cfg.Policy.AllowPrivate = true
	default:
		return nil, fmt.Errorf("--mail-relay-tls %q: want starttls, tls or none", cfg.TLS)
	}
	if _, err := ParseAddress(cfg.From); err != nil {
		return nil, fmt.Errorf("--mail-from %q: want a bare address such as dmarcd@example.net", cfg.From)
	}
	if cfg.Password != "" && cfg.User == "" {
		return nil, errors.New("a relay password without --mail-relay-user")
	}
	if cfg.HelloName == "" {
		cfg.HelloName = "localhost"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Resolver == nil {
		cfg.Resolver = egress.SystemResolver{}
	}
	return &Relay{cfg: cfg, host: host, dial: egress.NewDialer(cfg.Resolver, cfg.Policy, 0)}, nil
}

// isLoopback reports whether host names this machine: a loopback address
// or "localhost" (which the egress dialer resolves; a "localhost" that
// resolves elsewhere is refused when it is dialled).
func isLoopback(host string) bool {
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// String names the relay for logs: address and TLS mode, never the
// password.
func (r *Relay) String() string { return r.cfg.Addr + " (" + r.cfg.TLS + ")" }

// From is the sender address (--mail-from).
func (r *Relay) From() string { return r.cfg.From }

// Host is the relay's host name, the Message-ID host when --public-url is
// not set.
func (r *Relay) Host() string { return r.host }

// SendError is a failed send. Permanent is a 5xx answer of the relay:
// sending again will not help. Anything else (a 4xx answer, a network
// error, a timeout) is temporary.
type SendError struct {
	// Code is the relay's reply code; 0 when none came (network, TLS).
	Code      int
	Permanent bool
	// Stage is what was under way: connect, tls, auth, mail, rcpt, data.
	Stage string
	Err   error
}

func (e *SendError) Error() string {
	return "mail relay: " + e.Stage + ": " + e.Err.Error()
}

func (e *SendError) Unwrap() error { return e.Err }

// IsPermanent reports whether err is a SendError the relay answered with
// a 5xx code.
func IsPermanent(err error) bool {
	se, ok := errors.AsType[*SendError](err)
	return ok && se.Permanent
}

// sendErr classifies err as the relay's answer at stage.
func sendErr(stage string, err error) *SendError {
	se := &SendError{Stage: stage, Err: err}
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		se.Stage = "tls"
	}
	if smtpErr, ok := errors.AsType[*smtp.SMTPError](err); ok {
		se.Code = smtpErr.Code
		se.Permanent = smtpErr.Code >= 500 && smtpErr.Code < 600
	}
	return se
}

// Receipt is a send the relay acknowledged (250 after DATA).
type Receipt struct {
	// Reply is the text of the relay's final answer (often its queue id).
	Reply string
}

// Send delivers msg (built by Build) to rcpt through the relay: connect
// through the egress dialer, TLS as configured (certificates verified
// against the policy's roots), AUTH PLAIN when a user is set, MAIL FROM
// the configured sender, RCPT TO, DATA. The Receipt means the relay
// answered 250 to the message; anything else is a *SendError.
func (r *Relay) Send(ctx context.Context, rcpt string, msg []byte) (*Receipt, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	conn, err := r.dial(ctx, "tcp", r.cfg.Addr)
	if err != nil {
		return nil, sendErr("connect", err)
	}
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if r.cfg.TLS == TLSNone {
		if ap, err := netip.ParseAddrPort(conn.RemoteAddr().String()); err != nil || !ap.Addr().Unmap().IsLoopback() {
			conn.Close()
			return nil, sendErr("connect", fmt.Errorf("--mail-relay-tls none: %s is not on loopback", conn.RemoteAddr()))
		}
	}
	tlsCfg := r.cfg.Policy.TLSConfig(r.host)
	var c *smtp.Client
	switch r.cfg.TLS {
	case TLSImplicit:
		tc := tls.Client(conn, tlsCfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, sendErr("tls", err)
		}
		c = smtp.NewClient(tc)
	case TLSStartTLS:
		if c, err = smtp.NewClientStartTLS(conn, tlsCfg); err != nil {
			return nil, sendErr("tls", err)
		}
	default:
		c = smtp.NewClient(conn)
	}
	defer c.Close()
	if err := c.Hello(r.cfg.HelloName); err != nil {
		return nil, sendErr("hello", err)
	}
	if r.cfg.User != "" {
		if err := c.Auth(sasl.NewPlainClient("", r.cfg.User, r.cfg.Password)); err != nil {
			return nil, sendErr("auth", err)
		}
	}
	if err := c.Mail(r.cfg.From, nil); err != nil {
		return nil, sendErr("mail", err)
	}
	if err := c.Rcpt(rcpt, nil); err != nil {
		return nil, sendErr("rcpt", err)
	}
	w, err := c.Data()
	if err != nil {
		return nil, sendErr("data", err)
	}
	if _, err := w.Write(msg); err != nil {
		return nil, sendErr("data", err)
	}
	resp, err := w.CloseWithResponse()
	if err != nil {
		return nil, sendErr("data", err)
	}
	_ = c.Quit() // the message is the relay's already
	return &Receipt{Reply: resp.StatusText}, nil
}
