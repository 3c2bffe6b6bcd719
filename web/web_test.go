package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/httpapi"
	"github.com/dmarcd/dmarcd/internal/dnstest"
	"github.com/dmarcd/dmarcd/internal/egress"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
	"github.com/dmarcd/dmarcd/web"
	"github.com/dmarcd/dmarcd/webhook"
)

// env is the API and the web interface side by side on one mux, as serve
// mounts them, over one application layer and a real store with two
// organizations.
type env struct {
	t                  *testing.T
	dns                *dnstest.Server
	db                 *store.DB
	clock              *storetest.Clock
	srv                *httptest.Server
	app                *app.App
	orgA, orgB         *store.Organization
	fullA, readA, keyB string
	fullAID            string
	domA, domB         *store.Domain
}

func newEnv(t *testing.T) *env { return newEnvPolicy(t, egress.Policy{}) }

// newEnvPolicy is newEnv with webhooks validated and sent under policy p,
// and a real DNS server for verification and webhook hosts.
func newEnvPolicy(t *testing.T, p egress.Policy) *env { return newEnvWith(t, p, nil) }

// newEnvWith is newEnvPolicy with mod applied to the application layer's
// Config (given the store) before it is built.
func newEnvWith(t *testing.T, p egress.Policy, mod func(*app.Config)) *env {
	t.Helper()
	return newEnvUI(t, p, mod, nil)
}

