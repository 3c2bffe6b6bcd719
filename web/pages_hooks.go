package web

import (
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/webhook"
)

func (h *Handler) webhookRoutes() {
	// The list shows what the plan lacks; the forms need the feature.
	h.handle("GET", "/settings/webhooks", app.Read, h.webhooks)
	h.handle("POST", "/settings/webhooks", app.WriteWebhooks, h.createWebhook)
	h.handle("POST", "/settings/webhooks/:id", app.WriteWebhooks, h.updateWebhook)
	h.handle("POST", "/settings/webhooks/:id/test", app.WriteWebhooks, h.testWebhook)
	h.handle("POST", "/settings/webhooks/:id/delete", app.WriteWebhooks, h.deleteWebhook)
	h.handle("GET", "/reports/:id/csv", app.Read, h.reportCSV)
	h.handle("GET", "/forensic", app.ReadFailureReports, h.failures)
	h.handle("GET", "/forensic/:id", app.ReadFailureReports, h.failure)
}

type webhooksPage struct {
	Allowed  bool
	Hooks    []*store.Webhook
	Max      int
	Created  *store.Webhook
	Secret   string
	Error    string
	ErrorFor string // the webhook id the error is about, "" for the create form
	URL      string
	Name     string
	Format   string
	Tested   string
	Result   *webhook.Result
	Notice   string
}

func (h *Handler) webhooksData(r *req) (webhooksPage, error) {
	l, err := h.app.ListWebhooks(r.Context(), r.actor, store.Page{Page: 1, Limit: 1000})
	if app.KindOf(err) == app.PlanFeature {
		return webhooksPage{}, nil // the page says what the plan lacks
	}
	if err != nil {
		return webhooksPage{}, err
	}
	return webhooksPage{Allowed: true, Max: l.Max, Hooks: l.Hooks}, nil
}

func (h *Handler) webhooks(w http.ResponseWriter, r *req) error {
	p, err := h.webhooksData(r)
	if err != nil {
		return err
	}
	switch r.URL.Query().Get("done") {
	case "deleted":
		p.Notice = "The webhook is deleted; its pending deliveries are dropped."
	case "updated":
		p.Notice = "Saved."
	}
	h.render(w, r, http.StatusOK, "webhooks", "Webhooks", p)
	return nil
}

// formError renders the webhooks page with the reason a form failed, or
// returns err when it is not the client's fault.
func (h *Handler) formError(w http.ResponseWriter, r *req, p webhooksPage, id string, err error) error {
	status, msg, ferr := formFailure(err)
	if ferr != nil {
		return ferr
	}
	p.Error, p.ErrorFor = msg, id
	h.render(w, r, status, "webhooks", "Webhooks", p)
	return nil
}

// errNoWebhooks is the page of a webhook form of a plan without webhooks.
var errNoWebhooks = &pageError{status: http.StatusForbidden, title: "Not in your plan",
	msg: "Webhooks come with the business and unlimited plans."}

func (h *Handler) createWebhook(w http.ResponseWriter, r *req) error {
	url, name, format := strings.TrimSpace(r.PostForm.Get("url")), r.PostForm.Get("name"), r.PostForm.Get("format")
	hook, secret, err := h.app.CreateWebhook(r.Context(), r.actor, url, name, format)
	p, lerr := h.webhooksData(r)
	if lerr != nil {
		return lerr
	}
	if err != nil {
		p.URL, p.Name, p.Format = url, name, format
		return h.formError(w, r, p, "", err)
	}
	p.Created, p.Secret = hook, secret
	h.render(w, r, http.StatusCreated, "webhooks", "Webhooks", p)
	return nil
}

func (h *Handler) updateWebhook(w http.ResponseWriter, r *req) error {
	id := strings.ToLower(r.params.ByName("id"))
	var url, name, format *string
	var active *bool
	switch r.PostForm.Get("action") {
	case "activate", "deactivate":
		v := r.PostForm.Get("action") == "activate"
		active = &v
	default:
		u, n := strings.TrimSpace(r.PostForm.Get("url")), r.PostForm.Get("name")
		url, name = &u, &n
		if f, ok := r.PostForm["format"]; ok && len(f) > 0 {
			format = &f[0]
		}
	}
	if _, err := h.app.UpdateWebhook(r.Context(), r.actor, id, app.WebhookUpdate{URL: url, Name: name, Format: format, IsActive: active}); err != nil {
		p, lerr := h.webhooksData(r)
		if lerr != nil {
			return lerr
		}
		return h.formError(w, r, p, id, err)
	}
	http.Redirect(w, r.Request, "/settings/webhooks?done=updated", http.StatusSeeOther)
	return nil
}

