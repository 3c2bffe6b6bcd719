// Package oidctest runs a real OpenID Provider on loopback for tests: the
// provider of github.com/zitadel/oidc (package op: discovery, the
// authorization endpoint with PKCE, the token endpoint, signed ID tokens,
// JWKS, userinfo) over an in-memory storage of users and one client,
// served over HTTPS with a certificate the test trusts. Its login page is
// a form naming the user to sign in as: tests (and browsers) submit it
// as they would a real provider's.
package oidctest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"golang.org/x/text/language"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// User is a person the provider knows.
type User struct {
	Subject       string
	Email         string
	EmailVerified bool
}

// Provider is a running OpenID Provider. Its fields are set by Start.
type Provider struct {
	// Issuer is the provider's https URL (discovery under
	// /.well-known/openid-configuration).
	Issuer string
	// ClientID and ClientSecret are the one client's credentials.
	ClientID, ClientSecret string
	// CAFile is a PEM file with the certificate the provider serves,
	// for the client's trust (--oidc-ca-file).
	CAFile string
	// Server is the HTTPS server; its Client() trusts the certificate.
	Server *httptest.Server

	st *storage
}

// Start runs a provider until the test ends. redirectURIs are the
// client's registered redirect URIs.
func Start(t testing.TB, redirectURIs ...string) *Provider {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	st := &storage{
		users:    map[string]*User{},
		requests: map[string]*authRequest{},
		codes:    map[string]string{},
		tokens:   map[string]*accessToken{},
		key:      key,
		client:   &client{id: "dmarcd", secret: "s3cret-" + randomID(), redirects: redirectURIs},
	}
	p := &Provider{ClientID: st.client.id, ClientSecret: st.client.secret, st: st}
	mux := http.NewServeMux()
	srv := httptest.NewUnstartedServer(mux)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	p.Server, p.Issuer = srv, srv.URL
	st.client.loginURL = func(id string) string { return p.Issuer + "/login?id=" + id }

	cfg := &op.Config{
		CryptoKey:                sha256.Sum256([]byte(randomID())),
		DefaultLogoutRedirectURI: "/",
		CodeMethodS256:           true,
		AuthMethodPost:           true,
		SupportedUILocales:       []language.Tag{language.English},
	}
	prov, err := op.NewProvider(cfg, st, op.StaticIssuer(p.Issuer),
		op.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	callback := op.AuthCallbackURL(prov)
	interceptor := op.NewIssuerInterceptor(prov.IssuerFromRequest)
	mux.Handle("/login", interceptor.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.login(w, r, callback)
	}))
	mux.Handle("/", prov)

	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	p.CAFile = filepath.Join(t.TempDir(), "oidc-ca.pem")
	if err := os.WriteFile(p.CAFile, ca, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// AddUser makes a person known to the provider.
func (p *Provider) AddUser(email string, verified bool) {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	sub := "u-" + randomID()
	p.st.users[sub] = &User{Subject: sub, Email: email, EmailVerified: verified}
}

// SetRedirectURIs replaces the client's registered redirect URIs.
func (p *Provider) SetRedirectURIs(uris ...string) {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	p.st.client.redirects = uris
}

// RootCAs is a pool with the provider's certificate.
func (p *Provider) RootCAs() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.Server.Certificate())
	return pool
}

var loginForm = template.Must(template.New("login").Parse(`<!doctype html>
<title>Test provider: sign in</title>
<h1>Test provider</h1>
{{with .Error}}<p id="error">{{.}}</p>{{end}}
<form method="post" action="/login">
<input type="hidden" name="id" value="{{.ID}}">
<label>Email <input id="email" name="email" type="email"></label>
<button id="submit" type="submit">Sign in</button>
</form>`))