// newEnvUI is newEnvWith with modUI applied to the web interface's Config
// too (its logger, its public URL).
func newEnvUI(t *testing.T, p egress.Policy, mod func(*app.Config), modUI func(*web.Config)) *env {
	t.Helper()
	clock := storetest.NewClock(storetest.Epoch())
	db := storetest.OpenWithClock(t, clock)
	ns := dnstest.Start(t)
	res, err := dnscheck.NewResolver(dnscheck.Config{Servers: []string{ns.Addr}, Timeout: 300 * time.Millisecond, Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	client := webhook.NewClient(res, p).WithTimeout(5 * time.Second)
	t.Cleanup(client.CloseIdleConnections)
	checker := &dnscheck.Checker{Resolver: res, SuggestTimeout: time.Second}
	cfg := app.Config{Store: db, DNS: checker, ReportingDomain: "reports.test", Now: clock.Now, DNSTimeout: 2 * time.Second,
		WebhookClient: client, WebhookResolver: res, WebhookPolicy: p}
	if mod != nil {
		mod(&cfg)
	}
	a := app.New(cfg)
	api := httpapi.New(httpapi.Config{App: a, Store: db, Now: clock.Now})
	uiCfg := web.Config{App: a, Store: db, DNS: checker, Now: clock.Now}
	if modUI != nil {
		modUI(&uiCfg)
	}
	ui, err := web.New(uiCfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, db: db, clock: clock, dns: ns, app: a, srv: httptest.NewServer(sideBySide(api, ui))}
	t.Cleanup(e.srv.Close)
	e.orgA = storetest.MustOrganization(t, db, "alpha", store.PlanUnlimited)
	e.orgB = storetest.MustOrganization(t, db, "beta", store.PlanStarter)
	var k *store.APIKey
	k, e.fullA = storetest.MustAPIKey(t, db, e.orgA.ID, store.ScopeFull)
	e.fullAID = k.ID
	_, e.readA = storetest.MustAPIKey(t, db, e.orgA.ID, store.ScopeRead)
	_, e.keyB = storetest.MustAPIKey(t, db, e.orgB.ID, store.ScopeFull)
	e.domA = storetest.MustDomain(t, db, e.orgA.ID, "alpha.example")
	e.domB = storetest.MustDomain(t, db, e.orgB.ID, "beta.example")
	return e
}

// sideBySide mounts the API on its paths and the web interface on the
// rest of one mux, as serve does.
func sideBySide(api *httpapi.Server, ui http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", api.Observe("ui", ui))
	for _, p := range api.Paths() {
		mux.Handle(p, api)
	}
	return mux
}

type page struct {
	status int
	header http.Header
	body   string
}

// send makes one request without following redirects. form, when not nil,
// is POSTed; headers are name, value pairs.
func (e *env) send(method, path, cookie string, form url.Values, headers ...string) page {
	e.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, e.srv.URL+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: web.CookieName, Value: cookie})
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return page{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// signIn signs in with key and returns the session cookie's value.
func (e *env) signIn(key string) string {
	e.t.Helper()
	p := e.send("POST", "/login", "", url.Values{"key": {key}})
	if p.status != http.StatusSeeOther {
		e.t.Fatalf("sign-in: %d %s", p.status, p.body)
	}
	for _, c := range (&http.Response{Header: p.header}).Cookies() {
		if c.Name == web.CookieName && c.Value != "" {
			return c.Value
		}
	}
	e.t.Fatal("sign-in set no session cookie")
	return ""
}

var csrfRE = regexp.MustCompile(`name="csrf_token" value="([0-9a-f]+)"`)

// csrf reads the CSRF token of a signed-in page.
func (e *env) csrf(cookie string) string {
	e.t.Helper()
	m := csrfRE.FindStringSubmatch(e.send("GET", "/settings", cookie, nil).body)
	if m == nil {
		e.t.Fatal("no csrf_token on the page")
	}
	return m[1]
}

// TestRedirectsWithoutSession ensures every UI page sends a browser without
// a session to the sign-in page, and that the API ignores the cookie.
func TestRedirectsWithoutSession(t *testing.T) {
	e := newEnv(t)
	for _, path := range []string{"/", "/domains/new", "/domains/" + e.domA.ID, "/reports", "/reports/x", "/alerts",
		"/settings", "/settings/keys", "/no/such/page"} {
		p := e.send("GET", path, "", nil)
		if p.status != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/login") {
			t.Errorf("GET %s: %d %s", path, p.status, p.header.Get("Location"))
		}
	}
	for _, path := range []string{"/domains", "/logout", "/settings/keys", "/alerts/x/dismiss"} {
		if p := e.send("POST", path, "", url.Values{}); p.status != http.StatusSeeOther {
			t.Errorf("POST %s: %d", path, p.status)
		}
	}
	cookie := e.signIn(e.fullA)
	if p := e.send("GET", "/api/v1/domains", cookie, nil); p.status != http.StatusUnauthorized {
		t.Errorf("API with only the session cookie: %d, want 401", p.status)
	}
	if p := e.send("GET", "/api/v1/nothing", cookie, nil); p.status != 404 || !strings.Contains(p.body, `"not_found"`) {
		t.Errorf("unknown API path: %d %s", p.status, p.body)
	}
}

// TestSignIn covers the cookie's flags, a wrong key's single message, the
// failed-sign-in limit shared with the API, and sign-out.
func TestSignIn(t *testing.T) {
	e := newEnv(t)
	p := e.send("GET", "/login", "", nil)
	if p.status != 200 || !strings.Contains(p.body, `name="key"`) || !strings.Contains(p.body, `<label for="key">`) {
		t.Fatalf("sign-in page: %d", p.status)
	}
	p = e.send("POST", "/login", "", url.Values{"key": {e.fullA}, "next": {"/settings"}})
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/settings" {
		t.Fatalf("sign-in: %d %q", p.status, p.header.Get("Location"))
	}
	sc := p.header.Get("Set-Cookie")
	for _, want := range []string{web.CookieName + "=", "Path=/", "HttpOnly", "SameSite=Lax"} {
		if !strings.Contains(sc, want) {
			t.Errorf("Set-Cookie %q lacks %s", sc, want)
		}
	}
	if strings.Contains(sc, "Secure") {
		t.Errorf("Secure cookie over plain HTTP without --public-url: %q", sc)
	}
	for _, next := range []string{"//evil.example/", "https://evil.example/", "/\\evil.example"} {
		p := e.send("POST", "/login", "", url.Values{"key": {e.fullA}, "next": {next}})
		if p.header.Get("Location") != "/" {
			t.Errorf("next=%s redirected to %q", next, p.header.Get("Location"))
		}
	}

	var msgs []string
	for _, bad := range []string{"", "nope", "dmk_" + strings.Repeat("0", 32), e.fullA + "x"} {
		p := e.send("POST", "/login", "", url.Values{"key": {bad}})
		if p.status != http.StatusUnauthorized || strings.Contains(p.header.Get("Set-Cookie"), web.CookieName+"=") && !strings.Contains(p.header.Get("Set-Cookie"), "Max-Age=0") {
			t.Errorf("key %q: %d %q", bad, p.status, p.header.Get("Set-Cookie"))
		}
		msgs = append(msgs, regexp.MustCompile(`role="alert">[^<]*`).FindString(p.body))
	}
	for _, m := range msgs[1:] {
		if m != msgs[0] || m == "" {
			t.Errorf("messages differ: %q", msgs)
		}
	}
	// 4 failures so far; the limit is 30 per minute per address, shared
	// with the API.
	for range 26 {
		e.send("POST", "/login", "", url.Values{"key": {"wrong"}})
	}
	if p := e.send("POST", "/login", "", url.Values{"key": {e.fullA}}); p.status != http.StatusTooManyRequests || p.header.Get("Retry-After") == "" {
		t.Errorf("31st attempt with the right key: %d", p.status)
	}
	if p := e.send("GET", "/api/v1/domains", "", nil, "X-API-Key", e.fullA); p.status != http.StatusTooManyRequests {
		t.Errorf("API after failed sign-ins: %d, want 429", p.status)
	}
	e.clock.Advance(61 * time.Second)
	cookie := e.signIn(e.fullA)

	token := e.csrf(cookie)
	if p := e.send("POST", "/logout", cookie, url.Values{"csrf_token": {token}}); p.status != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", p.status)
	}
	if _, _, _, err := e.db.FindSession(cookie, e.clock.Now()); err == nil {
		t.Error("session survives sign-out")
	}
	if p := e.send("GET", "/", cookie, nil); p.status != http.StatusSeeOther {
		t.Errorf("after sign-out: %d", p.status)
	}
}

