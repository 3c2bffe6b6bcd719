// Package httpapi serves the REST API of SPEC.md and API.md: routes,
// authentication, rate limits, request decoding, error bodies and JSON
// encoding. Business rules live in the packages it calls.
package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/dmarcd/dmarcd/dnscheck"
	imapin "github.com/dmarcd/dmarcd/ingest/imap"
	"github.com/dmarcd/dmarcd/internal/clientaddr"
	"github.com/dmarcd/dmarcd/metrics"
	"github.com/dmarcd/dmarcd/senders"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/webhook"
)

// DNSChecker is what the API needs of DNS: the domain verification and
// check-dmarc logic of package dnscheck.
type DNSChecker interface {
	CheckDMARC(ctx context.Context, domain string) (*dnscheck.CheckResult, error)
	Verify(ctx context.Context, domain, reportingEmail string) error
	SuggestRecord(ctx context.Context, domain, reportingEmail string) (dnscheck.Suggestion, error)
}

// Config holds what a Server is built from.
type Config struct {
	Store           *store.DB
	DNS             DNSChecker
	ReportingDomain string            // the domain of every reporting address
	RateLimit       int               // requests per minute per key; 0 means 100
	AuthFailLimit   int               // failed authentications per minute per client address; 0 means 30
	DNSTimeout      time.Duration     // budget of the DNS work of one request; 0 means 10s
	Logger          *slog.Logger      // nil discards
	Metrics         *metrics.Registry // nil creates a private one
	Now             func() time.Time  // nil means the wall clock; injected by tests
	Ready           func() error      // /readyz; nil means ready
	Version         string            // shown by /healthz

	// WebhookClient sends test deliveries; WebhookResolver and
	// WebhookPolicy validate webhook URLs (the policy the client was built
	// with). Without them the webhook endpoints that need them answer 500.
	WebhookClient   *webhook.Client
	WebhookResolver webhook.Resolver
	WebhookPolicy   webhook.Policy

	// TLS answers check-tls; without it check-tls answers 500.
	TLS TLSChecker
	// Senders computes the sources, senders and policy-advice views; nil
	// uses the embedded known-sender map without SPF evaluation.
	Senders *senders.Views

	// TLSReports, when set, serves POST /tlsrpt/<local part> (TLS reports
	// over HTTPS, package ingest/https); without it that path is 404.
	TLSReports http.Handler
	// PublicURL is the URL reporters reach the server by (--public-url,
	// no trailing slash); when it is https, dns_records add the
	// <PublicURL>/tlsrpt/<local part> URI to the TLS-RPT record.
	PublicURL string
	// Mailboxes runs the mailbox endpoints (IMAP intake); without it those
	// that change or poll a mailbox answer 500.
	Mailboxes *imapin.Service
	// Quarantine retries quarantine entries (POST /quarantine/{id}/retry).
	Quarantine QuarantineRetrier
}

// Server is the HTTP API. Create it with New.
type Server struct {
	cfg      Config
	store    *store.DB
	dns      DNSChecker
	log      *slog.Logger
	now      func() time.Time
	router   *httprouter.Router
	routes   []Route
	keys     *keyLimiter
	authFail *failLimiter
	// revokedFail counts failed authentications with revoked keys, by key
	// id, apart from authFail (see authFailure).
	revokedFail *failLimiter
	lastUsed    lastUsed

	domainPages *pageCache

	// ui serves every path outside /api/ that no API route takes (the web
	// interface); nil: those are JSON 404s too. Set by MountUI.
	ui http.Handler

	ridPrefix string
	ridSeq    atomic.Uint64

	requests *metrics.CounterVec
	latency  *metrics.HistogramVec
}

// Route is one registered method and path, as httprouter spells it.
type Route struct {
	Method, Path string
	Access       access
}

// access says who may call a route.
type access int

const (
	public    access = iota // no key (OpenAPI document, health)
	readScope               // any valid key
	fullScope               // a key with full scope
)