// login is the provider's sign-in page: GET shows the form, POST signs
// the auth request in as the user of that email and hands it back to the
// provider, which redirects to the client with a code.
func (p *Provider) login(w http.ResponseWriter, r *http.Request, callback func(context.Context, string) string) {
	if r.Method == http.MethodGet {
		_ = loginForm.Execute(w, map[string]string{"ID": r.URL.Query().Get("id")})
		return
	}
	_ = r.ParseForm()
	id, email := r.PostForm.Get("id"), r.PostForm.Get("email")
	p.st.mu.Lock()
	req := p.st.requests[id]
	var user *User
	for _, u := range p.st.users {
		if u.Email == email {
			user = u
		}
	}
	if req != nil && user != nil {
		req.subject, req.done, req.authTime = user.Subject, true, time.Now()
	}
	p.st.mu.Unlock()
	switch {
	case req == nil:
		http.Error(w, "unknown auth request", http.StatusBadRequest)
	case user == nil:
		w.WriteHeader(http.StatusUnauthorized)
		_ = loginForm.Execute(w, map[string]string{"ID": id, "Error": "unknown user"})
	default:
		http.Redirect(w, r, callback(r.Context(), id), http.StatusFound)
	}
}

func randomID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// storage is the provider's in-memory op.Storage.
type storage struct {
	mu       sync.Mutex
	users    map[string]*User // by subject
	requests map[string]*authRequest
	codes    map[string]string // code -> request id
	tokens   map[string]*accessToken
	key      *rsa.PrivateKey
	client   *client
}

type accessToken struct {
	subject, clientID string
	scopes            []string
	expires           time.Time
}

var errNotFound = errors.New("oidctest: not found")

func (s *storage) CreateAuthRequest(_ context.Context, ar *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	req := &authRequest{id: randomID(), created: time.Now(), clientID: ar.ClientID, redirectURI: ar.RedirectURI,
		state: ar.State, nonce: ar.Nonce, scopes: ar.Scopes, responseType: ar.ResponseType, responseMode: ar.ResponseMode}
	if ar.CodeChallenge != "" {
		req.challenge = &oidc.CodeChallenge{Challenge: ar.CodeChallenge, Method: ar.CodeChallengeMethod}
	}
	s.requests[req.id] = req
	return req, nil
}

func (s *storage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.requests[id]; ok {
		return r, nil
	}
	return nil, errNotFound
}

func (s *storage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	s.mu.Lock()
	id, ok := s.codes[code]
	s.mu.Unlock()
	if !ok {
		return nil, errNotFound
	}
	return s.AuthRequestByID(ctx, id)
}

func (s *storage) SaveAuthCode(_ context.Context, id, code string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.codes[code] = id
	return nil
}

func (s *storage) DeleteAuthRequest(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.requests, id)
	for c, rid := range s.codes {
		if rid == id {
			delete(s.codes, c)
		}
	}
	return nil
}

func (s *storage) CreateAccessToken(_ context.Context, tr op.TokenRequest) (string, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, exp := randomID(), time.Now().Add(5*time.Minute)
	clientID := ""
	if ar, ok := tr.(*authRequest); ok {
		clientID = ar.clientID
	}
	s.tokens[id] = &accessToken{subject: tr.GetSubject(), clientID: clientID, scopes: tr.GetScopes(), expires: exp}
	return id, exp, nil
}

func (s *storage) CreateAccessAndRefreshTokens(context.Context, op.TokenRequest, string) (string, string, time.Time, error) {
	return "", "", time.Time{}, errors.New("oidctest: no refresh tokens")
}

func (s *storage) TokenRequestByRefreshToken(context.Context, string) (op.RefreshTokenRequest, error) {
	return nil, op.ErrInvalidRefreshToken
}

func (s *storage) TerminateSession(context.Context, string, string) error { return nil }

func (s *storage) RevokeToken(_ context.Context, id, _, _ string) *oidc.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tokens, id)
	return nil
}

func (s *storage) GetRefreshTokenInfo(context.Context, string, string) (string, string, error) {
	return "", "", op.ErrInvalidRefreshToken
}

type signingKey struct{ key *rsa.PrivateKey }

func (k signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k signingKey) Key() any                                    { return k.key }
func (k signingKey) ID() string                                  { return "k1" }

type publicKey struct{ key *rsa.PrivateKey }

func (k publicKey) ID() string                         { return "k1" }
func (k publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return &k.key.PublicKey }

func (s *storage) SigningKey(context.Context) (op.SigningKey, error) { return signingKey{s.key}, nil }

func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s *storage) KeySet(context.Context) ([]op.Key, error) { return []op.Key{publicKey{s.key}}, nil }

func (s *storage) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id != s.client.id {
		return nil, errNotFound
	}
	c := *s.client
	c.redirects = slices.Clone(c.redirects)
	return &c, nil
}

