package web_test

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/internal/egress"
	"github.com/dmarcd/dmarcd/internal/oidctest"
	"github.com/dmarcd/dmarcd/web"
)

// newOIDCEnv is newEnv with single sign-on through a real OpenID
// Provider on loopback, reached through the egress policy (private
// addresses allowed, its certificate trusted), as serve wires it.
func newOIDCEnv(t *testing.T, only bool) (*env, *oidctest.Provider) {
	t.Helper()
	prov := oidctest.Start(t)
	pol := egress.Policy{AllowPrivate: true, RootCAs: prov.RootCAs()}
	client := &http.Client{Transport: egress.NewTransport(egress.SystemResolver{}, pol, 5*time.Second), Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	e := newEnvUI(t, egress.Policy{}, nil, func(c *web.Config) {
		c.OIDC = &web.OIDCConfig{Issuer: prov.Issuer, ClientID: prov.ClientID, ClientSecret: prov.ClientSecret,
			Only: only, Name: "Test IdP", HTTPClient: client}
	})
	prov.SetRedirectURIs(e.srv.URL + web.OIDCCallbackPath)
	return e, prov
}

// browser is a cookie-keeping client that follows redirects, trusting the
// provider's certificate.
func browser(t *testing.T, prov *oidctest.Provider) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: 20 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: prov.RootCAs()}}}
}

var opLoginID = regexp.MustCompile(`name="id" value="([^"]+)"`)