// New returns a Server with every route registered.
func New(cfg Config) *Server {
	if cfg.RateLimit <= 0 {
		cfg.RateLimit = 100
	}
	if cfg.AuthFailLimit <= 0 {
		cfg.AuthFailLimit = 30
	}
	if cfg.DNSTimeout <= 0 {
		cfg.DNSTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.NewRegistry()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	s := &Server{
		cfg:         cfg,
		store:       cfg.Store,
		dns:         cfg.DNS,
		log:         cfg.Logger,
		now:         func() time.Time { return cfg.Now().UTC().Truncate(time.Second) },
		router:      httprouter.New(),
		keys:        newKeyLimiter(cfg.RateLimit),
		authFail:    newFailLimiter(cfg.AuthFailLimit),
		revokedFail: newFailLimiter(cfg.AuthFailLimit),
		ridPrefix:   hex.EncodeToString(b[:]),
		domainPages: newPageCache(4096),
		requests: cfg.Metrics.Counter("dmarcd_http_requests_total",
			"HTTP requests served, by route, method and status code.", "route", "method", "status"),
		latency: cfg.Metrics.Histogram("dmarcd_http_request_duration_seconds",
			"HTTP request latency in seconds, by route and method.", metrics.DefaultLatencyBuckets, "route", "method"),
	}
	s.lastUsed.m = map[string]time.Time{}
	s.router.NotFound = http.HandlerFunc(s.notFound)
	s.router.MethodNotAllowed = http.HandlerFunc(s.methodNotAllowed)
	s.router.PanicHandler = s.panicked
	s.registerRoutes()
	return s
}

// registerRoutes is the whole API on one screen.
func (s *Server) registerRoutes() {
	s.handle("GET", "/healthz", public, s.healthz)
	s.handle("GET", "/readyz", public, s.readyz)
	s.handle("GET", "/metrics", public, s.metrics)
	s.handle("GET", "/api/v1/openapi.json", public, s.openAPI)

	s.handle("GET", "/api/v1/domains", readScope, s.listDomains)
	s.handle("POST", "/api/v1/domains", fullScope, s.createDomain)
	s.handle("GET", "/api/v1/domains/:id", readScope, s.getDomain)
	s.handle("DELETE", "/api/v1/domains/:id", fullScope, s.deleteDomain)
	s.handle("POST", "/api/v1/domains/:id/verify", fullScope, s.verifyDomain)
	s.handle("GET", "/api/v1/domains/:id/statistics", readScope, s.domainStatistics)
	s.handle("GET", "/api/v1/domains/:id/sources", readScope, s.domainSources)
	s.handle("GET", "/api/v1/domains/:id/senders", readScope, s.domainSenders)
	s.handle("GET", "/api/v1/domains/:id/policy-advice", readScope, s.domainPolicyAdvice)

	s.handle("GET", "/api/v1/reports", readScope, s.listReports)
	s.handle("GET", "/api/v1/reports/:id", readScope, s.getReport)
	s.listRoute("GET", exportPath, readScope) // served by getReport
	s.handle("GET", "/api/v1/reports/:id/statistics", readScope, s.reportStatistics)
	s.handle("GET", "/api/v1/reports/:id/export/csv", readScope, s.exportReportCSV)

	s.handle("GET", "/api/v1/alerts", readScope, s.listAlerts)
	s.handle("PUT", "/api/v1/alerts/:id/dismiss", fullScope, s.dismissAlert)

	s.handle("GET", "/api/v1/forensic-reports", readScope, s.listFailureReports)
	// One route for :id, summary and statistics (see failureByID).
	s.handle("GET", "/api/v1/forensic-reports/:id", readScope, s.failureByID)
	s.listRoute("GET", failureSummaryPath, readScope)
	s.listRoute("GET", failureStatisticsPath, readScope)

	s.handle("GET", "/api/v1/webhooks", readScope, s.listWebhooks)
	s.handle("POST", "/api/v1/webhooks", fullScope, s.createWebhook)
	s.handle("GET", "/api/v1/webhooks/:id", readScope, s.getWebhook)
	s.handle("PUT", "/api/v1/webhooks/:id", fullScope, s.updateWebhook)
	s.handle("DELETE", "/api/v1/webhooks/:id", fullScope, s.deleteWebhook)
	s.handle("POST", "/api/v1/webhooks/:id/test", fullScope, s.testWebhook)

	s.handle("GET", "/api/v1/keys", readScope, s.listKeys)
	s.handle("POST", "/api/v1/keys", fullScope, s.createKey)
	s.handle("DELETE", "/api/v1/keys/:id", fullScope, s.revokeKey)
	s.handle("GET", "/api/v1/quarantine", readScope, s.listQuarantine)
	s.handle("GET", "/api/v1/quarantine/:id", readScope, s.getQuarantine)
	s.handle("GET", "/api/v1/quarantine/:id/raw", readScope, s.quarantineRaw)
	s.handle("POST", "/api/v1/quarantine/:id/retry", fullScope, s.retryQuarantine)
	s.handle("DELETE", "/api/v1/quarantine/:id", fullScope, s.deleteQuarantine)

	// check-dmarc changes nothing, so read keys may call it (API.md).
	s.handle("POST", "/api/v1/check-dmarc", readScope, s.checkDMARC)

	s.handle("GET", "/api/v1/tls-reports", readScope, s.listTLSReports)
	s.handle("GET", "/api/v1/tls-reports/:id", readScope, s.getTLSReport)
	s.handle("GET", "/api/v1/domains/:id/tls-statistics", readScope, s.domainTLSStatistics)
	s.handle("POST", "/api/v1/check-tls", readScope, s.checkTLS)
	// RFC 8460 reporters: no key, the address is the secret (ingest/https).
	s.handle("POST", "/tlsrpt/:local", public, s.postTLSReport)

	s.handle("GET", "/api/v1/mailboxes", readScope, s.listMailboxes)
	s.handle("POST", "/api/v1/mailboxes", fullScope, s.createMailbox)
	s.handle("GET", "/api/v1/mailboxes/:id", readScope, s.getMailbox)
	s.handle("PUT", "/api/v1/mailboxes/:id", fullScope, s.updateMailbox)
	s.handle("DELETE", "/api/v1/mailboxes/:id", fullScope, s.deleteMailbox)
	s.handle("POST", "/api/v1/mailboxes/:id/poll", fullScope, s.pollMailbox)
}

// Routes returns every registered route, for the OpenAPI consistency test.
func (s *Server) Routes() []Route { return append([]Route(nil), s.routes...) }

// Handler returns the http.Handler to serve.
func (s *Server) Handler() http.Handler { return s }

// handlerFunc is the shape of every endpoint: it writes a success response
// itself and returns an error for everything else, which the adapter turns
// into the API.md error body.
type handlerFunc func(w http.ResponseWriter, r *request) error

// request carries what authentication established.
type request struct {
	*http.Request
	params httprouter.Params
	key    *store.APIKey
	org    *store.Organization
}

func (s *Server) handle(method, path string, acc access, h handlerFunc) {
	s.routes = append(s.routes, Route{Method: method, Path: path, Access: acc})
	s.router.Handle(method, path, func(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
		if rec, ok := w.(*recorder); ok {
			rec.route = path
		}
		lowerIDs(r, p)
		req := &request{Request: r, params: p}
		err := s.authenticate(w, req, acc)
		if err == nil {
			err = h(w, req)
		}
		if err != nil {
			s.writeError(w, r, err)
		}
	})
}

// authenticate checks the key, the client's failed-authentication budget,
// the key's rate limit and its scope, in that order, and sets the rate-limit
// headers.
func (s *Server) authenticate(w http.ResponseWriter, r *request, acc access) error {
	if acc == public {
		return nil
	}
	now := s.cfg.Now()
	addr := clientaddr.Of(r.Request)
	if blocked, until := s.authFail.blocked(addr, now); blocked {
		w.Header().Set("Retry-After", retryAfter(until.Sub(now)))
		return errAuthBlocked
	}
	secret := r.Header.Get("X-API-Key")
	key, org, err := s.store.Authenticate(secret)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			s.authFail.fail(addr, now)
			return err
		}
		_, wait, err := s.authFailure(addr, secret, now)
		if wait > 0 {
			w.Header().Set("Retry-After", retryAfter(wait))
		}
		return err
	}
	q := s.keys.take(key.ID, now)
	h := w.Header()
	h.Set("X-RateLimit-Limit", strconv.Itoa(q.limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(q.remaining))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(ceilUnix(q.reset), 10))
	if !q.allowed {
		h.Set("Retry-After", retryAfter(q.retryAfter))
		return errRateLimited
	}
	if acc == fullScope && key.Scope != store.ScopeFull {
		return errInsufficientScope
	}
	r.key, r.org = key, org
	s.lastUsed.mark(key.ID, now)
	return nil
}

