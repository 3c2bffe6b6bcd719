package web

import (
	"cmp"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/store"
)

const listLimit = 50

// pageNum reads ?page=, 1 when absent or bad.
func pageNum(r *req) int {
	n, err := strconv.Atoi(r.URL.Query().Get("page"))
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// pager links the pages of a list, keeping its filters. Its links say
// Newer and Older, for a list newest first; see ranked.
type pager struct {
	Page, Pages          int
	Prev, Next           string
	PrevLabel, NextLabel string
}

func newPager(r *req, page, total, limit int) pager {
	p := pager{Page: page, Pages: max(1, (total+limit-1)/limit), PrevLabel: "Newer", NextLabel: "Older"}
	link := func(n int) string {
		q := r.URL.Query()
		q.Set("page", strconv.Itoa(n))
		return r.URL.Path + "?" + q.Encode()
	}
	if page > 1 {
		p.Prev = link(page - 1)
	}
	if page < p.Pages {
		p.Next = link(page + 1)
	}
	return p
}

type reportsPage struct {
	Reports          []*store.Report
	Domains          []*store.Domain
	DomainID         string
	DateFrom, DateTo string
	Error            string
	Pager            pager
}

// dateParam reads a YYYY-MM-DD form field.
func dateParam(q url.Values, name string) (*time.Time, string, error) {
	v := strings.TrimSpace(q.Get(name))
	if v == "" {
		return nil, "", nil
	}
	t, err := time.Parse(time.DateOnly, v)
	if err != nil {
		return nil, v, errors.New("Dates are written 2026-11-20.")
	}
	return &t, v, nil
}

func (h *Handler) reports(w http.ResponseWriter, r *req) error {
	q := r.URL.Query()
	p := reportsPage{DomainID: strings.ToLower(q.Get("domain"))}
	from, fv, err1 := dateParam(q, "from")
	to, tv, err2 := dateParam(q, "to")
	p.DateFrom, p.DateTo = fv, tv
	if to != nil {
		end := to.Add(day - time.Second)
		to = &end
	}
	domains, err := h.allDomains(r.orgID())
	if err != nil {
		return err
	}
	p.Domains = domains
	if err := errors.Join(err1, err2); err != nil {
		p.Error = "Dates are written 2026-11-20."
		h.render(w, r, http.StatusBadRequest, "reports", "Reports", p)
		return nil
	}
	page := pageNum(r)
	reps, total, err := h.db.ListReports(r.orgID(), store.ReportFilter{DomainID: p.DomainID, DateFrom: from, DateTo: to,
		Page: store.Page{Page: page, Limit: listLimit}})
	if err != nil {
		return err
	}
	p.Reports, p.Pager = reps, newPager(r, page, total, listLimit)
	h.render(w, r, http.StatusOK, "reports", "Reports", p)
	return nil
}

type reportPage struct {
	Report  *store.Report
	Stats   *store.ReportStats
	Records []*store.Record // the most messages first
	More    int
	GeoNote string
}

// maxPageRecords bounds the records one report page shows: those with the
// most messages.
const maxPageRecords = 500

// byCount orders records by messages, most first, then by source.
func byCount(a, b *store.Record) int {
	return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.SourceIP, b.SourceIP))
}

