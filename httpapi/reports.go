package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dmarcd/dmarcd/store"
)

// maxUnix is 9999-12-31T23:59:59Z: later times have no RFC 3339 form, so a
// filter beyond it could not be echoed back in a body.
const maxUnix = 253402300799

func (s *Server) listReports(w http.ResponseWriter, r *request) error {
	p, err := parseCursorPage(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	f := store.ReportFilter{Page: store.Page{Page: p.Page, Limit: p.Limit}, After: p.after}
	if f.DomainID = q.Get("domain_id"); f.DomainID != "" && !store.ValidID(f.DomainID) {
		return errBadRequest("query parameter domain_id must be a domain id (a UUID)",
			FieldError{Field: "domain_id", Message: "must be a UUID"})
	}
	if f.DateFrom, err = unixParam(q, "date_from"); err != nil {
		return err
	}
	if f.DateTo, err = unixParam(q, "date_to"); err != nil {
		return err
	}
	if f.DateFrom != nil && f.DateTo != nil && f.DateTo.Before(*f.DateFrom) {
		return errBadRange()
	}
	page, err := s.store.ListReportsPage(r.orgID(), f)
	if err != nil {
		return reportPageError(p, err)
	}
	writeJSON(w, http.StatusOK, reportListBody{Data: page.Reports, Pagination: p.of(page.Total, page.Next)})
	return nil
}

// unixParam reads an optional time query parameter (API.md "Dates in
// queries"): Unix seconds, an RFC 3339 timestamp (2026-11-20T00:00:00Z) or
// a date (2026-11-20, 00:00 UTC).
func unixParam(q url.Values, name string) (*time.Time, error) {
	v := q.Get(name)
	if v == "" {
		return nil, nil
	}
	t, ok := parseQueryTime(v)
	if !ok {
		const msg = "must be Unix seconds (0 to 253402300799), an RFC 3339 time (2026-11-20T00:00:00Z) or a date (2026-11-20)"
		return nil, errBadRequest(fmt.Sprintf("query parameter %s %s", name, msg), FieldError{Field: name, Message: msg})
	}
	return &t, nil
}

// parseQueryTime reads the three forms of unixParam, in UTC at second
// precision.
func parseQueryTime(v string) (time.Time, bool) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 || n > maxUnix {
			return time.Time{}, false
		}
		return time.Unix(n, 0).UTC(), true
	}
	// A "+" of an offset left unencoded in a query arrives as a space.
	v = strings.Replace(v, " ", "+", 1)
	for _, layout := range []string{time.RFC3339Nano, time.DateOnly} {
		if t, err := time.Parse(layout, v); err == nil {
			if t.Unix() < 0 || t.Unix() > maxUnix {
				return time.Time{}, false
			}
			return t.UTC().Truncate(time.Second), true
		}
	}
	return time.Time{}, false
}

func errBadRange() *Error {
	return errBadRequest("date_to must not be before date_from",
		FieldError{Field: "date_to", Message: "must not be before date_from"})
}

// findReport loads the :id report of the caller's organization; another
// organization's report is not found, as an unknown one.
func (s *Server) findReport(r *request) (*store.Report, error) {
	rep, err := s.store.FindReport(r.orgID(), r.params.ByName("id"))
	if errors.Is(err, store.ErrNotFound) {
		return nil, errNotFound("report not found")
	}
	return rep, err
}

// getReport writes the report, then its records one at a time as the store
// reads them: a report of a million records never sits in memory, neither
// as values nor as encoded JSON.
func (s *Server) getReport(w http.ResponseWriter, r *request) error {
	if r.params.ByName("id") == "export" {
		if rec, ok := w.(*recorder); ok {
			rec.route = exportPath
		}
		return s.exportReports(w, r)
	}
	rep, err := s.findReport(r)
	if err != nil {
		return err
	}
	out := newStream(w, http.Header{"Content-Type": {"application/json"}})
	err = s.app.WriteReportJSON(r.Context(), r.actor, rep, out)
	if err == nil {
		err = out.close()
	}
	if err != nil {
		return s.failStream(r, out, err)
	}
	return nil
}

// failStream ends a stream that broke. A client that went away is routine;
// anything else is logged here when the response is already under way,
// since the adapter can no longer report it.
func (s *Server) failStream(r *request, out *streamWriter, err error) error {
	if out.clientGone() {
		s.log.LogAttrs(r.Context(), slog.LevelDebug, "client went away during a stream",
			slog.String("request_id", out.w.Header().Get("X-Request-Id")), slog.String("path", r.URL.Path), slog.Any("error", err))
		return out.fail(nil)
	}
	if out.started {
		s.log.LogAttrs(r.Context(), slog.LevelError, "stream failed after the response began; connection cut",
			slog.String("request_id", out.w.Header().Get("X-Request-Id")), slog.String("path", r.URL.Path), slog.Any("error", err))
	}
	return out.fail(err)
}