func (h *Handler) testWebhook(w http.ResponseWriter, r *req) error {
	id := strings.ToLower(r.params.ByName("id"))
	res, err := h.app.TestWebhook(r.Context(), r.actor, id)
	if err != nil {
		return err
	}
	p, err := h.webhooksData(r)
	if err != nil {
		return err
	}
	p.Tested, p.Result = id, &res
	h.render(w, r, http.StatusOK, "webhooks", "Webhooks", p)
	return nil
}

func (h *Handler) deleteWebhook(w http.ResponseWriter, r *req) error {
	if err := h.app.DeleteWebhook(r.Context(), r.actor, strings.ToLower(r.params.ByName("id"))); err != nil {
		return err
	}
	http.Redirect(w, r.Request, "/settings/webhooks?done=deleted", http.StatusSeeOther)
	return nil
}

// reportCSV answers the API export's bytes to the signed-in browser.
func (h *Handler) reportCSV(w http.ResponseWriter, r *req) error {
	id := strings.ToLower(r.params.ByName("id"))
	if _, err := h.db.FindReport(r.orgID(), id); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="report-`+id+`.csv"`)
	if err := h.app.WriteReportCSV(r.Context(), r.actor, id, w); err != nil {
		h.log.Error("writing a report's CSV", "report", id, "error", err)
	}
	return nil
}

type failuresPage struct {
	Allowed          bool
	Reports          []*store.FailureReport
	Pager            pager
	Domains          []*store.Domain
	DomainID         string
	DateFrom, DateTo string
	SourceIP         string
	AuthFailure      string
	Error            string
	Filtered         bool
}

// errNoFailures is the page of a plan without failure reports (errorPage
// shows it for the plan refusal of the failure routes).
var errNoFailures = &pageError{status: http.StatusForbidden, title: "Not in your plan",
	msg: "Failure (forensic) reports come with the business and unlimited plans."}

func (h *Handler) failures(w http.ResponseWriter, r *req) error {
	q := r.URL.Query()
	p := failuresPage{Allowed: true, DomainID: strings.ToLower(q.Get("domain")), SourceIP: strings.TrimSpace(q.Get("source_ip")),
		AuthFailure: q.Get("auth_failure")}
	f := store.FailureFilter{DomainID: p.DomainID, AuthFailure: p.AuthFailure}
	from, fv, err1 := dateParam(q, "from")
	to, tv, err2 := dateParam(q, "to")
	p.DateFrom, p.DateTo, f.DateFrom = fv, tv, from
	if to != nil {
		end := to.Add(day - time.Second)
		f.DateTo = &end
	}
	var errs []string
	if errors.Join(err1, err2) != nil {
		errs = append(errs, "Dates are written 2026-11-20.")
	}
	if p.SourceIP != "" {
		ip, err := netip.ParseAddr(p.SourceIP)
		if err != nil {
			errs = append(errs, "The source IP is not an IP address, e.g. 192.0.2.1 or 2001:db8::1.")
		} else {
			f.SourceIP = ip.Unmap().String()
		}
	}
	switch p.AuthFailure {
	case "", "dmarc", "spf", "dkim":
	default:
		errs = append(errs, "The failed check is dmarc, spf or dkim.")
	}
	domains, err := h.allDomains(r.orgID())
	if err != nil {
		return err
	}
	p.Domains = domains
	if len(errs) > 0 {
		p.Error = strings.Join(errs, " ")
		h.render(w, r, http.StatusBadRequest, "failures", "Failure reports", p)
		return nil
	}
	page := pageNum(r)
	f.Page = store.Page{Page: page, Limit: listLimit}
	reps, total, err := h.app.FailureReports(r.Context(), r.actor, f)
	if err != nil {
		return err
	}
	p.Reports, p.Pager = reps, newPager(r, page, total, listLimit)
	p.Filtered = p.DomainID != "" || p.SourceIP != "" || p.AuthFailure != "" || fv != "" || tv != ""
	h.render(w, r, http.StatusOK, "failures", "Failure reports", p)
	return nil
}

func (h *Handler) failure(w http.ResponseWriter, r *req) error {
	rep, err := h.app.FailureReport(r.Context(), r.actor, strings.ToLower(r.params.ByName("id")))
	if err != nil {
		return err
	}
	h.render(w, r, http.StatusOK, "failure", "Failure report", rep)
	return nil
}
