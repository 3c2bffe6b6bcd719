package imap

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/dmarcd/dmarcd/internal/egress"
)

// Conn is one signed-in connection to a mailbox's server. It is used by
// one goroutine at a time.
type Conn struct {
	c       *imapclient.Client
	raw     net.Conn
	opts    *Options
	acct    Account
	newMail chan struct{} // a token when the server announced new messages
	caps    imap.CapSet   // after sign-in
	// delim is the server's hierarchy delimiter (LIST "" ""), asked once
	// when delimKnown is false; 0 for a flat server.
	delim      rune
	delimKnown bool

	// dog closes the connection when a step overruns its deadline: the
	// client library sets read deadlines of its own, so this is what
	// bounds every step; timedOut records why the connection closed.
	dogMu    sync.Mutex
	dog      *time.Timer
	timedOut atomic.Bool
}

// Error is a failure of a step with a readable description, such as
// "login failed: AUTHENTICATIONFAILED: Authentication failed.".
type Error struct {
	Step string // "connect", "login", "select INBOX", "fetch", "move", ...
	Msg  string
	Err  error
}

func (e *Error) Error() string { return e.Step + " failed: " + e.Msg }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// IsAuthFailure reports whether err is a refused sign-in (a wrong password
// or token), as opposed to a server that could not be reached.
func IsAuthFailure(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Step == "login"
}

func (o *Options) stepError(step string, err error) *Error {
	return &Error{Step: step, Msg: describe(err, o.timeout()), Err: err}
}

// describe turns an error into a short text for the mailbox's owner.
func describe(err error, timeout time.Duration) string {
	var imapErr *imap.Error
	var certErr *tls.CertificateVerificationError
	var hostErr x509HostnameError
	var netErr net.Error
	var recErr tls.RecordHeaderError
	var tokErr *TokenError
	switch {
	case errors.As(err, &tokErr):
		return tokErr.Error()
	case errors.As(err, &imapErr):
		if imapErr.Code != "" {
			return string(imapErr.Code) + ": " + imapErr.Text
		}
		return imapErr.Text
	}
	if why, ok := egress.RefusedReason(err); ok {
		return "connection refused by policy: " + why + " (see --imap-allow-private)"
	}
	if host, ok := egress.UnresolvedHost(err); ok {
		return "host " + host + " could not be resolved"
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return fmt.Sprintf("timeout: no answer within %s", timeout)
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.As(err, &certErr):
		return "TLS certificate not trusted: " + certErr.Err.Error()
	case errors.As(err, &hostErr):
		return "TLS certificate not trusted: " + err.Error()
	case errors.As(err, &recErr):
		return "TLS handshake failed: the server did not answer with TLS"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return "connection closed by the server"
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return opErr.Err.Error()
	}
	return err.Error()
}

// x509HostnameError is matched by its method set, to avoid importing x509
// for one type switch.
type x509HostnameError interface {
	error
	Host() string
}

// deadline gives the next step d: the connection's deadline, and the
// watchdog that closes it should the step still run then.
func (c *Conn) deadline(d time.Duration) {
	_ = c.raw.SetDeadline(time.Now().Add(d))
	c.dogMu.Lock()
	defer c.dogMu.Unlock()
	if c.dog == nil {
		c.dog = time.AfterFunc(d, func() { c.timedOut.Store(true); _ = c.raw.Close() })
		return
	}
	c.dog.Reset(d)
}

// stepError describes err of step, as a timeout when the watchdog fired.
func (c *Conn) stepError(step string, err error) *Error {
	if c.timedOut.Load() {
		return &Error{Step: step, Msg: fmt.Sprintf("timeout: no answer within %s", c.opts.timeout()), Err: err}
	}
	return c.opts.stepError(step, err)
}

// watch closes the connection when ctx ends, so a blocked call returns.
func (c *Conn) watch(ctx context.Context) (stop func() bool) {
	return context.AfterFunc(ctx, func() { _ = c.raw.Close() })
}

// Dial connects to acct's server as its Security says (never falling back
// from TLS), checks the certificate against opts.RootCAs, and signs in with
// the password or, with OAuth2 credentials, SASL XOAUTH2 with a token from
// tokens (nil: a fresh one). Every address dialled is checked against the
// address policy. Errors are *Error with a readable message.
func Dial(ctx context.Context, acct Account, opts *Options, tokens *TokenSource) (*Conn, error) {
	if opts == nil {
		opts = &Options{}
	}
	switch acct.Security {
	case SecurityTLS, SecurityStartTLS:
	case SecurityPlain:
		if !opts.AllowPlaintext {
			return nil, &Error{Step: "connect", Msg: "security plain is not allowed on this server (--imap-allow-plaintext)"}
		}
	default:
		return nil, &Error{Step: "connect", Msg: "security must be tls, starttls or plain"}
	}
	t := opts.timeout()
	dctx, cancel := context.WithTimeout(ctx, t)
	defer cancel()
	addr := net.JoinHostPort(acct.Host, strconv.Itoa(acct.Port))
	raw, err := egress.NewDialer(opts.resolver(), opts.policy(), t)(dctx, "tcp", addr)
	if err != nil {
		return nil, opts.stepError("connect", err)
	}
	c := &Conn{raw: raw, opts: opts, acct: acct, newMail: make(chan struct{}, 1)}
	stop := c.watch(ctx)
	defer stop()
	c.deadline(t)
	tlsCfg := opts.policy().TLSConfig(acct.Host)
	copts := &imapclient.Options{
		TLSConfig: tlsCfg,
		UnilateralDataHandler: &imapclient.UnilateralDataHandler{
			Mailbox: func(d *imapclient.UnilateralDataMailbox) {
				if d.NumMessages != nil {
					select {
					case c.newMail <- struct{}{}:
					default:
					}
				}
			},
		},
	}
	switch acct.Security {
	case SecurityTLS:
		tc := tls.Client(raw, tlsCfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			c.abort0()
			return nil, c.stepError("connect", err)
		}
		c.c = imapclient.New(tc, copts)
	case SecurityStartTLS:
		c.c, err = imapclient.NewStartTLS(raw, copts)
		if err != nil {
			c.abort0()
			return nil, c.stepError("STARTTLS", err)
		}
	default:
		c.c = imapclient.New(raw, copts)
	}
	if err := c.c.WaitGreeting(); err != nil {
		c.abort()
		return nil, c.stepError("connect", err)
	}
	c.deadline(t)
	if err := c.login(ctx, tokens); err != nil {
		c.Close()
		return nil, err
	}
	// Capabilities change with sign-in (IDLE, MOVE are often announced only
	// then); ask once instead of trusting what the greeting said.
	c.deadline(t)
	caps, err := c.c.Capability().Wait()
	if err != nil {
		c.Close()
		return nil, c.stepError("capability", err)
	}
	c.caps = caps
	return c, nil
}