func ceilUnix(t time.Time) int64 {
	u := t.Unix()
	if t.Nanosecond() > 0 {
		u++
	}
	return u
}

// retryAfter renders a wait as whole seconds, rounded up and at least 1.
func retryAfter(d time.Duration) string {
	secs := int64((d + time.Second - 1) / time.Second)
	if secs < 1 {
		secs = 1
	}
	return strconv.FormatInt(secs, 10)
}

// authFailure counts one failed authentication with secret from client
// address addr and returns the error to answer it with, and how long to
// wait when that is a 429. A key the store knows that failed is a revoked
// one, and no guess: its client was not told of the revocation. Its
// failures count against that key alone, so that it cannot use up its
// address's budget and lock out every other key there (behind a proxy:
// everyone); past the same limit that key alone waits, and the log says
// once a minute that it is still in use. revokedID is that key's id; any
// other secret counts against addr.
func (s *Server) authFailure(addr, secret string, now time.Time) (revokedID string, wait time.Duration, err error) {
	if store.ValidKeyFormat(secret) {
		revokedID, err = s.store.ResolveAPIKey(secret)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			s.authFail.fail(addr, now)
			return "", 0, err
		}
	}
	if revokedID == "" {
		s.authFail.fail(addr, now)
		return "", 0, errUnauthorized
	}
	if blocked, until := s.revokedFail.blocked(revokedID, now); blocked {
		return revokedID, until.Sub(now), errRevokedBlocked
	}
	if s.revokedFail.fail(revokedID, now) == 1 {
		s.log.Warn("revoked API key still in use: tell its user, or whatever runs with it, to use another key",
			"key_id", revokedID, "key_prefix", secret[:len(store.KeyPrefix)+4], "remote", addr)
	}
	return revokedID, 0, errUnauthorized
}

