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

	"github.com/dmarcd/dmarcd/dnscheck"
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

var _ = dnscheck.Checker{}

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
