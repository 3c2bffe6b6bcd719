// Package web serves dmarcd's web interface (UI.md): server-rendered HTML
// pages from embedded templates and assets, signed in with an API key,
// beside the REST API on one server and port. Its forms run the
// operations of package app, as the API does, so every rule (plan
// limits, the 5-key limit, scopes, tenant isolation) lives once; its
// pages read report data from the store.
package web

import (
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
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/senders"
	"github.com/dmarcd/dmarcd/store"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Config holds what a Handler is built from.
type Config struct {
	// App runs the operations and signs people in; nil builds one over
	// Store alone (no DNS, webhooks or mailboxes), for tools and tests
	// that only read.
	App *app.App
	// Store is the read path: reports, statistics, alerts.
	Store *store.DB
	// DNS is the domain page's live check-dmarc; nil: none, the page shows
	// the record of the last DNS check.
	DNS DMARCChecker
	// PublicURL is the URL people reach dmarcd by (--public-url), e.g.
	// https://dmarc.example.net: its origin is the only one whose POSTs are
	// accepted, and https makes the session cookie Secure. Empty: the
	// request's own Host.
	PublicURL string
	Now       func() time.Time // nil: the wall clock
	Logger    *slog.Logger     // nil discards
	// Senders computes the sources, senders and policy-advice views, the
	// same instance the API serves them with; nil: views over Store with
	// the embedded sender map and no SPF evaluation.
	Senders *senders.Views
	// CheckBudget bounds the live check-dmarc of a domain page; 0 means
	// 1.5s. When it runs out the page shows the last DNS check's record.
	CheckBudget time.Duration
	// GeoIPCity and GeoIPASN report whether the server geolocates the
	// reports it stores (--geoip-city, --geoip-asn): blank geolocation
	// columns say why.
	GeoIPCity, GeoIPASN bool
	// OIDC turns on sign-in with an OpenID Connect provider; nil: none.
	OIDC *OIDCConfig
}

// Handler is the web interface. Create it with New.
type Handler struct {
	cfg    Config
	app    *app.App
	db     *store.DB
	log    *slog.Logger
	now    func() time.Time
	public *url.URL
	router *httprouter.Router
	pages  map[string]*pageTemplate
	base   *template.Template // layout.html and parts.html, which each page clones
	assets map[string]asset   // by hashed path
	css    string             // hashed path of app.css
	js     string             // hashed path of app.js
	icon   string             // hashed path of favicon.svg
	views  *senders.Views
	stages *stageCache
	checks *checkCache
	oidc   *oidcClient // nil without single sign-on
	steps  *totpSteps
	// cloneMu makes the clones of base one at a time.
	cloneMu sync.Mutex
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
	if cfg.CheckBudget <= 0 {
		cfg.CheckBudget = 1500 * time.Millisecond
	}
	if cfg.App == nil {
		cfg.App = app.New(app.Config{Store: cfg.Store, Now: cfg.Now})
	}
	if cfg.Senders == nil {
		cfg.Senders = &senders.Views{DB: cfg.Store, Known: senders.DefaultKnownSenders(), DMARC: cfg.App.DMARCResolver()}
	}
	h := &Handler{cfg: cfg, app: cfg.App, db: cfg.Store, log: cfg.Logger,
		now:    func() time.Time { return cfg.Now().UTC().Truncate(time.Second) },
		router: httprouter.New(), assets: map[string]asset{},
		views: cfg.Senders, stages: newStageCache(), checks: newCheckCache(),
		steps: &totpSteps{m: map[string]totpStep{}}}
	if cfg.OIDC != nil {
		h.oidc = newOIDCClient(*cfg.OIDC)
	}
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
	"sources", "tls_reports", "tls_report", "mailboxes", "mailbox", "quarantine", "quarantine_entry", "notifications",
	"orgs", "people", "account", "audit", "invite"}

func (h *Handler) loadTemplates() error {
	base, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/parts.html")
	if err != nil {
		return err
	}
	h.base = base
	h.pages = map[string]*pageTemplate{}
	for _, name := range pageNames {
		// Each page is parsed here, so that a broken one stops the start,
		// and again at its first render (pageTemplate).
		if _, err := h.parsePage(name); err != nil {
			return err
		}
		h.pages[name] = &pageTemplate{}
	}
	return nil
}

// pageTemplate is a page's template set, made at the page's first render:
// each page clones the layout and the parts (120 KB of parse trees each,
// 3.5 MB for all pages), and a server mostly shows a few of its pages, if
// any: a server that only receives reports held them for nothing, 7 MB of
// its peak RSS when it imported a report of a million records (issue 25).
type pageTemplate struct {
	once sync.Once
	t    *template.Template
	err  error
}

// parsePage returns a new template set of the layout with page name.
func (h *Handler) parsePage(name string) (*template.Template, error) {
	h.cloneMu.Lock()
	c, err := h.base.Clone()
	h.cloneMu.Unlock()
	if err == nil {
		c, err = c.ParseFS(templateFS, "templates/"+name+".html")
	}
	if err != nil {
		return nil, fmt.Errorf("web: template %s: %w", name, err)
	}
	return c, nil
}

// page returns the template set of page name.
func (h *Handler) page(name string) (*template.Template, error) {
	p := h.pages[name]
	if p == nil {
		return nil, fmt.Errorf("web: no page %q", name)
	}
	p.once.Do(func() { p.t, p.err = h.parsePage(name) })
	return p.t, p.err
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
