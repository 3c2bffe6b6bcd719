package web

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"time"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/internal/numfmt"
	"github.com/dmarcd/dmarcd/store"
)

// layout is what every page's template receives.
type layout struct {
	Title    string
	Nav      string // the active navigation entry
	CSS, JS  string
	Icon     string
	SignedIn bool
	Org      *store.Organization
	Key      *store.APIKey
	ReadOnly bool
	Failures bool // the plan includes failure reports
	CSRF     string
	Data     any
	// Person is the signed-in person's email, "" for a key's session.
	Person string
	// Role is the person's role in Org ("" for a key).
	Role string
	// People: the person may manage the organization's people (owner).
	People bool
	// Audit: the audit log may be read.
	Audit bool
	// Orgs are the person's organizations, for the switcher: set only
	// for people in several.
	Orgs []orgChoice
}

// orgChoice is one organization of the header's switcher.
type orgChoice struct {
	ID, Name string
	Current  bool
}

// render writes page name with status. r is nil on pages shown without a
// session (sign-in, errors before one is known).
func (h *Handler) render(w http.ResponseWriter, r *req, status int, name, title string, data any) {
	l := layout{Title: title, Nav: name, CSS: h.css, JS: h.js, Icon: h.icon, Data: data}
	if r != nil {
		l.SignedIn, l.Org, l.Key, l.ReadOnly, l.CSRF = true, r.actor.Org(), r.actor.Key(), r.readOnly(), r.session.CSRFToken
		l.Failures = app.Includes(r.actor, app.FailureReports)
		h.fillPerson(&l, r)
	}
	var buf bytes.Buffer
	t, err := h.page(name)
	if err == nil {
		err = t.ExecuteTemplate(&buf, "layout.html", l)
	}
	if err != nil {
		h.log.Error("rendering a page", "page", name, "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// errorPage renders err: a pageError as itself, the application layer's
// kinds a page answers (not found, read-only, not in the plan) as their
// pages, anything else as a 500 whose cause is only logged.
func (h *Handler) errorPage(w http.ResponseWriter, r *req, err error) {
	pe, ok := errors.AsType[*pageError](err)
	if !ok {
		switch e := app.AsError(err); {
		case e.Kind == app.NotFound:
			pe = errNotFound
		case e.Kind == app.Forbidden && r != nil && r.actor.Person() != nil:
			// A person's role: the application layer's words say which.
			pe = &pageError{status: http.StatusForbidden, title: "Not allowed",
				msg: "You cannot do this in " + r.actor.Org().Name + ": " + e.Msg + ". Ask an owner of the organization if you need to."}
		case e.Kind == app.Forbidden:
			pe = errReadOnly
		case e.Kind == app.PlanFeature && e.Feature == app.Webhooks:
			pe = errNoWebhooks
		case e.Kind == app.PlanFeature:
			pe = errNoFailures
		default:
			h.log.Error("serving a page", "error", err)
			pe = &pageError{status: http.StatusInternalServerError, title: "Something went wrong",
				msg: "The server could not answer this page. Try again; if it persists, the server log says why."}
		}
	}
	h.render(w, r, pe.status, "error", pe.title, pe)
}

// formStatus is the status of a form shown again with the reason it
// failed, for each kind of failure a person can fix or retry.
var formStatus = map[app.Kind]int{
	app.Invalid:        http.StatusUnprocessableEntity,
	app.Conflict:       http.StatusConflict,
	app.Forbidden:      http.StatusForbidden,
	app.PlanFeature:    http.StatusForbidden,
	app.PlanLimit:      http.StatusForbidden,
	app.KeyLimit:       http.StatusForbidden,
	app.Unverified:     http.StatusUnprocessableEntity,
	app.Unreachable:    http.StatusUnprocessableEntity,
	app.DNSUnavailable: http.StatusServiceUnavailable,
	app.NoSecretKey:    http.StatusServiceUnavailable,
}

// formFailure is the status and message a form shows again for err, in
// the application layer's words (the API's). Not found is the 404 page's
// errNotFound; what a person cannot fix comes back as err, for the 500
// page.
func formFailure(err error) (int, string, error) {
	e := app.AsError(err)
	status, ok := formStatus[e.Kind]
	switch {
	case e.Kind == app.NotFound:
		return 0, "", errNotFound
	case !ok:
		return 0, "", err
	}
	return status, e.Msg, nil
}

// notFound is the router's answer to unknown paths: a 404 page for a
// signed-in browser, the sign-in page otherwise.
func (h *Handler) notFound(w http.ResponseWriter, r *http.Request) {
	rq, ok := h.signedIn(w, r)
	if !ok {
		return
	}
	h.errorPage(w, rq, errNotFound)
}

// retryAfter renders a wait as whole seconds, at least 1.
func retryAfter(d time.Duration) string {
	return strconv.FormatInt(max(1, int64((d+time.Second-1)/time.Second)), 10)
}

// PageError makes the title and message of an error page reachable.
func (e *pageError) Title() string { return e.title }

// Message is the error page's explanation.
func (e *pageError) Message() string { return e.msg }

var funcs = template.FuncMap{
	"utc": func(t any) string {
		switch v := t.(type) {
		case time.Time:
			return v.UTC().Format("2006-01-02 15:04 UTC")
		case *time.Time:
			if v == nil {
				return ""
			}
			return v.UTC().Format("2006-01-02 15:04 UTC")
		}
		return ""
	},
	"iso": func(t any) string {
		switch v := t.(type) {
		case time.Time:
			return v.UTC().Format(time.RFC3339)
		case *time.Time:
			if v != nil {
				return v.UTC().Format(time.RFC3339)
			}
		}
		return ""
	},
	"pct": numfmt.Percent,
	// pc is a chart coordinate, a percentage of the chart's box.
	"pc": func(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) + "%" },
	// share is n of total as a percentage, "–" without a total.
	"share": numfmt.Share,
	// alertStatus is an alert's status as people read it.
	"alertStatus": alertStatusLabel,
	// stage is an advice stage as people read it.
	"stage":  stageLabel,
	"num":    formatNum,
	"deref":  func(s *string) string { return derefStr(s) },
	"isTrue": func(b *bool) bool { return b != nil && *b },
	"derefInt": func(n *int) int {
		if n == nil {
			return 0
		}
		return *n
	},
	"list": func(v ...string) []string { return v },
	"add":  func(a, b int) int { return a + b },
	"seq": func(n int) []int {
		s := make([]int, n)
		for i := range s {
			s[i] = i
		}
		return s
	},
	// alertLinks are where an alert's cause is seen.
	"alertLinks": linksOf,
	// evidenceLines are a source's DKIM and SPF domains as people read them.
	"evidenceLines": evidenceLines,
	"dict": func(kv ...any) (map[string]any, error) {
		if len(kv)%2 != 0 {
			return nil, fmt.Errorf("dict: odd number of arguments")
		}
		m := make(map[string]any, len(kv)/2)
		for i := 0; i < len(kv); i += 2 {
			k, ok := kv[i].(string)
			if !ok {
				return nil, fmt.Errorf("dict: key %v is not a string", kv[i])
			}
			m[k] = kv[i+1]
		}
		return m, nil
	},
	"asn": func(a *uint32) string {
		if a == nil {
			return ""
		}
		return "AS" + strconv.FormatUint(uint64(*a), 10)
	},
}

func derefStr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// formatNum writes n with commas between thousands.
func formatNum(n int64) string { return numfmt.Count(n) }
