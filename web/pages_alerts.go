package web

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/dmarcd/dmarcd/store"
)

// The alerts page's filters and bulk dismissal (issue 24): a domain
// filter beside severity and status, "dismiss selected" (a checkbox per
// alert) and "dismiss all of this filter", posted to POST /alerts with
// the CSRF token and answered with a redirect back to the filtered list
// (post/redirect/get) that says how many were dismissed. The dismissal
// is the application layer's DismissAlerts, DismissAlert's for many
// alerts in few transactions: another organization's alert is not found
// there, and skipped.

// maxSelected bounds the alert ids one "dismiss selected" takes.
const maxSelected = 1000

// alertActions is what the alerts page shows beside the list: the
// domains to filter by, the open alerts the filter matches (what "dismiss
// all" would dismiss), and the notice of a dismissal just done.
type alertActions struct {
	DomainID    string
	DomainList  []*store.Domain
	OpenMatched int
	Query       string // the filter as a query string, for the forms
	Notice      string
}

// alertFilterOf reads the alerts filter of a query or form: an unknown
// severity or status is no filter, as the page always did; the domain is
// checked by the store (another organization's: not found).
func alertFilterOf(q url.Values) store.AlertFilter {
	f := store.AlertFilter{Severity: q.Get("severity"), Status: q.Get("status"), DomainID: strings.ToLower(strings.TrimSpace(q.Get("domain")))}
	if f.Severity != "" && !store.ValidAlertSeverity(f.Severity) {
		f.Severity = ""
	}
	if f.Status != "" && !store.ValidAlertStatus(f.Status) {
		f.Status = ""
	}
	return f
}

// filterQuery is f as the alerts page's query string.
func filterQuery(f store.AlertFilter) url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"severity": f.Severity, "status": f.Status, "domain": f.DomainID} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

// openStatuses are the statuses "dismiss all" dismisses within f: the
// open ones (pending, sent) f's status leaves.
func openStatuses(f store.AlertFilter) []string {
	switch f.Status {
	case "":
		return []string{store.AlertPending, store.AlertSent}
	case store.AlertDismissed:
		return nil
	}
	return []string{f.Status}
}

func (h *Handler) alertActionsOf(r *req, f store.AlertFilter, domains []*store.Domain) (alertActions, error) {
	a := alertActions{DomainID: f.DomainID, DomainList: domains, Query: filterQuery(f).Encode()}
	if n, err := strconv.Atoi(r.URL.Query().Get("dismissed")); err == nil && n >= 0 {
		a.Notice = "Dismissed " + plural(n, "alert") + "."
	}
	for _, st := range openStatuses(f) {
		g := f
		g.Status, g.Page = st, store.Page{Page: 1, Limit: 1}
		_, n, err := h.db.ListAlerts(r.orgID(), g)
		if err != nil {
			return a, err
		}
		a.OpenMatched += n
	}
	return a, nil
}

// dismissAlerts serves POST /alerts: dismiss=selected dismisses the
// alerts whose ids the form's "id" fields name (ids not found, another
// organization's among them, are skipped); dismiss=all dismisses every
// open alert the form's filter (severity, status, domain) matches.
func (h *Handler) dismissAlerts(w http.ResponseWriter, r *req) error {
	f := alertFilterOf(r.PostForm)
	var ids []string
	switch r.PostForm.Get("dismiss") {
	case "selected":
		ids = r.PostForm["id"]
		if len(ids) > maxSelected {
			return &pageError{status: http.StatusBadRequest, title: "Too many alerts",
				msg: "Select at most " + strconv.Itoa(maxSelected) + " alerts at once, or dismiss all of a filter."}
		}
	case "all":
		var err error
		if ids, err = h.openAlertIDs(r.orgID(), f); err != nil {
			return err
		}
	default:
		return &pageError{status: http.StatusBadRequest, title: "Bad request", msg: "The form did not say which alerts to dismiss."}
	}
	// One write transaction for up to a thousand alerts, not one each;
	// ids gone with their domain, or not this organization's, are skipped.
	n, err := h.app.DismissAlerts(r.Context(), r.actor, ids)
	if err != nil {
		return err
	}
	q := filterQuery(f)
	q.Set("dismissed", strconv.Itoa(n))
	http.Redirect(w, r.Request, "/alerts?"+q.Encode(), http.StatusSeeOther)
	return nil
}

// openAlertIDs lists the ids of the open alerts of org that f matches.
// ErrNotFound when f's domain is not one of org's.
func (h *Handler) openAlertIDs(orgID string, f store.AlertFilter) ([]string, error) {
	var ids []string
	for _, st := range openStatuses(f) {
		g := f
		g.Status, g.Page = st, store.Page{Page: 1, Limit: 1 << 20}
		as, _, err := h.db.ListAlerts(orgID, g)
		if err != nil {
			return nil, err
		}
		for _, a := range as {
			ids = append(ids, a.ID)
		}
	}
	return ids, nil
}

// plural is "1 alert", "2 alerts".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// alertStatusLabel says what an alert's status means: pending alerts are
// not yet delivered (to a webhook), which "pending" alone left open.
func alertStatusLabel(status string) string {
	switch status {
	case store.AlertPending:
		return "pending (not yet delivered)"
	case store.AlertSent:
		return "sent (delivered)"
	}
	return status
}
