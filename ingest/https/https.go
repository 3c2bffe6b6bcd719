// Package https is the HTTPS way in for SMTP TLS reports (RFC 8460
// section 5.3.1): a sending mail server POSTs a report, gzip or plain
// JSON, to <public-url>/tlsrpt/<local part of the reporting address>. The
// handler finds the domain by that local part (the address is the secret:
// there is no API key), reads at most MaxBytes of the body, and hands it
// to the ingest pipeline (Pipeline.Ingest, source ingest.SourceHTTPS),
// which stores it in its group commit before the answer, like every way in.
//
// Answers: 201 when a report was stored, 200 when it was stored already
// (RFC 8460 asks for 2xx either way); 400 with the reason for a body that
// holds no TLS report that can be stored (nothing is quarantined: the
// sender is told); 404 for an unknown local part; 413 for a body over
// MaxBytes, which is not read further; 429 past the per-IP rate limit;
// 503 while the server stops, 500 when the store fails (the sender
// retries either way). Error bodies are the API's ({"error": {"code",
// "message", "details"}}).
package https

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/internal/clientaddr"
	"github.com/dmarcd/dmarcd/store"
)

// Defaults of Config.
const (
	DefaultMaxBytes  = 1 << 20 // RFC 8460 asks receivers to take at least this; API.md caps at it
	DefaultRateLimit = 60      // reports per minute per client IP address
	DefaultTimeout   = 30 * time.Second
	// PathPrefix is where the handler is mounted.
	PathPrefix = "/tlsrpt/"
)

// Config configures a Handler. Ingest and Store are required.
type Config struct {
	// Ingest stores one input (Pipeline.Ingest).
	Ingest ingest.IngestFunc
	// Store finds the domain of a local part.
	Store *store.DB
	// ReportingDomain is preferred when a local part exists at several
	// domains (an address kept from an earlier --reporting-domain).
	ReportingDomain string
	// MaxBytes caps a request body; 0 means DefaultMaxBytes.
	MaxBytes int64
	// RateLimit is the POSTs allowed per minute per client IP address (a
	// token bucket with that burst); 0 means DefaultRateLimit.
	RateLimit int
	// Timeout bounds the ingest of one report; 0 means DefaultTimeout.
	Timeout time.Duration
	Logger  *slog.Logger
	// Now is the clock of the rate limit; nil means time.Now.
	Now func() time.Time
}

// Handler serves POST /tlsrpt/<local part>. It is safe for concurrent use.
type Handler struct {
	cfg   Config
	log   *slog.Logger
	limit *ipLimiter
}

// New returns a handler. Errors: a missing Ingest or Store.
func New(cfg Config) (*Handler, error) {
	if cfg.Ingest == nil || cfg.Store == nil {
		return nil, errors.New("https: Config.Ingest and Config.Store are required")
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.RateLimit <= 0 {
		cfg.RateLimit = DefaultRateLimit
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Handler{cfg: cfg, log: cfg.Logger, limit: newIPLimiter(cfg.RateLimit)}, nil
}

// Answer is the body of a 2xx answer.
type Answer struct {
	Stored     int `json:"stored"`     // TLS reports stored now
	Duplicates int `json:"duplicates"` // TLS reports stored before
}

// ServeHTTP handles one POST (see the package documentation).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "use POST")
		return
	}
	ip := clientaddr.Of(r) // behind a trusted proxy, the forwarded address
	if ok, wait := h.limit.take(ip, h.cfg.Now()); !ok {
		w.Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
		writeError(w, http.StatusTooManyRequests, "rate_limited", "too many reports from this address, retry later")
		return
	}
	local := strings.TrimPrefix(r.URL.Path, PathPrefix)
	dom, err := h.domain(local)
	if err != nil {
		h.log.Error("tlsrpt post: finding the domain", "error", err)
		writeError(w, http.StatusInternalServerError, "internal", "try again later")
		return
	}
	if dom == nil {
		writeError(w, http.StatusNotFound, "not_found", "no such reporting address")
		return
	}
	if r.ContentLength > h.cfg.MaxBytes {
		h.tooLarge(w, ip, dom)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBytes))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		h.tooLarge(w, ip, dom)
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, "bad_request", "reading the body: "+err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	res, err := h.cfg.Ingest(ctx, bytes.NewReader(body), ingest.Arrival{
		Source: ingest.SourceHTTPS, Recipient: dom.ReportingEmail, Name: "POST " + PathPrefix + local + " from " + ip})
	if err != nil {
		h.log.Warn("tlsrpt post not stored", "remote", ip, "domain", dom.Name, "error", err)
		if errors.Is(err, ingest.ErrStopped) || errors.Is(err, context.DeadlineExceeded) {
			w.Header().Set("Retry-After", "60")
			writeError(w, http.StatusServiceUnavailable, "not_ready", "the report could not be stored now, try again later")
			return
		}
		writeError(w, http.StatusInternalServerError, "internal", "the report could not be stored, try again later")
		return
	}
	var a Answer
	for _, o := range res.Reports {
		if o.Duplicate {
			a.Duplicates++
		} else {
			a.Stored++
		}
	}
	switch {
	case a.Stored > 0:
		writeJSON(w, http.StatusCreated, a)
	case a.Duplicates > 0:
		writeJSON(w, http.StatusOK, a)
	default:
		h.log.Info("tlsrpt post refused", "remote", ip, "domain", dom.Name, "bytes", len(body), "reason", res.Reason)
		msg := res.Reason
		if !strings.HasPrefix(msg, "no TLS report") {
			msg = "no TLS report that can be stored: " + msg
		}
		writeError(w, http.StatusBadRequest, "bad_request", msg)
	}
}

func (h *Handler) tooLarge(w http.ResponseWriter, ip string, dom *store.Domain) {
	h.log.Info("tlsrpt post refused: too large", "remote", ip, "domain", dom.Name, "max_bytes", h.cfg.MaxBytes)
	// The rest of the body is not read: the connection is closed after
	// the answer.
	w.Header().Set("Connection", "close")
	writeError(w, http.StatusRequestEntityTooLarge, "payload_too_large", fmt.Sprintf("a report may have at most %d bytes", h.cfg.MaxBytes))
}

// domain returns the domain of a local part, nil when there is none (or
// it is ambiguous and none is at the reporting domain).
func (h *Handler) domain(local string) (*store.Domain, error) {
	if !validLocal(local) {
		return nil, nil
	}
	doms, err := h.cfg.Store.DomainsByReportingLocal(local)
	if err != nil || len(doms) <= 1 {
		if len(doms) == 1 {
			return doms[0], err
		}
		return nil, err
	}
	for _, d := range doms {
		if _, host, _ := strings.Cut(d.ReportingEmail, "@"); strings.EqualFold(host, h.cfg.ReportingDomain) {
			return d, nil
		}
	}
	return nil, nil
}

// validLocal accepts the local parts dmarcd hands out, and the usual
// dot-atom characters, up to 64 octets.
func validLocal(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(".-_+", c) >= 0) {
			return false
		}
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError writes the API's error body (API.md).
func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"code": code, "message": msg, "details": []string{}}})
}

// ipLimiter is a token bucket per client address: burst perMinute,
// refilled perMinute a minute. Buckets that are full again are forgotten
// when the map grows, so it stays bounded by the addresses active within
// about a minute.
type ipLimiter struct {
	mu        sync.Mutex
	perMinute float64
	buckets   map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

const maxBuckets = 10000

func newIPLimiter(perMinute int) *ipLimiter {
	return &ipLimiter{perMinute: float64(perMinute), buckets: map[string]*bucket{}}
}

// take spends a token of ip; when there is none it says how long until
// there is.
func (l *ipLimiter) take(ip string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	rate := l.perMinute / 60 // tokens per second
	b := l.buckets[ip]
	if b == nil {
		if len(l.buckets) >= maxBuckets {
			l.sweep(now, rate)
		}
		b = &bucket{tokens: l.perMinute, at: now}
		l.buckets[ip] = b
	}
	b.tokens = min(l.perMinute, b.tokens+now.Sub(b.at).Seconds()*rate)
	b.at = now
	if b.tokens < 1 {
		return false, time.Duration((1 - b.tokens) / rate * float64(time.Second))
	}
	b.tokens--
	return true, 0
}

// sweep forgets the buckets that have refilled; if that is not enough,
// half of the others go (an attacker spraying addresses gains little:
// each address gets one burst anyway).
func (l *ipLimiter) sweep(now time.Time, rate float64) {
	for ip, b := range l.buckets {
		if b.tokens+now.Sub(b.at).Seconds()*rate >= l.perMinute {
			delete(l.buckets, ip)
		}
	}
	if len(l.buckets) < maxBuckets {
		return
	}
	n := 0
	for ip := range l.buckets {
		if n >= maxBuckets/2 {
			break
		}
		delete(l.buckets, ip)
		n++
	}
}