func (s *storage) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	if id != s.client.id || secret != s.client.secret {
		return errors.New("oidctest: wrong client credentials")
	}
	return nil
}

// setUserinfo fills the claims of the scopes asked for: the subject and,
// with the email scope, email and email_verified.
func (s *storage) setUserinfo(info *oidc.UserInfo, subject string, scopes []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.users[subject]
	if u == nil {
		return errNotFound
	}
	info.Subject = u.Subject
	if slices.Contains(scopes, oidc.ScopeEmail) {
		info.Email, info.EmailVerified = u.Email, oidc.Bool(u.EmailVerified)
	}
	return nil
}

func (s *storage) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil
}

func (s *storage) SetUserinfoFromRequest(_ context.Context, info *oidc.UserInfo, r op.IDTokenRequest, scopes []string) error {
	return s.setUserinfo(info, r.GetSubject(), scopes)
}

func (s *storage) SetUserinfoFromToken(_ context.Context, info *oidc.UserInfo, tokenID, _, _ string) error {
	s.mu.Lock()
	t := s.tokens[tokenID]
	s.mu.Unlock()
	if t == nil || time.Now().After(t.expires) {
		return errNotFound
	}
	return s.setUserinfo(info, t.subject, t.scopes)
}

func (s *storage) SetIntrospectionFromToken(context.Context, *oidc.IntrospectionResponse, string, string, string) error {
	return errNotFound
}

func (s *storage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

func (s *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errNotFound
}

func (s *storage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, errNotFound
}

func (s *storage) Health(context.Context) error { return nil }

// authRequest is one authorization request, done once the login page
// names its user.
type authRequest struct {
	id, clientID, redirectURI, state, nonce string
	scopes                                  []string
	responseType                            oidc.ResponseType
	responseMode                            oidc.ResponseMode
	challenge                               *oidc.CodeChallenge
	created, authTime                       time.Time
	subject                                 string
	done                                    bool
}

func (a *authRequest) GetID() string                         { return a.id }
func (a *authRequest) GetACR() string                        { return "" }
func (a *authRequest) GetAMR() []string                      { return []string{"pwd"} }
func (a *authRequest) GetAudience() []string                 { return []string{a.clientID} }
func (a *authRequest) GetAuthTime() time.Time                { return a.authTime }
func (a *authRequest) GetClientID() string                   { return a.clientID }
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge { return a.challenge }
func (a *authRequest) GetNonce() string                      { return a.nonce }
func (a *authRequest) GetRedirectURI() string                { return a.redirectURI }
func (a *authRequest) GetResponseType() oidc.ResponseType    { return a.responseType }
func (a *authRequest) GetResponseMode() oidc.ResponseMode    { return a.responseMode }
func (a *authRequest) GetScopes() []string                   { return a.scopes }
func (a *authRequest) GetState() string                      { return a.state }
func (a *authRequest) GetSubject() string                    { return a.subject }
func (a *authRequest) Done() bool                            { return a.done }

// client is the one registered client: a confidential web application
// using the authorization code flow with PKCE.
type client struct {
	id, secret string
	redirects  []string
	loginURL   func(string) string
}

func (c *client) GetID() string                       { return c.id }
func (c *client) RedirectURIs() []string              { return c.redirects }
func (c *client) PostLogoutRedirectURIs() []string    { return nil }
func (c *client) ApplicationType() op.ApplicationType { return op.ApplicationTypeWeb }
func (c *client) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodBasic }
func (c *client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c *client) GrantTypes() []oidc.GrantType         { return []oidc.GrantType{oidc.GrantTypeCode} }
func (c *client) LoginURL(id string) string            { return c.loginURL(id) }
func (c *client) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeBearer }
func (c *client) IDTokenLifetime() time.Duration       { return 5 * time.Minute }
func (c *client) DevMode() bool                        { return false }
func (c *client) IsScopeAllowed(string) bool           { return false }
func (c *client) IDTokenUserinfoClaimsAssertion() bool { return true }
func (c *client) ClockSkew() time.Duration             { return 0 }
func (c *client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

// String names the provider in test logs.
func (p *Provider) String() string { return fmt.Sprintf("oidctest provider at %s", p.Issuer) }
