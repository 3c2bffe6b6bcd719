package httpapi

import (
	"net/http"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/store"
)

// The mailbox endpoints (API.md, Mailboxes (IMAP intake)). The rules
// (defaults, the address and plaintext policy, the login tried before
// saving, sealed credentials) are the application layer's; here are the
// routes and the decoding. Credentials are never part of an answer:
// store.Mailbox has no field for them.

func (s *Server) listMailboxes(w http.ResponseWriter, r *request) error {
	p, err := parsePage(r)
	if err != nil {
		return err
	}
	boxes, total, err := s.app.ListMailboxes(r.Context(), r.actor, store.Page{Page: p.Page, Limit: p.Limit})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, listBody{Data: boxes, Pagination: p.of(total)})
	return nil
}

func (s *Server) createMailbox(w http.ResponseWriter, r *request) error {
	var in app.MailboxSpec
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	m, err := s.app.CreateMailbox(r.Context(), r.actor, in)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/v1/mailboxes/"+m.ID)
	writeJSON(w, http.StatusCreated, m)
	return nil
}

func (s *Server) getMailbox(w http.ResponseWriter, r *request) error {
	m, err := s.app.FindMailbox(r.Context(), r.actor, r.params.ByName("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, m)
	return nil
}

func (s *Server) updateMailbox(w http.ResponseWriter, r *request) error {
	var in app.MailboxSpec
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	m, err := s.app.UpdateMailbox(r.Context(), r.actor, r.params.ByName("id"), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, m)
	return nil
}

func (s *Server) deleteMailbox(w http.ResponseWriter, r *request) error {
	if err := s.app.DeleteMailbox(r.Context(), r.actor, r.params.ByName("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) pollMailbox(w http.ResponseWriter, r *request) error {
	res, err := s.app.PollMailbox(r.Context(), r.actor, r.params.ByName("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}
