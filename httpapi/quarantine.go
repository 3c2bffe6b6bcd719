package httpapi

import (
	"net/http"
	"strconv"

	"github.com/dmarcd/dmarcd/store"
)

// The quarantine endpoints: an organization's entries as the application
// layer shows them (app.Quarantined), their bytes, retry and delete.

// listQuarantine serves GET /quarantine: the organization's entries,
// newest first, paginated.
func (s *Server) listQuarantine(w http.ResponseWriter, r *request) error {
	p, err := parsePage(r)
	if err != nil {
		return err
	}
	entries, total, err := s.app.ListQuarantine(r.Context(), r.actor, store.Page{Page: p.Page, Limit: p.Limit})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, listBody{Data: entries, Pagination: p.of(total)})
	return nil
}

func (s *Server) getQuarantine(w http.ResponseWriter, r *request) error {
	e, _, err := s.app.FindQuarantine(r.Context(), r.actor, r.params.ByName("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, e)
	return nil
}

// quarantineRaw serves GET /quarantine/{id}/raw: the bytes kept, as
// message/rfc822 (the header only when the entry is truncated).
func (s *Server) quarantineRaw(w http.ResponseWriter, r *request) error {
	_, raw, err := s.app.FindQuarantine(r.Context(), r.actor, r.params.ByName("id"))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "message/rfc822")
	w.Header().Set("Content-Length", strconv.Itoa(len(raw)))
	w.Header().Set("Content-Disposition", `attachment; filename="`+r.params.ByName("id")+`.eml"`)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(raw)
	return nil
}

// retryQuarantine serves POST /quarantine/{id}/retry: 200 with the ingest
// outcome; the entry goes when its reports are stored.
func (s *Server) retryQuarantine(w http.ResponseWriter, r *request) error {
	res, err := s.app.RetryQuarantine(r.Context(), r.actor, r.params.ByName("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) deleteQuarantine(w http.ResponseWriter, r *request) error {
	if err := s.app.DeleteQuarantine(r.Context(), r.actor, r.params.ByName("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
