package web

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/julienschmidt/httprouter"
	"golang.org/x/oauth2"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/internal/clientaddr"
)

// OpenID Connect sign-in (issue 26): the authorization code flow with
// PKCE against the provider of --oidc-issuer. GET /auth/oidc sends the
// browser to the provider with a fresh state, nonce and PKCE verifier,
// kept here in memory under the state for oidcFlowTTL and bound to the
// browser by the cookie oidcCookie; GET /login/oidc/callback checks the
// state against the cookie, exchanges the code (with the verifier),
// verifies the ID token (signature, issuer, audience, expiry, nonce) and
// hands its email and email_verified claims to app.SignInOIDC, which
// decides who that is. Discovery runs at start-up (DiscoverOIDC); when the
// provider is unreachable then, the first sign-in tries again, at most
// once per oidcRetry.

// OIDCConfig configures OpenID Connect sign-in.
type OIDCConfig struct {
	// Issuer is the provider's issuer URL (--oidc-issuer); its discovery
	// document is Issuer + "/.well-known/openid-configuration".
	Issuer string
	// ClientID and ClientSecret are dmarcd's credentials at the provider
	// (--oidc-client-id, --oidc-client-secret-file). The secret is never
	// logged nor shown.
	ClientID, ClientSecret string
	// Only turns password sign-in off (--oidc-only): the sign-in page
	// offers the provider alone (and the API-key form, unless that is
	// off too).
	Only bool
	// Name is the provider as the sign-in button names it; "" names it
	// by the issuer's host.
	Name string
	// HTTPClient makes every request to the provider (discovery, keys,
	// token, userinfo); cli builds it under the egress policy. nil:
	// http.DefaultClient, for tests only.
	HTTPClient *http.Client
}

const (
	// oidcCookie holds the state of a sign-in in flight.
	oidcCookie = "dmarcd_oidc"
	// oidcFlowTTL is how long a person may take at the provider.
	oidcFlowTTL = 10 * time.Minute
	// oidcRetry spaces discovery attempts after a failure.
	oidcRetry = 10 * time.Second
	// oidcMaxFlows bounds the sign-ins in flight (a flood of GET
	// /auth/oidc cannot grow memory without bound).
	oidcMaxFlows = 10000
	// OIDCCallbackPath is where the provider sends the browser back: the
	// redirect URL to register is --public-url + OIDCCallbackPath.
	OIDCCallbackPath = "/login/oidc/callback"
)

// oidcClient is the relying party: the discovered provider, and the
// sign-ins in flight.
type oidcClient struct {
	cfg OIDCConfig

	mu       sync.Mutex
	provider *oidc.Provider
	verifier *oidc.IDTokenVerifier
	lastTry  time.Time
	lastErr  error
	flows    map[string]oidcFlow // by state
}

// oidcFlow is one sign-in in flight.
type oidcFlow struct {
	nonce, verifier, next, redirect string
	expires                         time.Time
}

func newOIDCClient(cfg OIDCConfig) *oidcClient {
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	if cfg.Name == "" {
		if u, err := url.Parse(cfg.Issuer); err == nil && u.Host != "" {
			cfg.Name = u.Hostname()
		} else {
			cfg.Name = "single sign-on"
		}
	}
	return &oidcClient{cfg: cfg, flows: map[string]oidcFlow{}}
}

// ctx carries the egress client to go-oidc and oauth2, which take it from
// the context.
func (c *oidcClient) ctx(parent context.Context) context.Context {
	return oidc.ClientContext(parent, c.cfg.HTTPClient)
}

// discover fetches the provider's discovery document unless it is known;
// after a failure it tries again only once oidcRetry has passed.
func (c *oidcClient) discover(ctx context.Context, now time.Time) (*oidc.Provider, *oidc.IDTokenVerifier, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.provider != nil {
		return c.provider, c.verifier, nil
	}
	if c.lastErr != nil && now.Sub(c.lastTry) < oidcRetry {
		return nil, nil, c.lastErr
	}
	c.lastTry = now
	p, err := oidc.NewProvider(c.ctx(ctx), c.cfg.Issuer)
	if err != nil {
		c.lastErr = fmt.Errorf("OpenID Connect discovery at %s failed: %w", c.cfg.Issuer, err)
		return nil, nil, c.lastErr
	}
	c.provider, c.lastErr = p, nil
	// The key set fetches with the egress client too, and outlives this
	// request's context.
	c.verifier = p.VerifierContext(c.ctx(context.Background()), &oidc.Config{ClientID: c.cfg.ClientID})
	return c.provider, c.verifier, nil
}

