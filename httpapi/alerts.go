package httpapi

import (
	"errors"
	"net/http"

	"github.com/dmarcd/dmarcd/store"
)

// listAlerts serves GET /alerts: filters severity, status and domain_id,
// pagination, newest first.
func (s *Server) listAlerts(w http.ResponseWriter, r *request) error {
	p, err := parsePage(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	f := store.AlertFilter{Page: store.Page{Page: p.Page, Limit: p.Limit},
		Severity: q.Get("severity"), Status: q.Get("status"), DomainID: q.Get("domain_id")}
	if q.Has("severity") && !store.ValidAlertSeverity(f.Severity) {
		const msg = "must be one of info, warning, critical"
		return errBadRequest("query parameter severity "+msg, FieldError{Field: "severity", Message: msg})
	}
	if q.Has("status") && !store.ValidAlertStatus(f.Status) {
		const msg = "must be one of pending, sent, dismissed"
		return errBadRequest("query parameter status "+msg, FieldError{Field: "status", Message: msg})
	}
	if q.Has("domain_id") && !store.ValidID(f.DomainID) {
		return errBadRequest("query parameter domain_id must be a domain id (a UUID)",
			FieldError{Field: "domain_id", Message: "must be a UUID"})
	}
	alerts, total, err := s.store.ListAlerts(r.orgID(), f)
	if errors.Is(err, store.ErrNotFound) {
		return errNotFound("domain not found")
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, listBody{Data: alerts, Pagination: p.of(total)})
	return nil
}

// dismissAlert serves PUT /alerts/{id}/dismiss: 200 with the alert, again
// 200 when it was dismissed already.
func (s *Server) dismissAlert(w http.ResponseWriter, r *request) error {
	a, err := s.app.DismissAlert(r.Context(), r.actor, r.params.ByName("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}
