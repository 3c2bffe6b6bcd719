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
	"sources", "tls_reports", "tls_report", "mailboxes", "mailbox", "quarantine", "quarantine_entry", "notifications"}

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
