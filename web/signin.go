package web

import (
	"crypto/subtle"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/internal/clientaddr"
)

// Sign-in (issue 26): by email and password (+ a TOTP code when the
// account has one), by the provider of --oidc-issuer, or by an API key
// (the bootstrap; off with --web-key-sign-in=false). The password form
// carries csrf_token, a double-submit token: the same random value in the
// cookie loginCookie (HttpOnly, SameSite=Strict; /login and /invite/ use
// it) and in
// the page, so that another site cannot sign a browser in to an account
// of its choosing. When an account needs a code, the page that answers
// asks for it; the address and password wait here, in memory, under a
// random token for totpStepTTL, so that the browser need not hold the
// password in the page.

const (
	// loginCookie holds the sign-in form's CSRF token.
	loginCookie = "dmarcd_login"
	// totpStepTTL is how long the code step waits for its code.
	totpStepTTL = 5 * time.Minute
	// maxTOTPSteps bounds the code steps in memory.
	maxTOTPSteps = 10000
)

// loginPage is the data of the sign-in page.
type loginPage struct {
	Next  string
	Error string
	// CSRF is the password form's token.
	CSRF string
	// Email is the address of a failed attempt, kept in the form.
	Email string
	// Passwords shows the email and password form (off with --oidc-only).
	Passwords bool
	// Keys shows the API-key form (off with --web-key-sign-in=false).
	Keys bool
	// OIDC is the provider's name, "" without single sign-on.
	OIDC string
	// Step is the pending code step's token: the page asks for the
	// TOTP code alone.
	Step string
}

// totpSteps are the sign-ins waiting for their code.
type totpSteps struct {
	mu sync.Mutex
	m  map[string]totpStep
}

type totpStep struct {
	email, password, next string
	expires               time.Time
}

func (s *totpSteps) put(st totpStep, now time.Time) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) >= maxTOTPSteps {
		for k, v := range s.m {
			if now.After(v.expires) || len(s.m) >= maxTOTPSteps {
				delete(s.m, k)
			}
		}
	}
	token := randomToken()
	st.expires = now.Add(totpStepTTL)
	s.m[token] = st
	return token
}

func (s *totpSteps) take(token string, now time.Time) (totpStep, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.m[token]
	delete(s.m, token)
	return st, ok && now.Before(st.expires)
}

// loginCSRF returns the sign-in form's token: the browser's, else a new
// one set as its cookie.
func (h *Handler) loginCSRF(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(loginCookie); err == nil && len(c.Value) == 43 {
		return c.Value
	}
	t := randomToken()
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: t, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: h.secure(r), MaxAge: 86400})
	return t
}

// renderLogin renders the sign-in page with the forms this server offers.
func (h *Handler) renderLogin(w http.ResponseWriter, r *http.Request, status int, p loginPage) {
	p.Passwords = h.oidc == nil || !h.oidc.cfg.Only
	p.Keys = h.app.KeySignInEnabled()
	if h.oidc != nil {
		p.OIDC = h.oidc.cfg.Name
	}
	if p.Next == "" {
		p.Next = "/"
	}
	p.CSRF = h.loginCSRF(w, r)
	title := "Sign in"
	if p.Step != "" {
		title = "Your code"
	}
	h.render(w, nil, status, "login", title, p)
}

