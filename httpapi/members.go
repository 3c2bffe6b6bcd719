package httpapi

import (
	"net/http"
	"time"

	"github.com/dmarcd/dmarcd/app"
)

// The people of an organization (issue 26, docs/people.md): members are
// listed by admins, owners and full-scope keys; only owners change them,
// so an API key (at most an admin) gets 403 on the writes and a person
// calls them with their web session as a bearer token.

// memberBody is a member as the API shows them.
type memberBody struct {
	ID           string     `json:"id"`
	Email        string     `json:"email"`
	Role         string     `json:"role"`
	CreatedAt    time.Time  `json:"created_at"`
	LastSignInAt *time.Time `json:"last_sign_in_at"`
}

// createdMember is the creation answer: the member and, this once, their
// invitation link.
type createdMember struct {
	memberBody
	InvitationURL       string    `json:"invitation_url"`
	InvitationExpiresAt time.Time `json:"invitation_expires_at"`
}

func newMemberBody(m app.Member) memberBody {
	return memberBody{ID: m.ID, Email: m.Email, Role: m.Role.String(), CreatedAt: m.CreatedAt, LastSignInAt: m.LastSignInAt}
}

func (s *Server) listMembers(w http.ResponseWriter, r *request) error {
	ms, err := s.app.Members(r.actor)
	if err != nil {
		return err
	}
	out := make([]memberBody, len(ms))
	for i, m := range ms {
		out[i] = newMemberBody(m)
	}
	writeJSON(w, http.StatusOK, struct {
		Data []memberBody `json:"data"`
	}{out})
	return nil
}

func (s *Server) createMember(w http.ResponseWriter, r *request) error {
	var in struct {
		Email *string `json:"email"`
		Role  *string `json:"role"`
	}
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	role := "viewer"
	if in.Role != nil {
		role = *in.Role
	}
	m, token, err := s.app.AddMember(r.actor, deref(in.Email), role)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/v1/members/"+m.ID)
	writeJSON(w, http.StatusCreated, createdMember{memberBody: newMemberBody(m),
		InvitationURL:       s.app.InviteLink(requestBase(r.Request), token),
		InvitationExpiresAt: s.now().Add(app.InvitationTTL)})
	return nil
}

// requestBase is the scheme and host the request came to.
func requestBase(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

func (s *Server) updateMember(w http.ResponseWriter, r *request) error {
	var in struct {
		Role *string `json:"role"`
	}
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	if in.Role == nil {
		return &Error{Status: http.StatusUnprocessableEntity, Code: "validation_failed", Message: "role is required",
			Details: []FieldError{{Field: "role", Message: "is required"}}}
	}
	m, err := s.app.SetRole(r.actor, r.params.ByName("id"), *in.Role)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, newMemberBody(m))
	return nil
}

func (s *Server) deleteMember(w http.ResponseWriter, r *request) error {
	if _, err := s.app.RemoveMember(r.actor, r.params.ByName("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// auditBody is one entry of the audit log as the API shows it.
type auditBody struct {
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Action string    `json:"action"`
	Target string    `json:"target"`
	IP     string    `json:"ip"`
}

func (s *Server) auditLog(w http.ResponseWriter, r *request) error {
	q := r.URL.Query()
	f := app.AuditFilter{Actor: q.Get("actor"), Action: q.Get("action"), Cursor: q.Get("cursor")}
	var err error
	if f.Limit, err = intParam(q.Get("limit"), "limit", 50, 1, 500); err != nil {
		return err
	}
	from, err := unixParam(q, "from")
	if err != nil {
		return err
	}
	to, err := unixParam(q, "to")
	if err != nil {
		return err
	}
	if from != nil {
		f.From = *from
	}
	if to != nil {
		f.To = *to
		if len(q.Get("to")) == len(time.DateOnly) { // a date: the whole day
			f.To = f.To.Add(24*time.Hour - time.Nanosecond)
		}
	}
	page, err := s.app.AuditLog(r.actor, f)
	if err != nil {
		return err
	}
	out := make([]auditBody, len(page.Entries))
	for i, e := range page.Entries {
		out[i] = auditBody{At: e.At.Truncate(time.Second), Actor: e.Actor, Action: e.Action, Target: e.Target, IP: e.IP}
	}
	var next *string
	if page.NextCursor != "" {
		next = &page.NextCursor
	}
	writeJSON(w, http.StatusOK, struct {
		Data       []auditBody `json:"data"`
		NextCursor *string     `json:"next_cursor"`
	}{out, next})
	return nil
}
