package httpapi

import (
	"errors"
	"net/http"
	"strconv"
	"sync"

	"github.com/dmarcd/dmarcd/senders"
	"github.com/dmarcd/dmarcd/store"
)

// The sources, senders and policy-advice views of a domain (API.md
// "Sources, senders and policy advice"), computed by package senders from
// the per-source roll-ups.

// defaultKnownSenders is the embedded map, parsed once, for a Server
// without Config.Senders.
var defaultKnownSenders = sync.OnceValue(senders.DefaultKnownSenders)

// senderViews returns the configured views, or views over the store with
// the embedded map, no SPF evaluation, and the app's DNS resolver to read
// published records.
func (s *Server) senderViews() *senders.Views {
	if s.cfg.Senders != nil {
		return s.cfg.Senders
	}
	return &senders.Views{DB: s.store, Known: defaultKnownSenders(), DMARC: s.app.DMARCResolver()}
}

// viewErr turns a store error of the views into the API's.
func viewErr(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return errNotFound("domain not found")
	}
	if errors.Is(err, store.ErrInvalid) {
		return errBadRange()
	}
	return err
}

// maxGroupParam bounds the group query parameter of /sources.
const maxGroupParam = 300

// domainSources serves GET /domains/{id}/sources: one row per source IP,
// most messages first, paginated; group=NAME keeps one sender group's.
func (s *Server) domainSources(w http.ResponseWriter, r *request) error {
	p, err := parsePage(r)
	if err != nil {
		return err
	}
	from, to, err := statsRange(r, s.now())
	if err != nil {
		return err
	}
	group := r.URL.Query().Get("group")
	if len(group) > maxGroupParam {
		msg := "must be at most " + strconv.Itoa(maxGroupParam) + " bytes"
		return errBadRequest("query parameter group "+msg, FieldError{Field: "group", Message: msg})
	}
	rows, err := s.senderViews().Sources(r.Context(), r.orgID(), r.params.ByName("id"), from, to, group)
	if err != nil {
		return viewErr(err)
	}
	start := min(len(rows), (p.Page-1)*p.Limit)
	end := min(len(rows), start+p.Limit)
	writeJSON(w, http.StatusOK, listBody{Data: rows[start:end], Pagination: p.of(len(rows))})
	return nil
}

// domainSenders serves GET /domains/{id}/senders: every sender group, most
// messages first, not paginated.
func (s *Server) domainSenders(w http.ResponseWriter, r *request) error {
	from, to, err := statsRange(r, s.now())
	if err != nil {
		return err
	}
	groups, err := s.senderViews().Senders(r.Context(), r.orgID(), r.params.ByName("id"), from, to)
	if err != nil {
		return viewErr(err)
	}
	if groups == nil {
		groups = []*senders.Group{}
	}
	writeJSON(w, http.StatusOK, struct {
		Data []*senders.Group `json:"data"`
	}{groups})
	return nil
}

// domainPolicyAdvice serves GET /domains/{id}/policy-advice.
func (s *Server) domainPolicyAdvice(w http.ResponseWriter, r *request) error {
	from, to, err := statsRange(r, s.now())
	if err != nil {
		return err
	}
	a, err := s.senderViews().PolicyAdvice(r.Context(), r.orgID(), r.params.ByName("id"), from, to)
	if err != nil {
		return viewErr(err)
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}