func (c *oidcClient) oauth(p *oidc.Provider, redirect string) *oauth2.Config {
	return &oauth2.Config{ClientID: c.cfg.ClientID, ClientSecret: c.cfg.ClientSecret, Endpoint: p.Endpoint(),
		RedirectURL: redirect, Scopes: []string{oidc.ScopeOpenID, "email"}}
}

// begin records a new sign-in and returns its state.
func (c *oidcClient) begin(f oidcFlow, now time.Time) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.flows) >= oidcMaxFlows {
		for s, x := range c.flows {
			if now.After(x.expires) {
				delete(c.flows, s)
			}
		}
		if len(c.flows) >= oidcMaxFlows { // all live: drop one
			for s := range c.flows {
				delete(c.flows, s)
				break
			}
		}
	}
	state := randomToken()
	f.expires = now.Add(oidcFlowTTL)
	c.flows[state] = f
	return state
}

// finish takes the sign-in of state out (each state serves once).
func (c *oidcClient) finish(state string, now time.Time) (oidcFlow, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.flows[state]
	delete(c.flows, state)
	return f, ok && now.Before(f.expires)
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// DiscoverOIDC fetches the provider's discovery document, when OpenID
// Connect is configured, so that a wrong or unreachable --oidc-issuer
// shows in the log at start-up. An error does not stop the server: the
// first sign-in tries again.
func (h *Handler) DiscoverOIDC(ctx context.Context) error {
	if h.oidc == nil {
		return nil
	}
	_, _, err := h.oidc.discover(ctx, h.now())
	return err
}

// callbackURL is the redirect URL registered at the provider.
func (h *Handler) callbackURL(r *http.Request) string {
	return h.origin(r) + OIDCCallbackPath
}

// startOIDC sends the browser to the provider.
func (h *Handler) startOIDC(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	p, _, err := h.oidc.discover(r.Context(), h.now())
	if err != nil {
		h.log.Error("OpenID Connect sign-in unavailable", "error", err)
		h.renderLogin(w, r, http.StatusServiceUnavailable, loginPage{Next: safeNext(r.URL.Query().Get("next")),
			Error: "Sign-in with " + h.oidc.cfg.Name + " is unavailable: dmarcd cannot reach the provider. Try again in a minute; the server log says why."})
		return
	}
	f := oidcFlow{nonce: randomToken(), verifier: oauth2.GenerateVerifier(),
		next: safeNext(r.URL.Query().Get("next")), redirect: h.callbackURL(r)}
	state := h.oidc.begin(f, h.now())
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Value: state, Path: OIDCCallbackPath, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: h.secure(r), MaxAge: int(oidcFlowTTL.Seconds())})
	target := h.oidc.oauth(p, f.redirect).AuthCodeURL(state, oidc.Nonce(f.nonce), oauth2.S256ChallengeOption(f.verifier))
	http.Redirect(w, r, target, http.StatusFound)
}

// oidcFailed is the one message of a sign-in the application layer
// refused: no account, no invitation, or an address the provider has not
// verified.
const oidcFailed = "dmarcd has no account or invitation for the address your provider signed you in with, or the provider has not verified that address. Ask an owner of your organization for an invitation to that address."

