package admin

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/store"
)

// Users are the people operations of 'dmarcd user' (docs/people.md), run
// by the operator through the application layer. A member is named by
// their email or member id within the organization orgRef (a name or
// id; "" the only one there is).
type Users interface {
	// AddUser makes email a member of orgRef with role (creating the
	// account) and returns the member with the one-time invitation link.
	AddUser(ctx context.Context, orgRef, email, role string) (*AddedUser, error)
	// ListUsers lists the members of orgRef, of every organization when
	// "", by organization and email.
	ListUsers(ctx context.Context, orgRef string) ([]*UserEntry, error)
	// RemoveUser removes a member (ErrConflict for the last owner).
	RemoveUser(ctx context.Context, orgRef, member string) (*UserEntry, error)
	// SetUserRole changes a member's role (ErrConflict for the last owner).
	SetUserRole(ctx context.Context, orgRef, member, role string) (*UserEntry, error)
	// ResetUser makes a one-time password-reset link for a member and
	// ends their sessions.
	ResetUser(ctx context.Context, orgRef, member string) (*AddedUser, error)
}

// UserEntry is a member with their organization.
type UserEntry struct {
	ID             string     `json:"id"`
	Email          string     `json:"email"`
	Role           string     `json:"role"`
	OrganizationID string     `json:"organization_id"`
	Organization   string     `json:"organization"`
	CreatedAt      time.Time  `json:"created_at"`
	LastSignInAt   *time.Time `json:"last_sign_in_at"`
	TOTP           bool       `json:"totp"`
	// Pending: the invitation is not used yet (no access).
	Pending bool `json:"pending"`
}

// AddedUser is a member with a one-time link: Token, and Link when the
// server knows its URL (Local.WebURL).
type AddedUser struct {
	UserEntry
	Token string `json:"token"`
	Link  string `json:"link,omitempty"`
}

func userEntry(m app.Member, org *store.Organization) UserEntry {
	return UserEntry{ID: m.ID, Email: m.Email, Role: m.Role.String(), OrganizationID: org.ID, Organization: org.Name,
		CreatedAt: m.CreatedAt, LastSignInAt: m.LastSignInAt, TOTP: m.TOTP, Pending: m.Pending}
}

// link is the one-time link of token, "" when the URL is not known.
func (l *Local) link(token string) string {
	if l.WebURL == "" {
		return ""
	}
	return strings.TrimRight(l.WebURL, "/") + "/invite/" + token
}

// AddUser implements Users.
func (l *Local) AddUser(_ context.Context, orgRef, email, role string) (*AddedUser, error) {
	org, err := l.orgOrOnly(orgRef)
	if err != nil {
		return nil, err
	}
	m, token, err := l.app().AddMember(app.Operator(org), email, role)
	if err != nil {
		return nil, asStoreError(err)
	}
	return &AddedUser{UserEntry: userEntry(m, org), Token: token, Link: l.link(token)}, nil
}

// ListUsers implements Users.
func (l *Local) ListUsers(_ context.Context, orgRef string) ([]*UserEntry, error) {
	orgs, err := l.orgsOf(orgRef)
	if err != nil {
		return nil, err
	}
	out := []*UserEntry{}
	for _, org := range orgs {
		ms, err := l.app().Members(app.Operator(org))
		if err != nil {
			return nil, asStoreError(err)
		}
		for _, m := range ms {
			e := userEntry(m, org)
			out = append(out, &e)
		}
	}
	return out, nil
}

// member finds the member of org that ref names: a member id or an email.
func (l *Local) member(org *store.Organization, ref string) (app.Member, error) {
	ms, err := l.app().Members(app.Operator(org))
	if err != nil {
		return app.Member{}, asStoreError(err)
	}
	ref = strings.ToLower(strings.TrimSpace(ref))
	for _, m := range ms {
		if m.ID == ref || m.Email == ref {
			return m, nil
		}
	}
	return app.Member{}, &store.Error{Kind: store.ErrNotFound, Msg: "no member " + ref + " in organization " + org.Name}
}

// RemoveUser implements Users.
func (l *Local) RemoveUser(_ context.Context, orgRef, ref string) (*UserEntry, error) {
	org, err := l.orgOrOnly(orgRef)
	if err != nil {
		return nil, err
	}
	m, err := l.member(org, ref)
	if err != nil {
		return nil, err
	}
	m, err = l.app().RemoveMember(app.Operator(org), m.ID)
	if err != nil {
		return nil, asStoreError(err)
	}
	e := userEntry(m, org)
	return &e, nil
}

