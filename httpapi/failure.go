package httpapi

import (
	"net/http"
	"net/netip"
	"net/url"
	"time"

	"github.com/dmarcd/dmarcd/store"
)

// Failure reports, served under /api/v1/forensic-reports (the API keeps
// that name): list, single, summary, statistics. Their routes need the
// plan feature (readFailures), checked before any parameter is read, so
// that an organization without failure reports gets the same 403 whatever
// it sends.

// The paths that share /api/v1/forensic-reports/:id: httprouter 1.3 cannot
// register fixed segments beside a parameter, so failureByID dispatches
// them and listRoute lists them for the OpenAPI check.
const (
	failureSummaryPath    = "/api/v1/forensic-reports/summary"
	failureStatisticsPath = "/api/v1/forensic-reports/statistics"
)

// listRoute records a route served by another route's handler (see
// failureByID), so that Routes lists it as the API documents it.
func (s *Server) listRoute(method, path string, acc access) {
	s.routes = append(s.routes, Route{Method: method, Path: path, Access: acc})
}

// failureByID serves /forensic-reports/:id, summary and statistics.
func (s *Server) failureByID(w http.ResponseWriter, r *request) error {
	var h handlerFunc
	path := ""
	switch r.params.ByName("id") {
	case "summary":
		h, path = s.failureSummary, failureSummaryPath
	case "statistics":
		h, path = s.failureStatistics, failureStatisticsPath
	default:
		return s.getFailureReport(w, r)
	}
	if rec, ok := w.(*recorder); ok {
		rec.route = path
	}
	return h(w, r)
}

func (s *Server) listFailureReports(w http.ResponseWriter, r *request) error {
	p, err := parseCursorPage(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	f := store.FailureFilter{Page: store.Page{Page: p.Page, Limit: p.Limit}, After: p.after}
	if f.DomainID, f.DateFrom, f.DateTo, err = failureScope(q); err != nil {
		return err
	}
	if f.SourceIP, err = sourceIPParam(q); err != nil {
		return err
	}
	if f.AuthFailure, err = authFailureParam(q); err != nil {
		return err
	}
	page, err := s.app.FailureReportsPage(r.Context(), r.actor, f)
	if err != nil {
		return reportPageError(p, err)
	}
	writeJSON(w, http.StatusOK, reportListBody{Data: page.Reports, Pagination: p.of(page.Total, page.Next)})
	return nil
}

// failureScope reads domain_id, date_from and date_to (Unix seconds, on
// the arrival date), shared by the list and the statistics.
func failureScope(q url.Values) (domainID string, from, to *time.Time, err error) {
	if domainID = q.Get("domain_id"); domainID != "" && !store.ValidID(domainID) {
		return "", nil, nil, errBadRequest("query parameter domain_id must be a domain id (a UUID)",
			FieldError{Field: "domain_id", Message: "must be a UUID"})
	}
	if from, err = unixParam(q, "date_from"); err != nil {
		return "", nil, nil, err
	}
	if to, err = unixParam(q, "date_to"); err != nil {
		return "", nil, nil, err
	}
	if from != nil && to != nil && to.Before(*from) {
		return "", nil, nil, errBadRange()
	}
	return domainID, from, to, nil
}

// sourceIPParam reads source_ip: an IPv4 or IPv6 address, returned in the
// canonical form reports are stored with (IPv4-mapped addresses unmapped).
func sourceIPParam(q url.Values) (string, error) {
	v := q.Get("source_ip")
	if v == "" {
		return "", nil
	}
	ip, err := netip.ParseAddr(v)
	if err != nil || ip.Zone() != "" {
		const msg = "must be an IPv4 or IPv6 address"
		return "", errBadRequest("query parameter source_ip "+msg, FieldError{Field: "source_ip", Message: msg})
	}
	return ip.Unmap().String(), nil
}

// authFailureParam reads auth_failure: dmarc, spf or dkim.
func authFailureParam(q url.Values) (string, error) {
	switch v := q.Get("auth_failure"); v {
	case "", "dmarc", "spf", "dkim":
		return v, nil
	}
	const msg = "must be one of dmarc, spf, dkim"
	return "", errBadRequest("query parameter auth_failure "+msg, FieldError{Field: "auth_failure", Message: msg})
}

// getFailureReport answers one report with its original headers.
func (s *Server) getFailureReport(w http.ResponseWriter, r *request) error {
	rep, err := s.app.FailureReport(r.Context(), r.actor, r.params.ByName("id"))
	return writeFound(w, rep, err, "forensic report not found")
}

// failureSummary answers the last 7 UTC days up to now, from the daily
// counts kept at ingest.
func (s *Server) failureSummary(w http.ResponseWriter, r *request) error {
	sum, err := s.app.FailureSummary(r.Context(), r.actor)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sum)
	return nil
}

// failureStatistics answers all-time statistics, narrowed by domain_id,
// date_from and date_to.
func (s *Server) failureStatistics(w http.ResponseWriter, r *request) error {
	var f store.FailureStatsFilter
	var err error
	if f.DomainID, f.DateFrom, f.DateTo, err = failureScope(r.URL.Query()); err != nil {
		return err
	}
	st, err := s.app.FailureStatistics(r.Context(), r.actor, f)
	return writeFound(w, st, err, "domain not found")
}