// oidcCallback finishes a sign-in: state, code, ID token, then
// app.SignInOIDC. Every refusal is logged with its reason and shown as
// one message on the sign-in page.
func (h *Handler) oidcCallback(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	addr := clientaddr.Of(r)
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Value: "", Path: OIDCCallbackPath, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: h.secure(r), MaxAge: -1})
	q := r.URL.Query()
	fail := func(status int, reason, msg string, args ...any) {
		h.log.Warn("sign-in refused", append([]any{"method", "oidc", "reason", reason, "remote", addr}, args...)...)
		h.renderLogin(w, r, status, loginPage{Error: msg})
	}
	state := q.Get("state")
	c, err := r.Cookie(oidcCookie)
	if state == "" || err != nil || subtle.ConstantTimeCompare([]byte(c.Value), []byte(state)) != 1 {
		fail(http.StatusBadRequest, "state missing or not this browser's", "That sign-in link is stale or was started in another browser. Sign in again.")
		return
	}
	flow, ok := h.oidc.finish(state, h.now())
	if !ok {
		fail(http.StatusBadRequest, "unknown or expired state", "That sign-in took too long or was already used. Sign in again.")
		return
	}
	if e := q.Get("error"); e != "" {
		fail(http.StatusUnauthorized, "provider answered an error", "The provider did not sign you in ("+trimText(e, 60)+"). Try again.",
			"error", trimText(e, 60), "description", trimText(q.Get("error_description"), 200))
		return
	}
	email, verified, err := h.oidcIdentity(r.Context(), flow, q.Get("code"))
	if err != nil {
		h.log.Error("OpenID Connect sign-in failed", "error", err, "remote", addr)
		h.renderLogin(w, r, http.StatusBadGateway, loginPage{Next: flow.next,
			Error: "The provider's answer could not be checked, so you are not signed in. Try again; if it persists, the server log says why."})
		return
	}
	token, actor, err := h.app.SignInOIDC(addr, email, verified)
	if err != nil {
		switch app.KindOf(err) {
		case app.Unauthenticated, app.NotFound, app.Forbidden, app.Invalid:
			fail(http.StatusUnauthorized, "no account, invitation or verified address", oidcFailed,
				"email", email, "email_verified", verified)
		case app.Throttled:
			fail(http.StatusTooManyRequests, "too many failed sign-ins", "Too many failed sign-ins. Wait a minute and try again.")
		default:
			h.errorPage(w, nil, err)
		}
		return
	}
	h.log.Info("signed in", "method", "oidc", "email", email, "org_id", actor.Org().ID, "remote", addr)
	h.setCookie(w, r, token)
	http.Redirect(w, r, flow.next, http.StatusSeeOther)
}

// oidcIdentity exchanges code for tokens (with the flow's PKCE verifier),
// verifies the ID token and its nonce, and returns the email claims: from
// the ID token, else from the userinfo endpoint.
func (h *Handler) oidcIdentity(ctx context.Context, flow oidcFlow, code string) (string, bool, error) {
	if code == "" {
		return "", false, errors.New("the provider's redirect carries no code")
	}
	p, verifier, err := h.oidc.discover(ctx, h.now())
	if err != nil {
		return "", false, err
	}
	ctx = h.oidc.ctx(ctx)
	oc := h.oidc.oauth(p, flow.redirect)
	tok, err := oc.Exchange(ctx, code, oauth2.VerifierOption(flow.verifier))
	if err != nil {
		return "", false, fmt.Errorf("exchanging the code: %w", err)
	}
	raw, ok := tok.Extra("id_token").(string)
	if !ok || raw == "" {
		return "", false, errors.New("the token response carries no id_token")
	}
	idt, err := verifier.Verify(ctx, raw)
	if err != nil {
		return "", false, fmt.Errorf("verifying the ID token: %w", err)
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(flow.nonce)) != 1 {
		return "", false, errors.New("the ID token's nonce is not this sign-in's")
	}
	var claims struct {
		Email         string `json:"email"`
		EmailVerified any    `json:"email_verified"`
	}
	if err := idt.Claims(&claims); err != nil {
		return "", false, fmt.Errorf("reading the ID token's claims: %w", err)
	}
	if claims.Email != "" {
		return claims.Email, isTrueClaim(claims.EmailVerified), nil
	}
	info, err := p.UserInfo(ctx, oauth2.StaticTokenSource(tok))
	if err != nil {
		return "", false, fmt.Errorf("reading userinfo: %w", err)
	}
	if info.Subject != idt.Subject {
		return "", false, errors.New("userinfo names another subject than the ID token")
	}
	return info.Email, info.EmailVerified, nil
}

// isTrueClaim reads email_verified, a boolean some providers send as the
// string "true".
func isTrueClaim(v any) bool {
	switch b := v.(type) {
	case bool:
		return b
	case string:
		return b == "true"
	}
	return false
}

// trimText cuts a provider's text for the page and the log.
func trimText(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