// ServeHTTP assigns the request id, serves the request, then logs it and
// records its metrics.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rid := r.Header.Get("X-Request-Id")
	if !validRequestID(rid) {
		rid = s.ridPrefix + "-" + strconv.FormatUint(s.ridSeq.Add(1), 36)
	}
	w.Header().Set("X-Request-Id", rid)
	rec := &recorder{ResponseWriter: w, status: http.StatusOK, route: "unmatched"}
	if headerBytes(r) > MaxHeaderBytes {
		s.writeError(rec, r, errHeadersTooLarge)
	} else {
		s.router.ServeHTTP(rec, r)
	}
	elapsed := time.Since(start)
	s.requests.With(rec.route, r.Method, strconv.Itoa(rec.status)).Inc()
	s.latency.With(rec.route, r.Method).Observe(elapsed.Seconds())

	level := slog.LevelInfo
	if rec.route == "/healthz" || rec.route == "/readyz" || rec.route == "/metrics" {
		level = slog.LevelDebug
	}
	if !s.log.Enabled(r.Context(), level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("request_id", rid),
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.String("route", rec.route),
		slog.Int("status", rec.status),
		slog.Int64("bytes", rec.bytes),
		slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000),
		slog.String("remote", clientaddr.Of(r)),
	}
	s.log.LogAttrs(r.Context(), level, "request", attrs...)
}

