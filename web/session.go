package web

import (
	"crypto/subtle"
	"net/http"
	"net/url"
	"strings"

	"github.com/julienschmidt/httprouter"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/internal/clientaddr"
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

// keyID is the id of the key the session was opened with, "" for a
// person's session.
func (r *req) keyID() string {
	if k := r.actor.Key(); k != nil {
		return k.ID
	}
	return ""
}

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
			// The client address goes with what the actor does, for the
			// audit log.
			return &req{Request: r, session: s, actor: actor.WithAddr(clientaddr.Of(r))}, true
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
// CSRF token, and logs why. It runs before the handler, so a refused POST
// changes nothing.
func (h *Handler) checkPost(r *req) error {
	if m := h.checkOrigin(r.Request); m != nil {
		h.log.Warn("form refused", "reason", m.reason, "origin", m.got, "expected", m.want, "path", r.URL.Path,
			"who", r.actor.Name(), "remote", clientaddr.Of(r.Request))
		return m.page()
	}
	if err := r.ParseForm(); err != nil {
		return &pageError{status: http.StatusBadRequest, title: "Bad request", msg: "The form could not be read."}
	}
	got := r.PostForm.Get("csrf_token")
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(r.session.CSRFToken)) != 1 {
		h.log.Warn("form refused", "reason", "stale form (no or wrong CSRF token)", "path", r.URL.Path,
			"who", r.actor.Name(), "remote", clientaddr.Of(r.Request))
		return errForbidden
	}
	return nil
}

// originMismatch is a POST whose origin is not the one this server
// answers as: the origin sent, the one expected, and the reason to log.
type originMismatch struct {
	got, want, reason string
	public            bool // want is --public-url's origin, else the Host header's
}

// checkOrigin returns nil when a POST's Origin (or, without one, Referer)
// is this server's: the public URL's origin when configured, else the
// request's own scheme and Host. A request with neither header (old
// browsers, curl) passes: the CSRF token still guards it.
func (h *Handler) checkOrigin(r *http.Request) *originMismatch {
	want := h.origin(r)
	origin := r.Header.Get("Origin")
	if origin == "" {
		ref := r.Header.Get("Referer")
		if ref == "" {
			return nil
		}
		u, err := url.Parse(ref)
		if err != nil {
			return &originMismatch{got: "(unreadable)", want: want, reason: "unreadable Referer header"}
		}
		origin = u.Scheme + "://" + u.Host
	}
	if len(origin) > 100 { // it is shown and logged: the header is the client's
		origin = origin[:100] + "…"
	}
	switch {
	case origin == "null":
		return &originMismatch{got: origin, want: want, reason: "opaque origin (null)"}
	case strings.EqualFold(origin, want):
		return nil
	case h.public != nil:
		return &originMismatch{got: origin, want: want, reason: "origin does not match --public-url", public: true}
	}
	return &originMismatch{got: origin, want: want, reason: "origin does not match the Host header"}
}

// page is what the browser is shown: which address dmarcd expected and
// what to set, since behind a reverse proxy a wrong or missing
// --public-url is the usual cause; an opaque origin is the stale form.
func (m *originMismatch) page() *pageError {
	switch {
	case m.got == "null" || m.reason == "unreadable Referer header":
		return errForbidden
	case m.public:
		return &pageError{status: http.StatusForbidden, title: "Wrong address",
			msg: "This form was sent from " + m.got + ", but dmarcd is set to answer at " + m.want +
				" (--public-url), so nothing was changed. Open dmarcd at " + m.want +
				"; or, if " + m.got + " is the address you use, start dmarcd with --public-url " + m.got + "."}
	}
	return &pageError{status: http.StatusForbidden, title: "Wrong address",
		msg: "This form was sent from " + m.got + ", but it reached dmarcd as " + m.want +
			" (the request's Host header), so nothing was changed. Behind a reverse proxy, start dmarcd with --public-url " +
			m.got + " (the address you open it at), or make the proxy pass the Host header unchanged."}
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