// TestSecureCookieWithPublicURL ensures an https public URL makes the
// cookie Secure and only its origin may POST.
func TestSecureCookieWithPublicURL(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch())
	db := storetest.OpenWithClock(t, clock)
	org := storetest.MustOrganization(t, db, "alpha", store.PlanUnlimited)
	_, key := storetest.MustAPIKey(t, db, org.ID, store.ScopeFull)
	ui, err := web.New(web.Config{Store: db, PublicURL: "https://dmarc.example.net/", Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ui)
	defer srv.Close()
	post := func(origin string) *http.Response {
		req, _ := http.NewRequest("POST", srv.URL+"/login", strings.NewReader("key="+key))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", origin)
		resp, err := (&http.Transport{}).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := post(srv.URL); resp.StatusCode != http.StatusForbidden {
		t.Errorf("origin %s: %d, want 403", srv.URL, resp.StatusCode)
	}
	resp := post("https://dmarc.example.net")
	if resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Set-Cookie"), "Secure") {
		t.Errorf("public origin: %d %q", resp.StatusCode, resp.Header.Get("Set-Cookie"))
	}
	for _, bad := range []string{"ftp://x", "https://", "https://a/b", "https://u:p@a", "dmarc.example.net"} {
		if _, err := web.New(web.Config{Store: db, PublicURL: bad}); err == nil {
			t.Errorf("public URL %q accepted", bad)
		}
	}
}

// TestCSRF ensures a state-changing POST without the session's token, with
// another session's token, or from another origin is 403 and changes
// nothing; with it the change happens.
func TestCSRF(t *testing.T) {
	e := newEnv(t)
	cookie := e.signIn(e.fullA)
	other := e.signIn(e.fullA)
	token, otherToken := e.csrf(cookie), e.csrf(other)
	if token == otherToken {
		t.Fatal("two sessions share a CSRF token")
	}
	path := "/domains/" + e.domA.ID + "/delete"
	for name, c := range map[string]struct {
		form    url.Values
		headers []string
	}{
		"NoToken":      {url.Values{}, nil},
		"EmptyToken":   {url.Values{"csrf_token": {""}}, nil},
		"WrongToken":   {url.Values{"csrf_token": {strings.Repeat("0", 64)}}, nil},
		"OtherSession": {url.Values{"csrf_token": {otherToken}}, nil},
		"CrossOrigin":  {url.Values{"csrf_token": {token}}, []string{"Origin", "https://evil.example"}},
		"NullOrigin":   {url.Values{"csrf_token": {token}}, []string{"Origin", "null"}},
		"CrossReferer": {url.Values{"csrf_token": {token}}, []string{"Referer", "https://evil.example/x"}},
	} {
		p := e.send("POST", path, cookie, c.form, c.headers...)
		if p.status != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, p.status)
		}
		if _, err := e.db.FindDomain(e.orgA.ID, e.domA.ID); err != nil {
			t.Fatalf("%s: the domain is gone: %v", name, err)
		}
	}
	p := e.send("POST", path, cookie, url.Values{"csrf_token": {token}}, "Origin", e.srv.URL)
	if p.status != http.StatusSeeOther {
		t.Fatalf("with the token: %d %s", p.status, p.body)
	}
	if _, err := e.db.FindDomain(e.orgA.ID, e.domA.ID); err == nil {
		t.Error("the domain survived its deletion")
	}
}

