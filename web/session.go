package web

import (
	"crypto/subtle"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/julienschmidt/httprouter"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/store"
)

// CookieName is the session cookie (UI.md).
const CookieName = "dmarcd_session"

// req is one signed-in request: the session and who signed in.
type req struct {
	*http.Request
	params  httprouter.Params
	session *store.Session
	actor   app.Actor
}

// orgID is the id of the signed-in organization.
func (r *req) orgID() string { return r.actor.Org().ID }

// readOnly reports whether the session's key may change nothing.
func (r *req) readOnly() bool { return app.Authorize(r.actor, app.Write) != nil }

// handlerFunc renders a page or returns an error for the error page.
type handlerFunc func(w http.ResponseWriter, r *req) error

// Errors the pages return; errorPage renders them.
var (
	errNotFound  = &pageError{status: http.StatusNotFound, title: "Not found", msg: "There is nothing here, or it belongs to another organization."}
	errReadOnly  = &pageError{status: http.StatusForbidden, title: "Read-only", msg: "You signed in with a read-only key: nothing can be changed. Sign in with a full-scope key to do this."}
	errForbidden = &pageError{status: http.StatusForbidden, title: "Refused", msg: "This form is stale or came from another site, so nothing was changed. Go back, reload the page and try again."}
)

// pageError is an error shown as a page with its status.
type pageError struct {
	status     int
	title, msg string
}

func (e *pageError) Error() string { return e.title + ": " + e.msg }

// handle registers a signed-in route whose handler runs when app.Authorize
// lets the session run act (a POST first passes the CSRF check).
func (h *Handler) handle(method, path string, act app.Action, fn handlerFunc) {
	h.router.Handle(method, path, func(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
		rq, ok := h.signedIn(w, r)
		if !ok {
			return
		}
		rq.params = p
		var err error
		if r.Method == http.MethodPost {
			err = h.checkPost(rq)
		}
		if err == nil {
			err = app.Authorize(rq.actor, act)
		}
		if err == nil {
			err = fn(w, rq)
		}
		if err != nil {
			h.errorPage(w, rq, err)
		}
	})
}

// signedIn loads the request's session; without a live one it redirects
// to the sign-in page and reports false.
func (h *Handler) signedIn(w http.ResponseWriter, r *http.Request) (*req, bool) {
	if c, err := r.Cookie(CookieName); err == nil {
		actor, s, err := h.app.Session(c.Value)
		if err == nil {
			return &req{Request: r, session: s, actor: actor}, true
		}
		if app.KindOf(err) != app.Unauthenticated {
			h.log.Error("reading a session", "error", err)
			http.Error(w, "internal error", http.StatusInternalServerError)
			return nil, false
		}
		h.clearCookie(w, r)
	}
	target := "/login"
	if r.Method == http.MethodGet && r.URL.Path != "/" {
		target += "?next=" + url.QueryEscape(r.URL.RequestURI())
	}
	http.Redirect(w, r, target, http.StatusSeeOther)
	return nil, false
}

// checkPost refuses a POST from another origin or without the session's
// CSRF token. It runs before the handler, so a refused POST changes nothing.
func (h *Handler) checkPost(r *req) error {
	if !h.sameOrigin(r.Request) {
		return errForbidden
	}
	if err := r.ParseForm(); err != nil {
		return &pageError{status: http.StatusBadRequest, title: "Bad request", msg: "The form could not be read."}
	}
	got := r.PostForm.Get("csrf_token")
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(r.session.CSRFToken)) != 1 {
		return errForbidden
	}
	return nil
}

// sameOrigin reports whether a POST's Origin (or, without one, Referer) is
// this server's: the public URL's origin when configured, else the
// request's own scheme and Host. A request with neither header (old
// browsers, curl) passes: the CSRF token still guards it.
func (h *Handler) sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		ref := r.Header.Get("Referer")
		if ref == "" {
			return true
		}
		u, err := url.Parse(ref)
		if err != nil {
			return false
		}
		origin = u.Scheme + "://" + u.Host
	}
	if origin == "null" {
		return false
	}
	return strings.EqualFold(origin, h.origin(r))
}

// origin is the scheme://host this server answers as.
func (h *Handler) origin(r *http.Request) string {
	if h.public != nil {
		return h.public.Scheme + "://" + h.public.Host
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// secure reports whether the session cookie gets the Secure flag.
func (h *Handler) secure(r *http.Request) bool {
	return r.TLS != nil || (h.public != nil && h.public.Scheme == "https")
}

func (h *Handler) setCookie(w http.ResponseWriter, r *http.Request, token string) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: token, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: h.secure(r), MaxAge: int(store.SessionMaxAge.Seconds())})
}

func (h *Handler) clearCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: h.secure(r), MaxAge: -1})
}

// clientAddr is the peer's IP, as the failed-authentication limit sees
// it (proxy headers are not trusted).
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// loginPage is the data of the sign-in page.
type loginPage struct {
	Next  string
	Error string
}

func (h *Handler) getLogin(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if c, err := r.Cookie(CookieName); err == nil {
		if _, _, err := h.app.Session(c.Value); err == nil {
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
	}
	h.render(w, nil, http.StatusOK, "login", "Sign in", loginPage{Next: safeNext(r.URL.Query().Get("next"))})
}

// signInFailed is the one message of every failed sign-in: no oracle.
const signInFailed = "That key did not work. Check that you pasted the whole key (dmk_ and 32 characters) and that it has not been revoked."

func (h *Handler) postLogin(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if !h.sameOrigin(r) {
		h.errorPage(w, nil, errForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	_ = r.ParseForm()
	next := safeNext(r.PostForm.Get("next"))
	// Failed sign-ins count with the API's failed authentications.
	token, err := h.app.SignIn(clientAddr(r), strings.TrimSpace(r.PostForm.Get("key")))
	if err != nil {
		switch e := app.AsError(err); e.Kind {
		case app.Throttled:
			w.Header().Set("Retry-After", retryAfter(e.RetryAfter))
			h.render(w, nil, http.StatusTooManyRequests, "login", "Sign in",
				loginPage{Error: "Too many failed sign-ins from your address. Wait a minute and try again."})
		case app.Unauthenticated:
			h.render(w, nil, http.StatusUnauthorized, "login", "Sign in", loginPage{Next: next, Error: signInFailed})
		default:
			h.errorPage(w, nil, err)
		}
		return
	}
	h.setCookie(w, r, token)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// safeNext keeps a sign-in's return path on this site: a local absolute
// path, never //host or a scheme.
func safeNext(p string) string {
	if p == "" || !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.HasPrefix(p, "/\\") ||
		strings.ContainsAny(p, "\r\n\t") {
		return "/"
	}
	return p
}

func (h *Handler) logout(w http.ResponseWriter, r *req) error {
	if c, err := r.Cookie(CookieName); err == nil {
		if err := h.app.SignOut(c.Value); err != nil {
			return err
		}
	}
	h.clearCookie(w, r.Request)
	http.Redirect(w, r.Request, "/login", http.StatusSeeOther)
	return nil
}