func validRequestID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// recorder remembers the status, size and route of a response.
type recorder struct {
	http.ResponseWriter
	status      int
	bytes       int64
	route       string
	wroteHeader bool
}

func (r *recorder) WriteHeader(code int) {
	if !r.wroteHeader {
		r.status, r.wroteHeader = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wroteHeader = true
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// MountUI makes the server hand every request outside /api/ and /tlsrpt/
// that no API route takes (/, /login, /domains/..., /static/...) to ui, the
// web interface. Call it before serving.
func (s *Server) MountUI(ui http.Handler) { s.ui = ui }

// AuthBlocked reports whether client address addr is over the
// failed-authentication limit and how long it stays blocked; the web
// interface's sign-in shares the limit.
func (s *Server) AuthBlocked(addr string) (bool, time.Duration) {
	now := s.cfg.Now()
	blocked, until := s.authFail.blocked(addr, now)
	return blocked, until.Sub(now)
}

// AuthFailed counts a failed authentication (a failed sign-in) with secret
// from addr as the API counts its own: a revoked key's against that key,
// whose id it returns, any other's against addr.
func (s *Server) AuthFailed(addr, secret string) (revokedKeyID string) {
	revokedKeyID, _, _ = s.authFailure(addr, secret, s.cfg.Now())
	return revokedKeyID
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	if s.ui != nil && !apiPath(r.URL.Path) {
		if rec, ok := w.(*recorder); ok {
			rec.route = "ui"
		}
		s.ui.ServeHTTP(w, r)
		return
	}
	s.writeError(w, r, errNotFound(fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path)))
}

// apiPath reports whether path belongs to the API's paths rather than the
// web interface's: /api and below, and /tlsrpt and below, where programs
// (TLS reporters) post and a miss is a JSON 404, never a sign-in page.
func apiPath(path string) bool {
	for _, prefix := range []string{"/api", "/tlsrpt"} {
		if path == prefix || strings.HasPrefix(path, prefix+"/") {
			return true
		}
	}
	return false
}

func (s *Server) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	s.writeError(w, r, &Error{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed",
		Message: fmt.Sprintf("method %s is not allowed here; allowed: %s", r.Method, w.Header().Get("Allow"))})
}

func (s *Server) panicked(w http.ResponseWriter, r *http.Request, v any) {
	s.log.Error("panic serving request", "request_id", w.Header().Get("X-Request-Id"),
		"path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	s.writeError(w, r, &Error{Status: http.StatusInternalServerError, Code: "internal"})
}

// lastUsed batches the last_used_at stamps of keys in memory: writing them
// on every request would cost an fsync each. Flush writes them in one
// transaction.
type lastUsed struct {
	mu sync.Mutex
	m  map[string]time.Time
}

func (l *lastUsed) mark(id string, t time.Time) {
	l.mu.Lock()
	l.m[id] = t
	l.mu.Unlock()
}

// FlushKeyUsage writes the batched last_used_at stamps to the store.
func (s *Server) FlushKeyUsage() error {
	s.lastUsed.mu.Lock()
	m := s.lastUsed.m
	s.lastUsed.m = make(map[string]time.Time, len(m))
	s.lastUsed.mu.Unlock()
	if len(m) == 0 {
		return nil
	}
	for id, t := range m {
		m[id] = t.UTC().Truncate(time.Second)
	}
	return s.store.TouchAPIKeys(m)
}
