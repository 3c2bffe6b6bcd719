// Package httpapi serves the REST API of SPEC.md and API.md: routes,
// authentication, rate limits, request decoding, error bodies and JSON
// encoding. Business rules live in the packages it calls.
package httpapi

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/internal/clientaddr"
	"github.com/dmarcd/dmarcd/metrics"
	"github.com/dmarcd/dmarcd/senders"
	"github.com/dmarcd/dmarcd/store"
)

// Config holds what a Server is built from.
type Config struct {
	// App runs the operations; nil builds one over Store alone (no DNS,
	// webhooks or mailboxes), for tools and tests that only read.
	App       *app.App
	Store     *store.DB         // the read path: reports, statistics, alerts
	RateLimit int               // requests per minute per key; 0 means 100
	Logger    *slog.Logger      // nil discards
	Metrics   *metrics.Registry // nil creates a private one
	Now       func() time.Time  // nil means the wall clock; injected by tests
	Ready     func() error      // /readyz; nil means ready
	Version   string            // shown by /healthz

	// Senders computes the sources, senders and policy-advice views; nil
	// uses the embedded known-sender map without SPF evaluation.
	Senders *senders.Views

	// TLSReports, when set, serves POST /tlsrpt/<local part> (TLS reports
	// over HTTPS, package ingest/https); without it that path is 404.
	TLSReports http.Handler
}

