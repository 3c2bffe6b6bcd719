package httpapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/dmarcd/dmarcd/store"
)

// SMTP TLS reports (RFC 8460): list, single, a domain's statistics, and
// check-tls.

// tlsPagination is the pagination of report lists: API.md's fields plus
// next_cursor (null on the last page).
type tlsPagination struct {
	pagination
	NextCursor *string `json:"next_cursor"`
}

type tlsListBody struct {
	Data       []*store.TLSReport `json:"data"`
	Pagination tlsPagination      `json:"pagination"`
}

func (s *Server) listTLSReports(w http.ResponseWriter, r *request) error {
	p, err := parsePage(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	f := store.TLSFilter{Page: store.Page{Page: p.Page, Limit: p.Limit}, Cursor: q.Get("cursor")}
	if f.DomainID, f.DateFrom, f.DateTo, err = failureScope(q); err != nil {
		return err
	}
	l, err := s.store.ListTLSReports(r.orgID(), f)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return errNotFound("domain not found")
	case errors.Is(err, store.ErrInvalid):
		return errBadRequest("query parameter cursor is not one this listing returned",
			FieldError{Field: "cursor", Message: "must be a next_cursor of this listing"})
	case err != nil:
		return err
	}
	body := tlsListBody{Data: l.Reports, Pagination: tlsPagination{pagination: p.of(l.Total)}}
	if f.Cursor != "" {
		body.Pagination.Page = 1
	}
	if l.NextCursor != "" {
		body.Pagination.NextCursor = &l.NextCursor
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}

func (s *Server) getTLSReport(w http.ResponseWriter, r *request) error {
	rep, err := s.store.FindTLSReport(r.orgID(), r.params.ByName("id"))
	return writeFound(w, rep, err, "TLS report not found")
}

// domainTLSStatistics answers a domain's TLS statistics over a range of
// UTC days (the window of the DMARC statistics), from the daily roll-ups.
func (s *Server) domainTLSStatistics(w http.ResponseWriter, r *request) error {
	from, to, err := statsRange(r, s.now())
	if err != nil {
		return err
	}
	st, err := s.store.TLSStatistics(r.orgID(), r.params.ByName("id"), from, to)
	return writeFound(w, st, err, "domain not found")
}

// checkTLS answers check-tls for any domain.
func (s *Server) checkTLS(w http.ResponseWriter, r *request) error {
	var in struct {
		Domain *string `json:"domain"`
	}
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	res, err := s.app.CheckTLS(r.Context(), r.actor, deref(in.Domain))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// postTLSReport hands a TLS report POSTed by a reporter to the HTTPS way
// in, when the server has one (--public-url).
func (s *Server) postTLSReport(w http.ResponseWriter, r *request) error {
	if s.cfg.TLSReports == nil {
		return errNotFound(fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path))
	}
	s.cfg.TLSReports.ServeHTTP(w, r.Request)
	return nil
}
