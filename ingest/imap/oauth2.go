package imap

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/dmarcd/dmarcd/internal/egress"
)

// OAuth2Config is how a mailbox gets its access tokens: with RefreshToken
// set, the refresh-token grant (Gmail and most others); without, the
// client-credentials grant (Microsoft 365: Scope
// "https://outlook.office365.com/.default"). TokenURL must be https.
type OAuth2Config struct {
	TokenURL     string `json:"token_url"`
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret,omitempty"`
	Scope        string `json:"scope,omitempty"`
	RefreshToken string `json:"refresh_token,omitempty"`
}

// Check reports what is missing or wrong in c, for the API.
func (c OAuth2Config) Check() error {
	u, err := url.Parse(c.TokenURL)
	switch {
	case err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil:
		return fmt.Errorf("oauth2.token_url must be an https URL")
	case c.ClientID == "":
		return fmt.Errorf("oauth2.client_id is required")
	case c.RefreshToken == "" && c.ClientSecret == "":
		return fmt.Errorf("oauth2 needs a client_secret (client credentials) or a refresh_token")
	}
	return nil
}

// refreshMargin is how long before its expiry a token is replaced.
const refreshMargin = 2 * time.Minute

// TokenError is a failed token request, described without any secret.
type TokenError struct{ Msg string }

func (e *TokenError) Error() string { return "OAuth2 token request failed: " + e.Msg }

// TokenSource gets access tokens for one mailbox and caches each until
// shortly before it expires. It is safe for concurrent use. Tokens and
// secrets are never logged nor put in errors.
type TokenSource struct {
	cfg  OAuth2Config
	http *http.Client
	now  func() time.Time

	mu      sync.Mutex
	token   string
	expires time.Time
}

// NewTokenSource returns a TokenSource for cfg that reaches the token URL
// through the address policy and certificate roots of opts.
func NewTokenSource(cfg OAuth2Config, opts *Options) *TokenSource {
	if opts == nil {
		opts = &Options{}
	}
	t := opts.timeout()
	tr := egress.NewTransport(opts.resolver(), opts.policy(), t)
	tr.MaxIdleConns = 2
	return &TokenSource{
		cfg: cfg,
		http: &http.Client{Transport: tr, Timeout: t,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		now: time.Now,
	}
}

// Token returns a valid access token, requesting a new one when the cached
// one expires within refreshMargin.
func (s *TokenSource) Token(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.token != "" && s.now().Add(refreshMargin).Before(s.expires) {
		return s.token, nil
	}
	if err := s.cfg.Check(); err != nil {
		return "", &TokenError{Msg: err.Error()}
	}
	form := url.Values{"client_id": {s.cfg.ClientID}}
	if s.cfg.ClientSecret != "" {
		form.Set("client_secret", s.cfg.ClientSecret)
	}
	if s.cfg.RefreshToken != "" {
		form.Set("grant_type", "refresh_token")
		form.Set("refresh_token", s.cfg.RefreshToken)
	} else {
		form.Set("grant_type", "client_credentials")
	}
	if s.cfg.Scope != "" {
		form.Set("scope", s.cfg.Scope)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", &TokenError{Msg: "bad token URL"}
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := s.http.Do(req)
	if err != nil {
		return "", &TokenError{Msg: describe(err, s.http.Timeout)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", &TokenError{Msg: describe(err, s.http.Timeout)}
	}
	var tr struct {
		AccessToken  string      `json:"access_token"`
		ExpiresIn    json.Number `json:"expires_in"`
		RefreshToken string      `json:"refresh_token"`
		Error        string      `json:"error"`
		Description  string      `json:"error_description"`
	}
	_ = json.Unmarshal(body, &tr)
	if resp.StatusCode != http.StatusOK || tr.AccessToken == "" {
		msg := fmt.Sprintf("HTTP %d", resp.StatusCode)
		if tr.Error != "" {
			msg += ": " + tr.Error
			if tr.Description != "" {
				msg += ": " + firstLine(tr.Description)
			}
		} else if resp.StatusCode == http.StatusOK {
			msg += ": no access_token in the answer"
		}
		return "", &TokenError{Msg: msg}
	}
	life := time.Hour
	if n, err := tr.ExpiresIn.Int64(); err == nil && n > 0 {
		life = time.Duration(n) * time.Second
	}
	s.token, s.expires = tr.AccessToken, s.now().Add(life)
	if tr.RefreshToken != "" {
		s.cfg.RefreshToken = tr.RefreshToken // rotated; kept for this run
	}
	return s.token, nil
}

func firstLine(s string) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// xoauth2Client is the SASL XOAUTH2 mechanism (Google, Microsoft). On a
// refusal the server sends a JSON challenge, answered with an empty line
// so that it ends the exchange with NO; the challenge is kept for the
// error message.
type xoauth2Client struct {
	user, token string
	serverSaid  string
}

func (c *xoauth2Client) Start() (string, []byte, error) {
	return "XOAUTH2", []byte("user=" + c.user + "\x01auth=Bearer " + c.token + "\x01\x01"), nil
}

func (c *xoauth2Client) Next(challenge []byte) ([]byte, error) {
	var e struct {
		Status string `json:"status"`
	}
	if json.Unmarshal(challenge, &e) == nil && e.Status != "" {
		c.serverSaid = "server status " + e.Status
	}
	return []byte{}, nil
}
