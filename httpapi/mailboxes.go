package httpapi

import (
	"errors"
	"net/http"

	imapin "github.com/dmarcd/dmarcd/ingest/imap"
	"github.com/dmarcd/dmarcd/store"
)

// The mailbox endpoints (API.md, Mailboxes (IMAP intake)). The rules
// (defaults, the address and plaintext policy, the login tried before
// saving, sealed credentials) are package imap's Service; here are the
// routes, the decoding and the error codes. Credentials are never part of
// an answer: store.Mailbox has no field for them.

// errNoMailboxes is the 500 of a server built without IMAP intake.
var errNoMailboxes = errors.New("httpapi: no IMAP mailbox service configured")

// mailboxError maps the Service's errors to the API's codes.
func mailboxError(err error) error {
	var in *imapin.InputError
	var un *imapin.UnreachableError
	switch {
	case errors.As(err, &in):
		return errValidation(in.Field, in.Msg)
	case errors.As(err, &un):
		return &Error{Status: http.StatusUnprocessableEntity, Code: "mailbox_unreachable", Message: un.Err.Error()}
	case errors.Is(err, store.ErrNotFound):
		return errNotFound("mailbox not found")
	case errors.Is(err, imapin.ErrNoKey):
		return &Error{Status: http.StatusServiceUnavailable, Code: "secret_key_unavailable",
			Message: "the server cannot store mailbox credentials: its secret key is not loaded", Cause: err}
	}
	return err
}

func (s *Server) mailboxes() (*imapin.Service, error) {
	if s.cfg.Mailboxes == nil {
		return nil, errNoMailboxes
	}
	return s.cfg.Mailboxes, nil
}

func (s *Server) listMailboxes(w http.ResponseWriter, r *request) error {
	p, err := parsePage(r)
	if err != nil {
		return err
	}
	boxes, total, err := s.store.ListMailboxes(r.org.ID, store.Page{Page: p.Page, Limit: p.Limit})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, listBody{Data: boxes, Pagination: p.of(total)})
	return nil
}

func (s *Server) createMailbox(w http.ResponseWriter, r *request) error {
	svc, err := s.mailboxes()
	if err != nil {
		return err
	}
	var in imapin.Spec
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	m, err := svc.Create(r.Context(), r.org.ID, in)
	if err != nil {
		return mailboxError(err)
	}
	w.Header().Set("Location", "/api/v1/mailboxes/"+m.ID)
	writeJSON(w, http.StatusCreated, m)
	return nil
}

func (s *Server) getMailbox(w http.ResponseWriter, r *request) error {
	m, err := s.store.FindMailbox(r.org.ID, r.params.ByName("id"))
	if err != nil {
		return mailboxError(err)
	}
	writeJSON(w, http.StatusOK, m)
	return nil
}

func (s *Server) updateMailbox(w http.ResponseWriter, r *request) error {
	svc, err := s.mailboxes()
	if err != nil {
		return err
	}
	var in imapin.Spec
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	m, err := svc.Update(r.Context(), r.org.ID, r.params.ByName("id"), in)
	if err != nil {
		return mailboxError(err)
	}
	writeJSON(w, http.StatusOK, m)
	return nil
}

func (s *Server) deleteMailbox(w http.ResponseWriter, r *request) error {
	svc, err := s.mailboxes()
	if err != nil {
		return err
	}
	if err := svc.Delete(r.org.ID, r.params.ByName("id")); err != nil {
		return mailboxError(err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) pollMailbox(w http.ResponseWriter, r *request) error {
	svc, err := s.mailboxes()
	if err != nil {
		return err
	}
	res, err := svc.Poll(r.Context(), r.org.ID, r.params.ByName("id"))
	if err != nil {
		return mailboxError(err)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// MailboxErrorMessage is the status and message the API answers for err
// of the mailbox service (imap.Service), so that the web interface shows
// the same words: "invalid host: ...", the server's words of a failed
// login, "mailbox not found".
func MailboxErrorMessage(err error) (status int, msg string) {
	return ErrorMessage(mailboxError(err))
}
