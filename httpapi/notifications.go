package httpapi

import (
	"net/http"
	"strconv"

	"github.com/dmarcd/dmarcd/store"
)

// The notification endpoints (issue 27): the organization's recipient
// list and its mail log. The rules are the application layer's.

// notificationsBody is the PUT body: the whole list.
type notificationsBody struct {
	Recipients []store.NotificationRecipient `json:"recipients"`
}

func (s *Server) getNotifications(w http.ResponseWriter, r *request) error {
	n, err := s.app.Notifications(r.Context(), r.actor)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, n)
	return nil
}

func (s *Server) putNotifications(w http.ResponseWriter, r *request) error {
	var in notificationsBody
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	if in.Recipients == nil {
		return errBadRequest("recipients is required (an empty list mails no one)",
			FieldError{Field: "recipients", Message: "is required"})
	}
	n, err := s.app.SetNotifications(r.Context(), r.actor, in.Recipients)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, n)
	return nil
}

func (s *Server) listMail(w http.ResponseWriter, r *request) error {
	limit := 50
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 200 {
			return errBadRequest("query parameter limit must be an integer from 1 to 200",
				FieldError{Field: "limit", Message: "must be an integer from 1 to 200"})
		}
		limit = n
	}
	log, err := s.app.MailLog(r.Context(), r.actor, limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": log})
	return nil
}