// TestReadOnlyKey ensures a read key sees no write buttons and its write
// POSTs are 403 and change nothing.
func TestReadOnlyKey(t *testing.T) {
	e := newEnv(t)
	cookie := e.signIn(e.readA)
	token := e.csrf(cookie)
	for _, path := range []string{"/", "/domains/" + e.domA.ID, "/settings/keys"} {
		p := e.send("GET", path, cookie, nil)
		if p.status != 200 || !strings.Contains(p.body, "read-only") {
			t.Errorf("GET %s: %d", path, p.status)
		}
		for _, w := range []string{`action="/domains"`, "/delete\"", "/revoke\"", `action="/settings/keys"`, "Add a domain</a>"} {
			if strings.Contains(p.body, w) {
				t.Errorf("GET %s shows a write control %s", path, w)
			}
		}
	}
	for _, c := range []struct{ path, field, value string }{
		{"/domains", "name", "new.example"},
		{"/domains/" + e.domA.ID + "/delete", "", ""},
		{"/settings/keys", "name", "sneaky"},
		{"/settings/keys/" + e.fullAID + "/revoke", "", ""},
	} {
		form := url.Values{"csrf_token": {token}}
		if c.field != "" {
			form.Set(c.field, c.value)
		}
		if p := e.send("POST", c.path, cookie, form); p.status != http.StatusForbidden {
			t.Errorf("POST %s: %d, want 403", c.path, p.status)
		}
	}
	if ds, _, _ := e.db.ListDomains(e.orgA.ID, store.Page{Page: 1, Limit: 10}); len(ds) != 1 {
		t.Errorf("%d domains, want 1", len(ds))
	}
	if ks, _ := e.db.ListAPIKeys(e.orgA.ID); len(ks) != 2 || !ks[0].Active() {
		t.Errorf("keys changed: %+v", ks)
	}
	// Signing out is not a write.
	if p := e.send("POST", "/logout", cookie, url.Values{"csrf_token": {token}}); p.status != http.StatusSeeOther {
		t.Errorf("read key sign-out: %d", p.status)
	}
}

// TestTenantIsolation ensures another organization's ids are the 404 page,
// for every route that takes one.
func TestTenantIsolation(t *testing.T) {
	e := newEnv(t)
	other := mustReport(t, e.db, e.domB, storetest.Epoch().Add(-48*time.Hour), "google.com", goodRecords())
	alert := mustAlert(t, e.db, e.domB, "b's alert", "msg")
	bKey, _ := e.db.ListAPIKeys(e.orgB.ID)
	cookie := e.signIn(e.fullA)
	token := e.csrf(cookie)
	for _, path := range []string{"/domains/" + e.domB.ID, "/domains/" + e.domB.ID + "/delete", "/reports/" + other.ID,
		"/domains/nonsense", "/reports/nonsense", "/nothing/here"} {
		p := e.send("GET", path, cookie, nil)
		if p.status != 404 || !strings.Contains(p.body, "Not found") || strings.Contains(p.body, "beta.example") {
			t.Errorf("GET %s: %d", path, p.status)
		}
	}
	for _, path := range []string{"/domains/" + e.domB.ID + "/delete", "/domains/" + e.domB.ID + "/verify",
		"/alerts/" + alert.ID + "/dismiss", "/settings/keys/" + bKey[0].ID + "/revoke"} {
		if p := e.send("POST", path, cookie, url.Values{"csrf_token": {token}}); p.status != 404 {
			t.Errorf("POST %s: %d, want 404", path, p.status)
		}
	}
	if _, err := e.db.FindDomain(e.orgB.ID, e.domB.ID); err != nil {
		t.Error("B's domain deleted by A")
	}
	if a := storetest.Alert(t, e.db, e.orgB.ID, alert.ID); a.Status == store.AlertDismissed {
		t.Error("B's alert dismissed by A")
	}
	if k := storetest.APIKey(t, e.db, e.orgB.ID, bKey[0].ID); !k.Active() {
		t.Error("B's key revoked by A")
	}
	if p := e.send("GET", "/reports", cookie, nil); strings.Contains(p.body, other.ID) {
		t.Error("A's report list shows B's report")
	}
}