// Server is the HTTP API. Create it with New.
type Server struct {
	cfg    Config
	app    *app.App
	store  *store.DB
	log    *slog.Logger
	now    func() time.Time
	router *httprouter.Router
	routes []Route
	keys   *keyLimiter

	domainPages *pageCache

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

// access says who may call a route: anyone (public), or an authenticated
// actor whom app.Authorize lets run the route's action.
type access struct {
	public bool
	act    app.Action
}

// The accesses of the routes.
var (
	public       = access{public: true} // no key (OpenAPI document, health)
	read         = access{act: app.Read}
	write        = access{act: app.Write}
	readHooks    = access{act: app.ReadWebhooks}
	writeHooks   = access{act: app.WriteWebhooks}
	readNotify   = access{act: app.ReadNotifications}
	writeNotify  = access{act: app.WriteNotifications}
	readFailures = access{act: app.ReadFailureReports}
)

// New returns a Server with every route registered.
func New(cfg Config) *Server {
	if cfg.RateLimit <= 0 {
		cfg.RateLimit = 100
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
	if cfg.App == nil {
		cfg.App = app.New(app.Config{Store: cfg.Store, Now: cfg.Now})
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	s := &Server{
		cfg:         cfg,
		app:         cfg.App,
		store:       cfg.Store,
		log:         cfg.Logger,
		now:         func() time.Time { return cfg.Now().UTC().Truncate(time.Second) },
		router:      httprouter.New(),
		keys:        newKeyLimiter(cfg.RateLimit),
		ridPrefix:   hex.EncodeToString(b[:]),
		domainPages: newPageCache(4096),
		requests: cfg.Metrics.Counter("dmarcd_http_requests_total",
			"HTTP requests served, by route, method and status code.", "route", "method", "status"),
		latency: cfg.Metrics.Histogram("dmarcd_http_request_duration_seconds",
			"HTTP request latency in seconds, by route and method.", metrics.DefaultLatencyBuckets, "route", "method"),
	}
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

	s.handle("GET", "/api/v1/domains", read, s.listDomains)
	s.handle("POST", "/api/v1/domains", write, s.createDomain)
	s.handle("GET", "/api/v1/domains/:id", read, s.getDomain)
	s.handle("DELETE", "/api/v1/domains/:id", write, s.deleteDomain)
	s.handle("POST", "/api/v1/domains/:id/verify", write, s.verifyDomain)
	s.handle("GET", "/api/v1/domains/:id/statistics", read, s.domainStatistics)
	s.handle("GET", "/api/v1/domains/:id/sources", read, s.domainSources)
	s.handle("GET", "/api/v1/domains/:id/senders", read, s.domainSenders)
	s.handle("GET", "/api/v1/domains/:id/policy-advice", read, s.domainPolicyAdvice)

	s.handle("GET", "/api/v1/reports", read, s.listReports)
	s.handle("GET", "/api/v1/reports/:id", read, s.getReport)
	s.listRoute("GET", exportPath, read) // served by getReport
	s.handle("GET", "/api/v1/reports/:id/statistics", read, s.reportStatistics)
	s.handle("GET", "/api/v1/reports/:id/export/csv", read, s.exportReportCSV)

	s.handle("GET", "/api/v1/alerts", read, s.listAlerts)
	s.handle("PUT", "/api/v1/alerts/:id/dismiss", write, s.dismissAlert)

	s.handle("GET", "/api/v1/forensic-reports", readFailures, s.listFailureReports)
	// One route for :id, summary and statistics (see failureByID).
	s.handle("GET", "/api/v1/forensic-reports/:id", readFailures, s.failureByID)
	s.listRoute("GET", failureSummaryPath, readFailures)
	s.listRoute("GET", failureStatisticsPath, readFailures)

	s.handle("GET", "/api/v1/webhooks", readHooks, s.listWebhooks)
	s.handle("POST", "/api/v1/webhooks", writeHooks, s.createWebhook)
	s.handle("GET", "/api/v1/webhooks/:id", readHooks, s.getWebhook)
	s.handle("PUT", "/api/v1/webhooks/:id", writeHooks, s.updateWebhook)
	s.handle("DELETE", "/api/v1/webhooks/:id", writeHooks, s.deleteWebhook)
	s.handle("POST", "/api/v1/webhooks/:id/test", writeHooks, s.testWebhook)

	s.handle("GET", "/api/v1/keys", read, s.listKeys)
	s.handle("POST", "/api/v1/keys", write, s.createKey)
	s.handle("DELETE", "/api/v1/keys/:id", write, s.revokeKey)
	s.handle("GET", "/api/v1/quarantine", read, s.listQuarantine)
	s.handle("GET", "/api/v1/quarantine/:id", read, s.getQuarantine)
	s.handle("GET", "/api/v1/quarantine/:id/raw", read, s.quarantineRaw)
	s.handle("POST", "/api/v1/quarantine/:id/retry", write, s.retryQuarantine)
	s.handle("DELETE", "/api/v1/quarantine/:id", write, s.deleteQuarantine)

	// check-dmarc changes nothing, so read keys may call it (API.md).
	s.handle("POST", "/api/v1/check-dmarc", read, s.checkDMARC)

	s.handle("GET", "/api/v1/tls-reports", read, s.listTLSReports)
	s.handle("GET", "/api/v1/tls-reports/:id", read, s.getTLSReport)
	s.handle("GET", "/api/v1/domains/:id/tls-statistics", read, s.domainTLSStatistics)
	s.handle("POST", "/api/v1/check-tls", read, s.checkTLS)
	// RFC 8460 reporters: no key, the address is the secret (ingest/https).
	s.handle("POST", "/tlsrpt/:local", public, s.postTLSReport)

	s.handle("GET", "/api/v1/mailboxes", read, s.listMailboxes)
	s.handle("POST", "/api/v1/mailboxes", write, s.createMailbox)
	s.handle("GET", "/api/v1/mailboxes/:id", read, s.getMailbox)
	s.handle("PUT", "/api/v1/mailboxes/:id", write, s.updateMailbox)
	s.handle("DELETE", "/api/v1/mailboxes/:id", write, s.deleteMailbox)
	s.handle("POST", "/api/v1/mailboxes/:id/poll", write, s.pollMailbox)

	s.handle("GET", "/api/v1/notifications", readNotify, s.getNotifications)
	s.handle("PUT", "/api/v1/notifications", writeNotify, s.putNotifications)
	s.handle("GET", "/api/v1/notifications/mail", readNotify, s.listMail)
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
	actor  app.Actor
}

// orgID is the id of the caller's organization.
func (r *request) orgID() string { return r.actor.Org().ID }

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

// authenticate checks the key (with the client's failed-authentication
// budget), the key's rate limit, and whether app.Authorize lets it run
// the route's action, in that order, and sets the rate-limit headers.
func (s *Server) authenticate(w http.ResponseWriter, r *request, acc access) error {
	if acc.public {
		return nil
	}
	actor, err := s.app.Authenticate(clientaddr.Of(r.Request), r.Header.Get("X-API-Key"))
	if err != nil {
		if e := app.AsError(err); e.Kind == app.Throttled {
			w.Header().Set("Retry-After", retryAfter(e.RetryAfter))
		}
		return err
	}
	now := s.cfg.Now()
	q := s.keys.take(actor.Key().ID, now)
	h := w.Header()
	h.Set("X-RateLimit-Limit", strconv.Itoa(q.limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(q.remaining))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(ceilUnix(q.reset), 10))
	if !q.allowed {
		h.Set("Retry-After", retryAfter(q.retryAfter))
		return errRateLimited
	}
	err = app.Authorize(actor, acc.act)
	// A key refused for its rights did not serve; one refused for its
	// plan did.
	if err == nil || app.KindOf(err) == app.PlanFeature {
		r.actor = actor
		s.app.KeyUsed(actor)
	}
	return err
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

// ServeHTTP serves one API request with its request id, logging and
// metrics (see Observe).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.observe(w, r, "unmatched", s.router)
}

// Observe wraps h, a handler served beside the API on one mux (the web
// interface), with what every API request gets: a request id, a 431 for
// headers over MaxHeaderBytes, the request log line and the metrics,
// under the route name route.
func (s *Server) Observe(route string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.observe(w, r, route, h) })
}

// Paths are the ServeMux patterns the API serves on a mux it shares:
// /api and everything under it, and the first segment of every other
// route (/healthz, /tlsrpt/...), with and without a trailing slash so
// that the router's own redirects still apply.
func (s *Server) Paths() []string {
	seen := map[string]bool{}
	var out []string
	for _, rt := range s.routes {
		seg, _, _ := strings.Cut(strings.TrimPrefix(rt.Path, "/"), "/")
		for _, p := range []string{"/" + seg, "/" + seg + "/"} {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	return out
}

// observe assigns the request id, serves the request with h, then logs it
// and records its metrics; route names it unless h names it better.
func (s *Server) observe(w http.ResponseWriter, r *http.Request, route string, h http.Handler) {
	start := time.Now()
	rid := r.Header.Get("X-Request-Id")
	if !validRequestID(rid) {
		rid = s.ridPrefix + "-" + strconv.FormatUint(s.ridSeq.Add(1), 36)
	}
	w.Header().Set("X-Request-Id", rid)
	rec := &recorder{ResponseWriter: w, status: http.StatusOK, route: route}
	if headerBytes(r) > MaxHeaderBytes {
		s.writeError(rec, r, errHeadersTooLarge)
	} else {
		h.ServeHTTP(rec, r)
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

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	s.writeError(w, r, errNotFound(fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path)))
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
