package webhook

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/dmarcd/dmarcd/internal/egress"
)

// Client settings. DefaultTimeout is the 10 s of SPEC.md: an attempt with
// no answer by then has failed.
const (
	DefaultTimeout  = 10 * time.Second
	maxResponseRead = 64 << 10 // read and discarded, so the connection can be reused
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

// Client makes delivery attempts through an egress.Client: the outbound
// address policy, TLS and connection reuse are egress's. It is safe for
// concurrent use; connections are kept alive and shared between attempts.
type Client struct {
	out *egress.Client
}

// NewClient returns a Client that resolves hosts with r and dials only
// addresses p allows (egress.NewClient), giving each attempt
// DefaultTimeout.
func NewClient(r egress.Resolver, p egress.Policy) *Client {
	return &Client{out: egress.NewClient(r, p).WithTimeout(DefaultTimeout)}
}

// WithTimeout returns a copy of c, sharing its connections, whose attempts
// fail after d without an answer instead of DefaultTimeout.
func (c *Client) WithTimeout(d time.Duration) *Client {
	return &Client{out: c.out.WithTimeout(d)}
}

// CloseIdleConnections closes kept-alive connections that are not in use.
func (c *Client) CloseIdleConnections() { c.out.CloseIdleConnections() }

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
	if err := c.out.CheckURL(rawURL); err != nil {
		return failed(start, nil, c.out.Describe(err))
	}
	ctx, cancel := context.WithTimeout(ctx, c.out.Timeout())
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
	resp, err := c.out.Do(req)
	if err != nil {
		return failed(start, nil, c.out.Describe(err))
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