// SetUserRole implements Users.
func (l *Local) SetUserRole(_ context.Context, orgRef, ref, role string) (*UserEntry, error) {
	org, err := l.orgOrOnly(orgRef)
	if err != nil {
		return nil, err
	}
	m, err := l.member(org, ref)
	if err != nil {
		return nil, err
	}
	m, err = l.app().SetRole(app.Operator(org), m.ID, role)
	if err != nil {
		return nil, asStoreError(err)
	}
	e := userEntry(m, org)
	return &e, nil
}

// ResetUser implements Users.
func (l *Local) ResetUser(_ context.Context, orgRef, ref string) (*AddedUser, error) {
	org, err := l.orgOrOnly(orgRef)
	if err != nil {
		return nil, err
	}
	m, err := l.member(org, ref)
	if err != nil {
		return nil, err
	}
	token, err := l.app().ResetPassword(app.Operator(org), m.ID)
	if err != nil {
		return nil, asStoreError(err)
	}
	return &AddedUser{UserEntry: userEntry(m, org), Token: token, Link: l.link(token)}, nil
}

type userRequest struct {
	Email string `json:"email,omitempty"`
	Role  string `json:"role,omitempty"`
}

func (h *handler) userRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/users", func(w http.ResponseWriter, r *http.Request) {
		us, err := h.svc.ListUsers(r.Context(), r.URL.Query().Get("org"))
		h.answer(w, us, err)
	})
	mux.HandleFunc("POST /v1/users", func(w http.ResponseWriter, r *http.Request) {
		var in userRequest
		if !h.decode(w, r, &in) {
			return
		}
		u, err := h.svc.AddUser(r.Context(), r.URL.Query().Get("org"), in.Email, in.Role)
		h.answer(w, u, err)
	})
	mux.HandleFunc("DELETE /v1/users/{member}", func(w http.ResponseWriter, r *http.Request) {
		u, err := h.svc.RemoveUser(r.Context(), r.URL.Query().Get("org"), r.PathValue("member"))
		h.answer(w, u, err)
	})
	mux.HandleFunc("PUT /v1/users/{member}/role", func(w http.ResponseWriter, r *http.Request) {
		var in userRequest
		if !h.decode(w, r, &in) {
			return
		}
		u, err := h.svc.SetUserRole(r.Context(), r.URL.Query().Get("org"), r.PathValue("member"), in.Role)
		h.answer(w, u, err)
	})
	mux.HandleFunc("POST /v1/users/{member}/reset", func(w http.ResponseWriter, r *http.Request) {
		u, err := h.svc.ResetUser(r.Context(), r.URL.Query().Get("org"), r.PathValue("member"))
		h.answer(w, u, err)
	})
}

// AddUser implements Users.
func (c *Client) AddUser(ctx context.Context, orgRef, email, role string) (*AddedUser, error) {
	var u AddedUser
	return &u, c.do(ctx, "POST", "/v1/users"+orgQuery(orgRef), userRequest{Email: email, Role: role}, &u)
}

// ListUsers implements Users.
func (c *Client) ListUsers(ctx context.Context, orgRef string) ([]*UserEntry, error) {
	var us []*UserEntry
	return us, c.do(ctx, "GET", "/v1/users"+orgQuery(orgRef), nil, &us)
}

// RemoveUser implements Users.
func (c *Client) RemoveUser(ctx context.Context, orgRef, member string) (*UserEntry, error) {
	var u UserEntry
	return &u, c.do(ctx, "DELETE", "/v1/users/"+url.PathEscape(member)+orgQuery(orgRef), nil, &u)
}

// SetUserRole implements Users.
func (c *Client) SetUserRole(ctx context.Context, orgRef, member, role string) (*UserEntry, error) {
	var u UserEntry
	return &u, c.do(ctx, "PUT", "/v1/users/"+url.PathEscape(member)+"/role"+orgQuery(orgRef), userRequest{Role: role}, &u)
}

// ResetUser implements Users.
func (c *Client) ResetUser(ctx context.Context, orgRef, member string) (*AddedUser, error) {
	var u AddedUser
	return &u, c.do(ctx, "POST", "/v1/users/"+url.PathEscape(member)+"/reset"+orgQuery(orgRef), nil, &u)
}
