package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Client settings. DefaultTimeout is the 10 s of SPEC.md: an attempt with
// no answer by then has failed.
const (
	DefaultTimeout     = 10 * time.Second
	maxResponseRead    = 64 << 10 // read and discarded, so the connection can be reused
	maxResponseHeaders = 64 << 10
	maxIdleConns       = 128
	maxIdlePerHost     = 16
	idleConnTimeout    = 90 * time.Second
)

// Result is the outcome of one delivery attempt, in the shape of the
// webhook test endpoint's answer (API.md). StatusCode is nil when no HTTP
// response arrived; Error is nil on success and otherwise says what failed,
// without the secret or the body.
type Result struct {
	Success        bool    `json:"success"`
	StatusCode     *int    `json:"status_code"`
	ResponseTimeMS int64   `json:"response_time_ms"`
	Error          *string `json:"error"`
}

// Client makes delivery attempts. It is safe for concurrent use; connections
// are kept alive and shared between attempts.
type Client struct {
	policy  Policy
	http    *http.Client
	timeout time.Duration
}

// NewClient returns a Client that resolves hosts with r and dials only
// addresses p allows, checking each address at the moment it is dialled.
// It speaks TLS 1.2 or later with certificate verification against
// p.RootCAs, follows no redirects, uses no proxy, and gives each attempt
// DefaultTimeout.
func NewClient(r Resolver, p Policy) *Client {
	c := &Client{policy: p, timeout: DefaultTimeout}
	d := &dialer{
		resolver: r,
		net: net.Dialer{
			Timeout:   DefaultTimeout,
			KeepAlive: 30 * time.Second,
			Control:   p.control,
		},
	}
	tr := &http.Transport{
		Proxy:                  nil, // a proxy would dial for us, unchecked
		DialContext:            d.dial,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: p.RootCAs},
		TLSHandshakeTimeout:    DefaultTimeout,
		ForceAttemptHTTP2:      true,
		DisableCompression:     true,
		MaxIdleConns:           maxIdleConns,
		MaxIdleConnsPerHost:    maxIdlePerHost,
		IdleConnTimeout:        idleConnTimeout,
		MaxResponseHeaderBytes: maxResponseHeaders,
	}
	c.http = &http.Client{
		Transport: tr,
		// The 3xx is the answer, and a failure: following it would let a
		// public host send us to an internal one.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return c
}

// WithTimeout returns a copy of c, sharing its connections, whose attempts
// fail after d without an answer instead of DefaultTimeout.
func (c *Client) WithTimeout(d time.Duration) *Client {
	cp := *c
	cp.timeout = d
	return &cp
}

// CloseIdleConnections closes kept-alive connections that are not in use.
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

// Deliver encodes ev once (see Encode), signs the body with now's Unix
// time and POSTs it to rawURL. It returns the attempt's Result and the body
// sent, which retries pass to DeliverBody. The error is non-nil only for
// an event that cannot be encoded; a failed delivery is a Result.
func (c *Client) Deliver(ctx context.Context, rawURL, secret string, ev *Event, now time.Time) (Result, []byte, error) {
	body, err := Encode(ev)
	if err != nil {
		return Result{}, nil, err
	}
	return c.DeliverBody(ctx, rawURL, secret, ev.ID, body, now), body, nil
}

// DeliverBody POSTs an encoded event body to rawURL with the delivery headers:
// Content-Type, User-Agent, X-Webhook-Timestamp (now's Unix seconds),
// X-Webhook-Signature (Sign over that timestamp and body) and X-Webhook-Id
// (eventID). A 2xx answer is success; any other status (redirects
// included), a refused or unresolvable address, a network or TLS error or
// no answer within the timeout is a failure described in Result.Error. At
// most 64 KiB of the answer are read, and discarded.
func (c *Client) DeliverBody(ctx context.Context, rawURL, secret, eventID string, body []byte, now time.Time) Result {
	start := time.Now()
	if _, uerr := parseTarget(rawURL, c.policy); uerr != nil {
		return failed(start, nil, uerr.Reason)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, bytes.NewReader(body))
	if err != nil {
		return failed(start, nil, "not a valid URL")
	}
	ts := now.Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderSignature, Sign(secret, ts, body))
	req.Header.Set(HeaderID, eventID)
	resp, err := c.http.Do(req)
	if err != nil {
		return failed(start, nil, c.describe(err))
	}
	// An answer has arrived; a body cut short by the deadline does not
	// change its status.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseRead))
	resp.Body.Close()
	code := resp.StatusCode
	if code >= 200 && code <= 299 {
		return Result{Success: true, StatusCode: &code, ResponseTimeMS: elapsedMS(start)}
	}
	why := "HTTP " + strconv.Itoa(code) + " " + http.StatusText(code)
	if code >= 300 && code <= 399 {
		why += ": redirects are not followed"
	}
	return failed(start, &code, why)
}

func failed(start time.Time, code *int, why string) Result {
	return Result{StatusCode: code, ResponseTimeMS: elapsedMS(start), Error: &why}
}

func elapsedMS(start time.Time) int64 { return time.Since(start).Milliseconds() }

// describe turns a transport error into a short text for the webhook's
// owner: it keeps the cause and drops the request line, which names the
// URL, and resolver details, which name our DNS servers.
func (c *Client) describe(err error) string {
	var refused *refusedError
	var unresolved *resolveError
	var certErr *tls.CertificateVerificationError
	var recErr tls.RecordHeaderError
	var alert tls.AlertError
	var netErr net.Error
	switch {
	case errors.As(err, &refused):
		return "connection refused by policy: " + refused.why
	case errors.As(err, &unresolved):
		return "host " + unresolved.host + " could not be resolved"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return fmt.Sprintf("timeout: no answer within %s", c.timeout)
	case errors.Is(err, context.Canceled):
		return "delivery cancelled"
	case errors.As(err, &certErr):
		return "TLS certificate not trusted: " + certErr.Err.Error()
	case errors.As(err, &recErr), strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return "TLS handshake failed: the server did not answer with TLS"
	case errors.As(err, &alert):
		return "TLS handshake failed: " + alert.Error()
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed by the server before an answer"
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return opErr.Err.Error()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

// refusedError is the dial-time refusal of an address by the policy.
type refusedError struct{ why string }

func (e *refusedError) Error() string { return "webhook: address refused: " + e.why }

// resolveError is a failed lookup of the host to dial.
type resolveError struct {
	host string
	err  error
}

func (e *resolveError) Error() string { return "webhook: resolve " + e.host + ": " + e.err.Error() }
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

// dialer resolves with the configured Resolver (so webhooks use the
// server's --dns-server) and dials the addresses in turn.
type dialer struct {
	resolver Resolver
	net      net.Dialer
}

func (d *dialer) dial(ctx context.Context, network, hostport string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, fmt.Errorf("webhook: dial %s: %w", hostport, err)
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

// LoadCAFile returns the system's trusted certificate authorities plus
// those in the PEM file at path (--webhook-ca-file), for Policy.RootCAs.
// It returns an error when the file cannot be read or holds no certificate.
func LoadCAFile(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("webhook: CA file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool() // no system store: the file alone is trusted
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("webhook: CA file %s holds no PEM certificate", path)
	}
	return pool, nil
}
