package admin

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/dmarcd/dmarcd/store"
)

// ReportQuery selects aggregate reports for ListReports: Org (name or id;
// "" when there is only one organization), Domain (a registered name of
// that organization; "" for all), Limit (1..1000) and After (a previous
// list's Next, to go on).
type ReportQuery struct {
	Org    string `json:"org"`
	Domain string `json:"domain"`
	Limit  int    `json:"limit"`
	After  []byte `json:"after,omitempty"`
}

// ReportList is one page of reports, newest date_begin first.
type ReportList struct {
	Organization *store.Organization `json:"organization"`
	Reports      []*store.Report     `json:"reports"`
	Total        int                 `json:"total"`
	Next         []byte              `json:"next,omitempty"`
}

// ReportDetail is a report with its records.
type ReportDetail struct {
	Report  *store.Report   `json:"report"`
	Records []*store.Record `json:"records"`
}

// StatsQuery selects statistics: of Domain, or of every domain of Org when
// empty, over the Days UTC days up to today (1..366).
type StatsQuery struct {
	Org    string `json:"org"`
	Domain string `json:"domain"`
	Days   int    `json:"days"`
}

// StatsResult holds one DomainStats per domain asked for.
type StatsResult struct {
	Organization *store.Organization `json:"organization"`
	Domains      []DomainStats       `json:"domains"`
}

// DomainStats is a domain's name and its statistics.
type DomainStats struct {
	Name  string             `json:"name"`
	Stats *store.DomainStats `json:"statistics"`
}

// resolveOrg is the organization ref names, or the only one when ref is
// empty (ErrInvalid listing them when there are several).
func (l *Local) resolveOrg(ref string) (*store.Organization, error) {
	if ref != "" {
		return l.DB.FindOrganization(ref)
	}
	orgs, err := l.DB.ListOrganizations()
	if err != nil {
		return nil, err
	}
	if len(orgs) == 1 {
		return orgs[0], nil
	}
	names := make([]string, len(orgs))
	for i, o := range orgs {
		names[i] = o.Name
	}
	return nil, &store.Error{Kind: store.ErrInvalid, Msg: fmt.Sprintf("there are %d organizations (%s): choose one with --org", len(orgs), strings.Join(names, ", "))}
}

// resolveDomain is the id of the domain called name in org ("" for none).
func (l *Local) resolveDomain(org *store.Organization, name string) (string, error) {
	if name == "" {
		return "", nil
	}
	doms, err := l.DB.DomainsNamed(org.ID, strings.TrimSuffix(strings.ToLower(strings.TrimSpace(name)), "."))
	if err != nil {
		return "", err
	}
	if len(doms) == 0 {
		return "", &store.Error{Kind: store.ErrNotFound, Msg: fmt.Sprintf("organization %s has no domain %s", org.Name, name)}
	}
	return doms[0].ID, nil
}

// ListReports lists one page of aggregate reports.
func (l *Local) ListReports(_ context.Context, q ReportQuery) (*ReportList, error) {
	org, err := l.resolveOrg(q.Org)
	if err != nil {
		return nil, err
	}
	domainID, err := l.resolveDomain(org, q.Domain)
	if err != nil {
		return nil, err
	}
	if q.Limit < 1 || q.Limit > 1000 {
		return nil, &store.Error{Kind: store.ErrInvalid, Msg: "limit must be 1 to 1000"}
	}
	p, err := l.DB.ListReportsPage(org.ID, store.ReportFilter{DomainID: domainID, Page: store.Page{Page: 1, Limit: q.Limit}, After: q.After})
	if err != nil {
		return nil, err
	}
	return &ReportList{Organization: org, Reports: p.Reports, Total: p.Total, Next: p.Next}, nil
}