func (h *Handler) report(w http.ResponseWriter, r *req) error {
	id := strings.ToLower(r.params.ByName("id"))
	rep, err := h.db.FindReport(r.orgID(), id)
	if err != nil {
		return err
	}
	st, err := h.db.ReportStatistics(r.orgID(), id)
	if err != nil {
		return err
	}
	p := reportPage{Report: rep, Stats: st}
	// The records with the most messages, in memory for twice the page
	// at most: past that, the list is sorted and cut back to the page.
	total := 0
	err = h.db.ReportRecords(r.orgID(), id, func(rec *store.Record) error {
		total++
		p.Records = append(p.Records, rec)
		if len(p.Records) == 2*maxPageRecords {
			slices.SortFunc(p.Records, byCount)
			clear(p.Records[maxPageRecords:])
			p.Records = p.Records[:maxPageRecords]
		}
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortFunc(p.Records, byCount)
	p.Records = p.Records[:min(len(p.Records), maxPageRecords)]
	p.More = total - len(p.Records)
	var cc, as bool
	for _, rec := range p.Records {
		cc = cc || rec.Geo == nil || rec.Geo.CountryCode == nil
		as = as || rec.Geo == nil || rec.Geo.ASN == nil
	}
	p.GeoNote = h.geoNote(cc, as)
	h.render(w, r, http.StatusOK, "report", "Report from "+cmpOr(rep.OrgName, "an unnamed reporter"), p)
	return nil
}

type alertsPage struct {
	Alerts           []*store.Alert
	Severity, Status string
	Domains          map[string]string
	Pager            pager
	alertActions
}

func (h *Handler) alerts(w http.ResponseWriter, r *req) error {
	f := alertFilterOf(r.URL.Query())
	p := alertsPage{Severity: f.Severity, Status: f.Status, Domains: map[string]string{}}
	page := pageNum(r)
	f.Page = store.Page{Page: page, Limit: listLimit}
	as, total, err := h.db.ListAlerts(r.orgID(), f)
	if err != nil {
		return err
	}
	domains, err := h.allDomains(r.orgID())
	if err != nil {
		return err
	}
	for _, d := range domains {
		p.Domains[d.ID] = d.Name
	}
	p.Alerts, p.Pager = as, newPager(r, page, total, listLimit)
	if p.alertActions, err = h.alertActionsOf(r, f, domains); err != nil {
		return err
	}
	h.render(w, r, http.StatusOK, "alerts", "Alerts", p)
	return nil
}

func (h *Handler) dismissAlert(w http.ResponseWriter, r *req) error {
	if _, err := h.app.DismissAlert(r.Context(), r.actor, strings.ToLower(r.params.ByName("id"))); err != nil {
		return err
	}
	back := safeNext(r.PostForm.Get("next"))
	if back == "/" {
		back = "/alerts"
	}
	http.Redirect(w, r.Request, back, http.StatusSeeOther)
	return nil
}

func (h *Handler) settings(w http.ResponseWriter, r *req) error {
	p, err := h.app.Settings(r.Context(), r.actor)
	if err != nil {
		return err
	}
	h.render(w, r, http.StatusOK, "settings", "Settings", p)
	return nil
}

type keysPage struct {
	Keys     []*store.APIKey
	Active   int
	Max      int
	Created  *store.APIKey
	Secret   string
	Error    string
	Name     string
	Scope    string
	Revoked  bool
	MaxName  int
	SignedIn string // the session's key id
}

func (h *Handler) keysData(r *req) (keysPage, error) {
	keys, _, err := h.app.ListKeys(r.Context(), r.actor, store.Page{Page: 1, Limit: 1000})
	p := keysPage{Keys: keys, Max: store.MaxActiveKeys, MaxName: store.MaxKeyNameLen, SignedIn: r.keyID(), Scope: "full"}
	for _, k := range keys {
		if k.Active() {
			p.Active++
		}
	}
	return p, err
}

func (h *Handler) keys(w http.ResponseWriter, r *req) error {
	p, err := h.keysData(r)
	if err != nil {
		return err
	}
	p.Revoked = r.URL.Query().Get("revoked") == "1"
	h.render(w, r, http.StatusOK, "keys", "API keys", p)
	return nil
}

// createKey creates a key with the store's rules and shows its value on
// the page answering the POST, the only time it is shown.
func (h *Handler) createKey(w http.ResponseWriter, r *req) error {
	name, scopeIn := r.PostForm.Get("name"), r.PostForm.Get("scope")
	key, secret, err := h.app.CreateKey(r.Context(), r.actor, name, cmpOr(scopeIn, "full"))
	p, lerr := h.keysData(r)
	if lerr != nil {
		return lerr
	}
	if err != nil {
		// The store's words for the key's fields, not the API's.
		se, ok := errors.AsType[*store.Error](err)
		if !ok || errors.Is(err, store.ErrNotFound) {
			return err
		}
		p.Error, p.Name, p.Scope = se.Msg, name, scopeIn
		if app.KindOf(err) == app.KeyLimit {
			p.Error = "This organization already has " + strconv.Itoa(store.MaxActiveKeys) + " active keys: revoke one first."
		}
		h.render(w, r, http.StatusUnprocessableEntity, "keys", "API keys", p)
		return nil
	}
	p.Created, p.Secret = key, secret
	h.render(w, r, http.StatusCreated, "keys", "API keys", p)
	return nil
}

func cmpOr(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}

func (h *Handler) revokeKey(w http.ResponseWriter, r *req) error {
	id := strings.ToLower(r.params.ByName("id"))
	if _, err := h.app.RevokeKey(r.Context(), r.actor, id); err != nil {
		return err
	}
	if id == r.keyID() { // the session ended with its key
		h.clearCookie(w, r.Request)
		http.Redirect(w, r.Request, "/login", http.StatusSeeOther)
		return nil
	}
	http.Redirect(w, r.Request, "/settings/keys?revoked=1", http.StatusSeeOther)
	return nil
}
