package egress

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// UserAgent is the User-Agent of Client.Get (a webhook delivery sends its
// own, SPEC.md's).
const UserAgent = "dmarcd"

// Transport settings of NewClient: connections are kept alive and shared.
const (
	maxResponseHeaders = 64 << 10
	maxIdleConns       = 128
	maxIdlePerHost     = 16
	idleConnTimeout    = 90 * time.Second
)

// NewTransport returns an HTTP transport under p: it dials with
// NewDialer(r, p, timeout), speaks TLS per p.TLSConfig with a handshake
// bounded by timeout (0 means DefaultTimeout), and uses no proxy. The
// caller sizes its connection pool; an HTTP client of its own (ClickHouse
// over HTTP, say) is
//
//	&http.Client{Transport: egress.NewTransport(resolver, policy, timeout)}
//
// plus, unless it wants redirects followed within its own policy,
// CheckRedirect returning http.ErrUseLastResponse.
func NewTransport(r Resolver, p Policy, timeout time.Duration) *http.Transport {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &http.Transport{
		Proxy:               nil, // a proxy would dial for us, unchecked
		DialContext:         NewDialer(r, p, timeout),
		TLSClientConfig:     p.TLSConfig(""),
		TLSHandshakeTimeout: timeout,
	}
}

// noRedirects makes a 3xx the answer: following it would let a public host
// send us to an internal one.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Client makes HTTPS requests under a Policy: webhook deliveries and
// MTA-STS policy fetches. It is safe for concurrent use; connections are
// kept alive and shared between requests and between the copies
// WithTimeout makes.
type Client struct {
	policy  Policy
	http    *http.Client
	timeout time.Duration
}

// NewClient returns a Client that resolves hosts with r and dials only
// addresses p allows, checking each address at the moment it is dialled.
// It speaks TLS 1.2 or later with certificate verification against
// p.RootCAs, follows no redirects, uses no proxy, asks for no compression,
// and gives each connection attempt and request DefaultTimeout.
func NewClient(r Resolver, p Policy) *Client {
	tr := NewTransport(r, p, DefaultTimeout)
	tr.ForceAttemptHTTP2 = true
	tr.DisableCompression = true
	tr.MaxIdleConns = maxIdleConns
	tr.MaxIdleConnsPerHost = maxIdlePerHost
	tr.IdleConnTimeout = idleConnTimeout
	tr.MaxResponseHeaderBytes = maxResponseHeaders
	return &Client{policy: p, timeout: DefaultTimeout,
		http: &http.Client{Transport: tr, CheckRedirect: noRedirects}}
}

// WithTimeout returns a copy of c, sharing its connections, whose requests
// fail after d without an answer instead of DefaultTimeout.
func (c *Client) WithTimeout(d time.Duration) *Client {
	cp := *c
	cp.timeout = d
	return &cp
}

// Timeout is how long a request of c waits for an answer.
func (c *Client) Timeout() time.Duration { return c.timeout }

// CheckURL makes the checks of ValidateURL that need no DNS under c's
// policy (see CheckURL): a request to a URL it refuses would fail anyway,
// at dial time at the latest, with a less helpful reason.
func (c *Client) CheckURL(raw string) error { return CheckURL(raw, c.policy) }

// Do sends req as http.Client.Do does, under c's policy. The caller bounds
// it with req's context (see Timeout) and closes the body.
func (c *Client) Do(req *http.Request) (*http.Response, error) { return c.http.Do(req) }

// CloseIdleConnections closes kept-alive connections that are not in use.
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

// Get fetches rawURL (https only) under c's policy, with no redirects
// followed, and returns the status, the Content-Type and at most max bytes
// of the body; a longer body is an error. The context bounds the whole fetch. Errors are short texts
// for a person (see Describe). It serves check-tls, which fetches MTA-STS
// policy files.
func (c *Client) Get(ctx context.Context, rawURL string, max int64) (int, string, []byte, error) {
	if err := c.CheckURL(rawURL); err != nil {
		return 0, "", nil, errors.New(c.Describe(err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return 0, "", nil, errors.New("not a valid URL")
	}
	req.Header.Set("User-Agent", UserAgent)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, "", nil, errors.New(c.Describe(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return resp.StatusCode, "", nil, errors.New(c.Describe(err))
	}
	if int64(len(body)) > max {
		return resp.StatusCode, "", nil, errors.New("the body is larger than allowed")
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), body, nil
}

// Describe turns an error of a request by c into a short text for the
// person who named the URL: it keeps the cause and drops the request line,
// which names the URL, and resolver details, which name our DNS servers.
func (c *Client) Describe(err error) string {
	var uerr *URLError
	var refused *refusedError
	var unresolved *resolveError
	var certErr *tls.CertificateVerificationError
	var recErr tls.RecordHeaderError
	var alert tls.AlertError
	var netErr net.Error
	switch {
	case errors.As(err, &uerr):
		return uerr.Reason
	case errors.As(err, &refused):
		return "connection refused by policy: " + refused.why
	case errors.As(err, &unresolved):
		return "host " + unresolved.host + " could not be resolved"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return fmt.Sprintf("timeout: no answer within %s", c.timeout)
	case errors.Is(err, context.Canceled):
		return "request cancelled"
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