// TestSessionExpiry ensures sessions end after 12 hours idle, 7 days in
// all, and at once when their key is revoked (through the API or the UI).
func TestSessionExpiry(t *testing.T) {
	e := newEnv(t)
	cookie := e.signIn(e.fullA)
	start := e.clock.Now()
	for e.clock.Now().Add(11 * time.Hour).Before(start.Add(store.SessionMaxAge)) { // busy: never idle for long
		e.clock.Advance(11 * time.Hour)
		if p := e.send("GET", "/", cookie, nil); p.status != 200 {
			t.Fatalf("at %v: %d", e.clock.Now(), p.status)
		}
	}
	e.clock.Set(start.Add(store.SessionMaxAge))
	if p := e.send("GET", "/", cookie, nil); p.status != http.StatusSeeOther {
		t.Errorf("after 7 days: %d", p.status)
	}
	cookie = e.signIn(e.fullA)
	e.clock.Advance(store.SessionIdleTimeout)
	if p := e.send("GET", "/", cookie, nil); p.status != http.StatusSeeOther {
		t.Errorf("12 hours idle: %d", p.status)
	}

	cookie = e.signIn(e.readA)
	keys, _ := e.db.ListAPIKeys(e.orgA.ID)
	if p := e.send("DELETE", "/api/v1/keys/"+keys[1].ID, "", nil, "X-API-Key", e.fullA); p.status != 204 {
		t.Fatalf("revoke: %d", p.status)
	}
	if p := e.send("GET", "/", cookie, nil); p.status != http.StatusSeeOther {
		t.Errorf("session of a revoked key: %d", p.status)
	}

	// Revoking the session's own key in the UI signs out.
	cookie = e.signIn(e.fullA)
	p := e.send("POST", "/settings/keys/"+e.fullAID+"/revoke", cookie, url.Values{"csrf_token": {e.csrf(cookie)}})
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/login" {
		t.Errorf("revoking the session's key: %d %q", p.status, p.header.Get("Location"))
	}
	if p := e.send("GET", "/", cookie, nil); p.status != http.StatusSeeOther {
		t.Errorf("after revoking its key: %d", p.status)
	}
}

// TestSecurityHeadersAndAssets ensures every page carries the headers of
// UI.md, no inline script, and assets are content-hashed and immutable.
func TestSecurityHeadersAndAssets(t *testing.T) {
	e := newEnv(t)
	cookie := e.signIn(e.fullA)
	for _, path := range []string{"/login", "/", "/domains/" + e.domA.ID, "/nothing"} {
		p := e.send("GET", path, cookie, nil)
		csp := p.header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") ||
			strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s: CSP %q", path, csp)
		}
		if p.header.Get("X-Content-Type-Options") != "nosniff" || p.header.Get("Referrer-Policy") != "same-origin" {
			t.Errorf("%s: headers %v", path, p.header)
		}
		if regexp.MustCompile(`<script>|<script [^>]*>[^<]`).MatchString(p.body) || strings.Contains(p.body, " onclick=") ||
			strings.Contains(p.body, " style=") {
			t.Errorf("%s has an inline script or style", path)
		}
	}
	p := e.send("GET", "/login", "", nil)
	assets := regexp.MustCompile(`(?:href|src)="(/static/[^"]+)"`).FindAllStringSubmatch(p.body, -1)
	if len(assets) != 3 {
		t.Fatalf("assets on the page: %v", assets)
	}
	for _, a := range assets {
		if !regexp.MustCompile(`^/static/(app|favicon)\.[0-9a-f]{12}\.(css|js|svg)$`).MatchString(a[1]) {
			t.Errorf("asset name %s has no content hash", a[1])
		}
		r := e.send("GET", a[1], "", nil)
		if r.status != 200 || !strings.Contains(r.header.Get("Cache-Control"), "immutable") || len(r.body) == 0 {
			t.Errorf("%s: %d %q", a[1], r.status, r.header.Get("Cache-Control"))
		}
	}
	if r := e.send("GET", "/static/app.css", "", nil); r.status != 404 {
		t.Errorf("unhashed asset: %d", r.status)
	}
}
