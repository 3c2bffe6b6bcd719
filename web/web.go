// Package web serves dmarcd's web interface (UI.md): server-rendered HTML
// pages from embedded templates and assets, signed in with an API key,
// on the same server and port as the REST API. It calls the same store
// operations as the API, so every rule (plan limits, the 5-key limit,
// scopes, tenant isolation) lives once.
package web

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/dmarcd/dmarcd/dnscheck"
	imapin "github.com/dmarcd/dmarcd/ingest/imap"
	"github.com/dmarcd/dmarcd/senders"
	"github.com/dmarcd/dmarcd/store"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// DNSChecker is what the pages need of DNS (package dnscheck's Checker).
type DNSChecker interface {
	Verify(ctx context.Context, domain, reportingEmail string) error
}

// DomainService creates domains with the API's rules (httpapi.Server):
// validation, the suggested record that never weakens a published one,
// 503 when the DNS cannot tell.
type DomainService interface {
	CreateDomain(ctx context.Context, org *store.Organization, name string) (*store.Domain, error)
}

// AuthLimiter limits failed sign-ins per client address; the API's
// failed-authentication limit (httpapi.Server) implements it, so that
// guesses through the sign-in form and the API count together.
type AuthLimiter interface {
	// AuthBlocked reports whether addr is over the limit and for how long.
	AuthBlocked(addr string) (bool, time.Duration)
	// AuthFailed counts one failed authentication from addr.
	AuthFailed(addr string)
}

// Config holds what a Handler is built from.
type Config struct {
	Store           *store.DB
	DNS             DNSChecker
	ReportingDomain string
	// PublicURL is the URL people reach dmarcd by (--public-url), e.g.
	// https://dmarc.example.net: its origin is the only one whose POSTs are
	// accepted, and https makes the session cookie Secure. Empty: the
	// request's own Host.
	PublicURL  string
	Limiter    AuthLimiter      // nil: no limit (tests)
	Now        func() time.Time // nil: the wall clock
	Logger     *slog.Logger     // nil discards
	DNSTimeout time.Duration    // budget of a DNS-backed action; 0 means 10s
	// Domains creates domains as the API does.
	Domains DomainService
	// Webhooks validates, creates, updates and tests webhooks as the API
	// does (httpapi.Server); nil: the webhook actions fail.
	Webhooks WebhookService
	// Senders computes the sources, senders and policy-advice views, the
	// same instance the API serves them with; nil: views over Store with
	// the embedded sender map and no SPF evaluation.
	Senders *senders.Views
	// Mailboxes adds, changes, polls and deletes IMAP mailboxes as the API
	// does (the same imap.Service); nil: the mailbox pages are read-only.
	Mailboxes *imapin.Service
	// CheckBudget bounds the live check-dmarc of a domain page; 0 means
	// 1.5s. When it runs out the page shows the last DNS check's record.
	CheckBudget time.Duration
	// GeoIPCity and GeoIPASN report whether the server geolocates the
	// reports it stores (--geoip-city, --geoip-asn): blank geolocation
	// columns say why.
	GeoIPCity, GeoIPASN bool
}

// Handler is the web interface. Create it with New.
type Handler struct {
	cfg    Config
	db     *store.DB
	log    *slog.Logger
	now    func() time.Time
	public *url.URL
	router *httprouter.Router
	pages  map[string]*template.Template
	assets map[string]asset // by hashed path
	css    string           // hashed path of app.css
	js     string           // hashed path of app.js
	icon   string           // hashed path of favicon.svg
	views  *senders.Views
	stages *stageCache
	checks *checkCache
}

// asset is one embedded static file.
type asset struct {
	body        []byte
	contentType string
}

// New returns the Handler with its templates parsed and assets hashed.
func New(cfg Config) (*Handler, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.DNSTimeout <= 0 {
		cfg.DNSTimeout = 10 * time.Second
	}
	if cfg.CheckBudget <= 0 {
		cfg.CheckBudget = 1500 * time.Millisecond
	}
	if cfg.Senders == nil {
		cfg.Senders = &senders.Views{DB: cfg.Store, Known: senders.DefaultKnownSenders()}
		if c, ok := cfg.DNS.(*dnscheck.Checker); ok && c.Resolver != nil {
			cfg.Senders.DMARC = c.Resolver
		}
	}
	h := &Handler{cfg: cfg, db: cfg.Store, log: cfg.Logger,
		now:    func() time.Time { return cfg.Now().UTC().Truncate(time.Second) },
		router: httprouter.New(), assets: map[string]asset{},
		views: cfg.Senders, stages: newStageCache(), checks: newCheckCache()}
	if cfg.PublicURL != "" {
		u, err := ParsePublicURL(cfg.PublicURL)
		if err != nil {
			return nil, err
		}
		h.public = u
	}
	if err := h.loadAssets(); err != nil {
		return nil, err
	}
	if err := h.loadTemplates(); err != nil {
		return nil, err
	}
	h.routes()
	return h, nil
}

// ParsePublicURL checks a --public-url value: http or https, a host, no
// path beyond "/", no user-info, query or fragment.
func ParsePublicURL(s string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimRight(s, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("web: public URL %q: want http(s)://host[:port] without a path", s)
	}
	return u, nil
}

func (h *Handler) loadAssets() error {
	return fs.WalkDir(staticFS, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := staticFS.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		ext := path.Ext(p)
		hashed := "/static/" + strings.TrimSuffix(path.Base(p), ext) + "." + hex.EncodeToString(sum[:6]) + ext
		ct := map[string]string{".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8",
			".svg": "image/svg+xml"}[ext]
		h.assets[hashed] = asset{body: body, contentType: ct}
		switch path.Base(p) {
		case "app.css":
			h.css = hashed
		case "app.js":
			h.js = hashed
		case "favicon.svg":
			h.icon = hashed
		}
		return nil
	})
}

// pageNames are the templates besides the layout.
var pageNames = []string{"login", "overview", "domain", "domain_new", "domain_delete",
	"reports", "report", "alerts", "settings", "keys", "error", "webhooks", "failures", "failure",
	"sources", "tls_reports", "tls_report", "mailboxes", "mailbox"}

func (h *Handler) loadTemplates() error {
	base, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/parts.html")
	if err != nil {
		return err
	}
	h.pages = map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.Must(base.Clone()).ParseFS(templateFS, "templates/"+name+".html")
		if err != nil {
			return fmt.Errorf("web: template %s: %w", name, err)
		}
		h.pages[name] = t
	}
	return nil
}

// ServeHTTP serves one UI request with the security headers of UI.md.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("X-Frame-Options", "DENY")
	h.router.ServeHTTP(w, r)
}

func (h *Handler) serveAsset(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	a, ok := h.assets["/static"+p.ByName("path")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", a.contentType)
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	_, _ = w.Write(a.body)
}