func (h *Handler) getLogin(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if c, err := r.Cookie(CookieName); err == nil {
		if _, _, err := h.app.Session(c.Value); err == nil {
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
	}
	h.renderLogin(w, r, http.StatusOK, loginPage{Next: safeNext(r.URL.Query().Get("next"))})
}

// signInFailed is the one message of every failed key sign-in: no oracle.
const signInFailed = "That key did not work. Check that you pasted the whole key (dmk_ and 32 characters) and that it has not been revoked."

// passwordFailed is the one message of every failed password sign-in,
// for an unknown address and a wrong password alike.
const passwordFailed = "That email address and password did not work. Check both and try again."

// postLogin signs in with a key (form field key) or with email and
// password (+ totp). Every sign-in is logged with the client address
// (clientaddr: behind a trusted proxy, the forwarded one), and a refused
// one with its reason; never a key, a password or a code.
func (h *Handler) postLogin(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	addr := clientaddr.Of(r)
	if m := h.checkOrigin(r); m != nil {
		h.log.Warn("sign-in refused", "reason", m.reason, "origin", m.got, "expected", m.want, "remote", addr)
		h.errorPage(w, nil, m.page())
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	_ = r.ParseForm()
	if _, ok := r.PostForm["key"]; ok {
		h.postKeyLogin(w, r, addr)
		return
	}
	h.postPasswordLogin(w, r, addr)
}

// postKeyLogin signs in with an API key.
func (h *Handler) postKeyLogin(w http.ResponseWriter, r *http.Request, addr string) {
	next := safeNext(r.PostForm.Get("next"))
	if !h.app.KeySignInEnabled() {
		h.log.Warn("sign-in refused", "reason", "key sign-in is off (--web-key-sign-in=false)", "remote", addr)
		h.renderLogin(w, r, http.StatusForbidden, loginPage{Next: next,
			Error: "Signing in with an API key is turned off on this server. Sign in with your email address."})
		return
	}
	// Failed sign-ins count with the API's failed authentications; a
	// revoked key's against that key alone (app.Authenticate).
	token, actor, err := h.app.SignIn(addr, strings.TrimSpace(r.PostForm.Get("key")))
	if err != nil {
		switch e := app.AsError(err); {
		case e.Kind == app.Throttled && e.KeyID == "":
			h.log.Warn("sign-in refused", "reason", "too many failed sign-ins", "remote", addr)
			w.Header().Set("Retry-After", retryAfter(e.RetryAfter))
			h.renderLogin(w, r, http.StatusTooManyRequests,
				loginPage{Error: "Too many failed sign-ins from your address. Wait a minute and try again."})
		case e.Kind == app.Unauthenticated, e.Kind == app.Throttled:
			// A revoked key past its own limit is told what any failed
			// sign-in is told: it locks out nobody else.
			if e.KeyID != "" {
				h.log.Warn("sign-in refused", "reason", "revoked key", "key_id", e.KeyID, "remote", addr)
			} else {
				h.log.Warn("sign-in refused", "reason", "unknown key", "remote", addr)
			}
			h.renderLogin(w, r, http.StatusUnauthorized, loginPage{Next: next, Error: signInFailed})
		default:
			h.errorPage(w, nil, err)
		}
		return
	}
	key := actor.Key()
	h.log.Info("signed in", "method", "key", "key_id", key.ID, "key_prefix", key.Prefix, "key_name", key.Name, "org_id", actor.Org().ID, "remote", addr)
	h.setCookie(w, r, token)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// postPasswordLogin signs in with email and password, and a TOTP code
// when the account has one: either all three fields at once, or the code
// with the step token of the page that asked for it.
func (h *Handler) postPasswordLogin(w http.ResponseWriter, r *http.Request, addr string) {
	f := r.PostForm
	next := safeNext(f.Get("next"))
	c, err := r.Cookie(loginCookie)
	if got := f.Get("csrf_token"); err != nil || got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(c.Value)) != 1 {
		h.log.Warn("sign-in refused", "reason", "stale sign-in form (no or wrong CSRF token)", "remote", addr)
		h.renderLogin(w, r, http.StatusForbidden, loginPage{Next: next,
			Error: "This sign-in form is stale or came from another site. Sign in again on this page."})
		return
	}
	if h.oidc != nil && h.oidc.cfg.Only {
		h.log.Warn("sign-in refused", "reason", "password sign-in is off (--oidc-only)", "remote", addr)
		h.renderLogin(w, r, http.StatusForbidden, loginPage{Next: next,
			Error: "Passwords are turned off on this server: sign in with " + h.oidc.cfg.Name + "."})
		return
	}
	email, password, code := strings.TrimSpace(f.Get("email")), f.Get("password"), strings.TrimSpace(f.Get("totp"))
	step := f.Get("step")
	if step != "" {
		st, ok := h.steps.take(step, h.now())
		if !ok {
			h.renderLogin(w, r, http.StatusUnauthorized, loginPage{Next: next,
				Error: "That sign-in took too long. Enter your email address and password again."})
			return
		}
		email, password, next = st.email, st.password, st.next
	}
	if email == "" || password == "" {
		h.renderLogin(w, r, http.StatusUnprocessableEntity, loginPage{Next: next, Email: email,
			Error: "Enter your email address and your password."})
		return
	}
	token, actor, err := h.app.SignInPassword(addr, email, password, code)
	if err != nil {
		switch e := app.AsError(err); {
		case e.Kind == app.TOTPRequired:
			// The right password: the page asks for the code (a step,
			// not a failure).
			st := h.steps.put(totpStep{email: email, password: password, next: next}, h.now())
			h.renderLogin(w, r, http.StatusOK, loginPage{Next: next, Step: st})
		case e.Kind == app.Throttled:
			h.log.Warn("sign-in refused", "method", "password", "reason", "too many failed sign-ins", "remote", addr)
			w.Header().Set("Retry-After", retryAfter(e.RetryAfter))
			h.renderLogin(w, r, http.StatusTooManyRequests, loginPage{Next: next, Email: email,
				Error: "Too many failed sign-ins. Wait a minute and try again."})
		case e.Kind == app.Unauthenticated && step != "":
			// The step passed the password: the code was wrong.
			h.log.Warn("sign-in refused", "method", "password", "reason", "wrong TOTP code", "remote", addr)
			st := h.steps.put(totpStep{email: email, password: password, next: next}, h.now())
			h.renderLogin(w, r, http.StatusUnauthorized, loginPage{Next: next, Step: st,
				Error: "That code did not work. Enter the current code of your authenticator app, or a recovery code."})
		case e.Kind == app.Unauthenticated:
			h.log.Warn("sign-in refused", "method", "password", "reason", "unknown address or wrong password or code", "remote", addr)
			h.renderLogin(w, r, http.StatusUnauthorized, loginPage{Next: next, Email: email, Error: passwordFailed})
		case e.Kind == app.Forbidden:
			h.log.Warn("sign-in refused", "method", "password", "reason", e.Msg, "remote", addr)
			h.renderLogin(w, r, http.StatusForbidden, loginPage{Next: next, Email: email,
				Error: "Your account belongs to no organization any more. Ask an owner to invite you again."})
		default:
			h.errorPage(w, nil, err)
		}
		return
	}
	h.log.Info("signed in", "method", "password", "account_id", actor.Person().ID, "org_id", actor.Org().ID, "remote", addr)
	h.setCookie(w, r, token)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// equalToken compares two tokens in constant time.
func equalToken(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }
