package web

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/dmarcd/dmarcd/store"
)

// SMTP TLS reports (RFC 8460) in the web interface (issue 14): the domain
// page's TLS section from the daily TLS roll-ups (store.TLSStatistics, as
// GET /domains/{id}/tls-statistics), the reports list and one report.

// tlsSection is the domain page's TLS part.
type tlsSection struct {
	Stats *store.TLSStatistics
	Chart stackChart
}

var tlsSeries = []seriesKey{{Class: "pass", Label: "successful"}, {Class: "fail", Label: "failed"}}

func (h *Handler) domainTLS(d *store.Domain, from, to time.Time) (*tlsSection, error) {
	st, err := h.db.TLSStatistics(d.OrgID, d.ID, from, to)
	if err != nil {
		return nil, err
	}
	dates := make([]string, len(st.ByDay))
	values := make([][]int64, len(st.ByDay))
	for i, ds := range st.ByDay {
		dates[i], values[i] = ds.Date, []int64{ds.SuccessfulSessions, ds.FailedSessions}
	}
	return &tlsSection{Stats: st, Chart: stackedChart("TLS sessions per day, successful and failed", tlsSeries, dates, values)}, nil
}

type tlsReportsPage struct {
	Reports          []*store.TLSReport
	Domains          []*store.Domain
	Names            map[string]string // domain names by id
	DomainID         string
	DateFrom, DateTo string
	Error            string
	Pager            pager
}

func (h *Handler) tlsReports(w http.ResponseWriter, r *req) error {
	q := r.URL.Query()
	p := tlsReportsPage{DomainID: strings.ToLower(q.Get("domain")), Names: map[string]string{}}
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
	for _, d := range domains {
		p.Names[d.ID] = d.Name
	}
	if err := errors.Join(err1, err2); err != nil {
		p.Error = "Dates are written 2026-11-20."
		h.render(w, r, http.StatusBadRequest, "tls_reports", "TLS reports", p)
		return nil
	}
	page := pageNum(r)
	l, err := h.db.ListTLSReports(r.orgID(), store.TLSFilter{DomainID: p.DomainID, DateFrom: from, DateTo: to,
		Page: store.Page{Page: page, Limit: listLimit}})
	if err != nil {
		return err
	}
	p.Reports, p.Pager = l.Reports, newPager(r, page, l.Total, listLimit)
	h.render(w, r, http.StatusOK, "tls_reports", "TLS reports", p)
	return nil
}

type tlsReportPage struct {
	Report *store.TLSReportDetail
	Domain string
}

func (h *Handler) tlsReport(w http.ResponseWriter, r *req) error {
	rep, err := h.db.FindTLSReport(r.orgID(), strings.ToLower(r.params.ByName("id")))
	if err != nil {
		return err
	}
	p := tlsReportPage{Report: rep}
	if d, err := h.db.FindDomain(r.orgID(), rep.DomainID); err == nil {
		p.Domain = d.Name
	}
	h.render(w, r, http.StatusOK, "tls_report", "TLS report from "+rep.OrganizationName, p)
	return nil
}