// ShowReport returns a report with its records. orgRef "" looks in every
// organization (the box's admin may read them all).
func (l *Local) ShowReport(_ context.Context, orgRef, id string) (*ReportDetail, error) {
	id = strings.ToLower(strings.TrimSpace(id))
	orgs, err := l.orgsOf(orgRef)
	if err != nil {
		return nil, err
	}
	for _, org := range orgs {
		rep, err := l.DB.FindReport(org.ID, id)
		if err != nil {
			continue
		}
		d := &ReportDetail{Report: rep, Records: []*store.Record{}}
		err = l.DB.ReportRecords(org.ID, id, func(r *store.Record) error {
			d.Records = append(d.Records, r)
			return nil
		})
		return d, err
	}
	return nil, &store.Error{Kind: store.ErrNotFound, Msg: "report " + id + " not found (dmarcd reports list shows the ids)"}
}

// ReportStats returns the statistics of one domain or of each domain.
func (l *Local) ReportStats(_ context.Context, q StatsQuery) (*StatsResult, error) {
	org, err := l.resolveOrg(q.Org)
	if err != nil {
		return nil, err
	}
	if q.Days < 1 || q.Days > 366 {
		return nil, &store.Error{Kind: store.ErrInvalid, Msg: "days must be 1 to 366"}
	}
	to := time.Now().UTC()
	from := to.Truncate(24*time.Hour).AddDate(0, 0, -(q.Days - 1))
	var doms []*store.Domain
	if q.Domain != "" {
		id, err := l.resolveDomain(org, q.Domain)
		if err != nil {
			return nil, err
		}
		d, err := l.DB.FindDomain(org.ID, id)
		if err != nil {
			return nil, err
		}
		doms = []*store.Domain{d}
	} else {
		for page := 1; ; page++ {
			ds, _, err := l.DB.ListDomains(org.ID, store.Page{Page: page, Limit: 100})
			if err != nil {
				return nil, err
			}
			if len(ds) == 0 {
				break
			}
			doms = append(doms, ds...)
		}
	}
	res := &StatsResult{Organization: org, Domains: []DomainStats{}}
	for _, d := range doms {
		st, err := l.DB.DomainStatistics(org.ID, d.ID, from, to)
		if err != nil {
			return nil, err
		}
		res.Domains = append(res.Domains, DomainStats{Name: d.Name, Stats: st})
	}
	return res, nil
}

func (h *handler) reportRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/reports/list", func(w http.ResponseWriter, r *http.Request) {
		var q ReportQuery
		if !h.decode(w, r, &q) {
			return
		}
		res, err := h.svc.ListReports(r.Context(), q)
		h.answer(w, res, err)
	})
	mux.HandleFunc("GET /v1/reports/{id}", func(w http.ResponseWriter, r *http.Request) {
		res, err := h.svc.ShowReport(r.Context(), r.URL.Query().Get("org"), r.PathValue("id"))
		h.answer(w, res, err)
	})
	mux.HandleFunc("POST /v1/reports/stats", func(w http.ResponseWriter, r *http.Request) {
		var q StatsQuery
		if !h.decode(w, r, &q) {
			return
		}
		res, err := h.svc.ReportStats(r.Context(), q)
		h.answer(w, res, err)
	})
}

// ListReports implements Service.
func (c *Client) ListReports(ctx context.Context, q ReportQuery) (*ReportList, error) {
	var res ReportList
	return &res, c.do(ctx, "POST", "/v1/reports/list", q, &res)
}

// ShowReport implements Service.
func (c *Client) ShowReport(ctx context.Context, orgRef, id string) (*ReportDetail, error) {
	var res ReportDetail
	return &res, c.do(ctx, "GET", "/v1/reports/"+url.PathEscape(id)+"?org="+url.QueryEscape(orgRef), nil, &res)
}

// ReportStats implements Service.
func (c *Client) ReportStats(ctx context.Context, q StatsQuery) (*StatsResult, error) {
	var res StatsResult
	return &res, c.do(ctx, "POST", "/v1/reports/stats", q, &res)
}