// oidcSignIn runs a whole sign-in in b: /auth/oidc, the provider's form
// submitted as email, back to dmarcd. It returns the last answer.
func oidcSignIn(t *testing.T, e *env, prov *oidctest.Provider, b *http.Client, email string) (*http.Response, string) {
	t.Helper()
	resp, err := b.Get(e.srv.URL + "/auth/oidc?next=/settings")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasPrefix(resp.Request.URL.String(), prov.Issuer+"/login") {
		t.Fatalf("/auth/oidc ended at %s (%d): %s", resp.Request.URL, resp.StatusCode, body)
	}
	m := opLoginID.FindSubmatch(body)
	if m == nil {
		t.Fatalf("no auth request id on the provider's page: %s", body)
	}
	resp, err = b.PostForm(prov.Issuer+"/login", url.Values{"id": {string(m[1])}, "email": {email}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

// TestOIDCSignIn signs in through a real OpenID Provider: a person with a
// verified address of an account, refused with an unverified address or
// an unknown one (one message), and an invitation accepted by signing in
// with its address; the state is single use and bound to the browser.
func TestOIDCSignIn(t *testing.T) {
	e, prov := newOIDCEnv(t, false)
	e.person(e.orgA, "owner@alpha.example", "owner")
	prov.AddUser("owner@alpha.example", true)
	prov.AddUser("unverified@alpha.example", false)
	prov.AddUser("stranger@alpha.example", true)
	prov.AddUser("invited@beta.example", true)

	login := e.send("GET", "/login", "", nil)
	if !strings.Contains(login.body, `href="/auth/oidc?next=%2f"`) || !strings.Contains(login.body, "Sign in with Test IdP") ||
		!strings.Contains(login.body, `name="password"`) {
		t.Errorf("sign-in page with single sign-on: %s", login.body)
	}

	b := browser(t, prov)
	resp, body := oidcSignIn(t, e, prov, b, "owner@alpha.example")
	if resp.StatusCode != 200 || resp.Request.URL.Path != "/settings" || !strings.Contains(body, "owner@alpha.example") {
		t.Fatalf("sign-in: %d at %s", resp.StatusCode, resp.Request.URL)
	}
	log := e.send("GET", "/settings/audit?action=sign-in.oidc", e.signInAs("owner@alpha.example"), nil)
	if !strings.Contains(log.body, "owner@alpha.example") {
		t.Error("the OIDC sign-in is not in the audit log")
	}

	var msgs []string
	for _, email := range []string{"unverified@alpha.example", "stranger@alpha.example"} {
		nb := browser(t, prov)
		resp, body := oidcSignIn(t, e, prov, nb, email)
		m := errorRE.FindStringSubmatch(body)
		if resp.StatusCode != http.StatusUnauthorized || m == nil || hasSession(nb, e, resp) {
			t.Fatalf("%s: %d %s", email, resp.StatusCode, body)
		}
		msgs = append(msgs, m[1])
	}
	if msgs[0] != msgs[1] {
		t.Errorf("unverified and unknown addresses get different messages: %q", msgs)
	}

	// An invitation is accepted by signing in with its address.
	if _, _, err := e.app.AddMember(app.Operator(e.orgB), "invited@beta.example", "viewer"); err != nil {
		t.Fatal(err)
	}
	resp, body = oidcSignIn(t, e, prov, browser(t, prov), "invited@beta.example")
	if resp.StatusCode != 200 || !strings.Contains(body, "invited@beta.example") || !strings.Contains(body, ">viewer<") ||
		!strings.Contains(body, e.orgB.Name) {
		t.Fatalf("invitation by single sign-on: %d at %s", resp.StatusCode, resp.Request.URL)
	}

	// A callback without this browser's state cookie, or replayed, signs
	// nobody in.
	nb := browser(t, prov)
	noJar := &http.Client{Transport: nb.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	start, err := noJar.Get(e.srv.URL + "/auth/oidc")
	if err != nil {
		t.Fatal(err)
	}
	start.Body.Close()
	u, _ := url.Parse(start.Header.Get("Location"))
	state := u.Query().Get("state")
	if state == "" || u.Query().Get("code_challenge_method") != "S256" || u.Query().Get("nonce") == "" {
		t.Fatalf("authorization request: %s", u)
	}
	cb, err := noJar.Get(e.srv.URL + web.OIDCCallbackPath + "?code=x&state=" + url.QueryEscape(state))
	if err != nil {
		t.Fatal(err)
	}
	cb.Body.Close()
	if cb.StatusCode != http.StatusBadRequest || sessionCookieSet(page{header: cb.Header}) {
		t.Errorf("a callback without the browser's cookie: %d", cb.StatusCode)
	}
}

// hasSession reports whether b holds a session cookie for dmarcd.
func hasSession(b *http.Client, e *env, _ *http.Response) bool {
	u, _ := url.Parse(e.srv.URL)
	for _, c := range b.Jar.Cookies(u) {
		if c.Name == web.CookieName && c.Value != "" {
			return true
		}
	}
	return false
}

// TestOIDCOnly ensures --oidc-only leaves the provider alone on the
// sign-in page and refuses a posted password.
func TestOIDCOnly(t *testing.T) {
	e, prov := newOIDCEnv(t, true)
	e.person(e.orgA, "owner@alpha.example", "owner")
	prov.AddUser("owner@alpha.example", true)
	login := e.send("GET", "/login", "", nil)
	if strings.Contains(login.body, `name="password"`) || !strings.Contains(login.body, "Sign in with Test IdP") {
		t.Errorf("--oidc-only sign-in page: %s", login.body)
	}
	// The form is not on the page; a well-formed post is refused too.
	token := strings.Repeat("t", 43)
	if p := e.send("POST", "/login", "", url.Values{"email": {"owner@alpha.example"}, "password": {testPassword}, "csrf_token": {token}},
		"Cookie", "dmarcd_login="+token); p.status != http.StatusForbidden || sessionCookieSet(p) || !strings.Contains(p.body, "Passwords are turned off") {
		t.Errorf("a password with --oidc-only: %d", p.status)
	}
	if resp, _ := oidcSignIn(t, e, prov, browser(t, prov), "owner@alpha.example"); resp.StatusCode != 200 || resp.Request.URL.Path != "/settings" {
		t.Errorf("single sign-on with --oidc-only: %d at %s", resp.StatusCode, resp.Request.URL)
	}
}

// TestOIDCProviderDown ensures an unreachable provider is a clear page,
// not a hang, and that the next sign-in tries discovery again.
func TestOIDCProviderDown(t *testing.T) {
	e, prov := newOIDCEnv(t, false)
	prov.Server.Close()
	p := e.send("GET", "/auth/oidc", "", nil)
	if p.status != http.StatusServiceUnavailable || !strings.Contains(p.body, "cannot reach the provider") {
		t.Errorf("provider down: %d %s", p.status, p.body)
	}
}