func (c *Conn) login(ctx context.Context, tokens *TokenSource) error {
	if c.c.State() == imap.ConnStateAuthenticated {
		return nil // PREAUTH over implicit TLS
	}
	creds := c.acct.Credentials
	if creds.OAuth2 == nil {
		if c.c.Caps().Has(imap.CapLoginDisabled) {
			return &Error{Step: "login", Msg: "the server refuses LOGIN on this connection (LOGINDISABLED)"}
		}
		c.deadline(c.opts.timeout())
		if err := c.c.Login(c.acct.Username, creds.Password).Wait(); err != nil {
			return c.stepError("login", err)
		}
		return nil
	}
	if tokens == nil {
		tokens = NewTokenSource(*creds.OAuth2, c.opts)
	}
	tok, err := tokens.Token(ctx)
	if err != nil {
		return c.stepError("login", err)
	}
	c.deadline(c.opts.timeout())
	sc := &xoauth2Client{user: c.acct.Username, token: tok}
	if err := c.c.Authenticate(sc); err != nil {
		if sc.serverSaid != "" {
			return &Error{Step: "login", Msg: describe(err, c.opts.timeout()) + " (" + sc.serverSaid + ")", Err: err}
		}
		return c.stepError("login", err)
	}
	return nil
}

// logoutWait bounds the LOGOUT of Close.
const logoutWait = 2 * time.Second

// Close logs out, waiting at most logoutWait (a broken connection never
// answers), and closes the connection.
func (c *Conn) Close() {
	_ = c.raw.SetDeadline(time.Now().Add(logoutWait))
	done := make(chan struct{})
	go func() { _ = c.c.Logout().Wait(); close(done) }()
	t := time.NewTimer(logoutWait)
	select {
	case <-done:
	case <-t.C:
	}
	t.Stop()
	c.abort()
}

// abort0 closes a connection that has no client yet.
func (c *Conn) abort0() {
	c.dogMu.Lock()
	if c.dog != nil {
		c.dog.Stop()
	}
	c.dogMu.Unlock()
	_ = c.raw.Close()
}

// abort closes the connection without a word.
func (c *Conn) abort() {
	c.dogMu.Lock()
	if c.dog != nil {
		c.dog.Stop()
	}
	c.dogMu.Unlock()
	_ = c.c.Close()
	_ = c.raw.Close()
}

// CanIdle reports whether the server offers IDLE.
func (c *Conn) CanIdle() bool {
	return c.c.Caps().Has(imap.CapIdle) || c.c.Caps().Has(imap.CapIMAP4rev2)
}

// Check connects and signs in to acct, selects its folder, makes sure its
// archive folder exists (CheckArchiveFolder) and signs out: what is tried
// before a mailbox is saved.
func Check(ctx context.Context, acct Account, opts *Options) error {
	c, err := Dial(ctx, acct, opts, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	stop := c.watch(ctx)
	defer stop()
	c.deadline(c.opts.timeout())
	if _, err := c.c.Select(acct.Folder, &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		return c.stepError("select "+acct.Folder, err)
	}
	return c.CheckArchiveFolder()
}

// Idle waits, with IDLE, until the server announces new messages, d
// passes, wake receives or ctx ends; it returns whether new mail was
// announced. The folder must be selected (by a Poll).
func (c *Conn) Idle(ctx context.Context, d time.Duration, wake <-chan struct{}) (bool, error) {
	select {
	case <-c.newMail: // announced during the poll
		return true, nil
	default:
	}
	stop := c.watch(ctx)
	defer stop()
	// A NOOP first collects what arrived since the poll: some servers
	// announce only changes made after IDLE begins.
	c.deadline(c.opts.timeout())
	if err := c.c.Noop().Wait(); err != nil {
		return false, c.stepError("noop", err)
	}
	select {
	case <-c.newMail:
		return true, nil
	default:
	}
	c.deadline(c.opts.timeout())
	cmd, err := c.c.Idle()
	if err != nil {
		return false, c.stepError("idle", err)
	}
	// The server stays silent while idling; keep the deadline past d.
	c.deadline(d + c.opts.timeout())
	timer := time.NewTimer(d)
	defer timer.Stop()
	got := false
	select {
	case <-c.newMail:
		got = true
	case <-timer.C:
	case <-wake:
	case <-ctx.Done():
	case <-c.c.Closed():
	}
	c.deadline(c.opts.timeout())
	if err := cmd.Close(); err != nil {
		return got, c.stepError("idle", err)
	}
	if err := cmd.Wait(); err != nil {
		return got, c.stepError("idle", err)
	}
	if ctx.Err() != nil {
		return got, ctx.Err()
	}
	return got, nil
}
