package admin

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	imapin "github.com/dmarcd/dmarcd/ingest/imap"
	"github.com/dmarcd/dmarcd/store"
)

// Mailboxes is the part of Service that manages an organization's IMAP
// mailboxes (dmarcd mailbox). orgRef is an organization's name or id.
// Errors: store kinds, *imap.InputError (a store.ErrInvalid) for a bad
// field, and "mailbox unreachable: ..." when the login tried before saving
// fails.
type Mailboxes interface {
	AddMailbox(ctx context.Context, orgRef string, spec imapin.Spec) (*store.Mailbox, error)
	ListMailboxes(ctx context.Context, orgRef string) ([]*store.Mailbox, error)
	RemoveMailbox(ctx context.Context, orgRef, id string) error
	PollMailbox(ctx context.Context, orgRef, id string) (imapin.PollResult, error)
}

var (
	_ Mailboxes = (*Local)(nil)
	_ Mailboxes = (*Client)(nil)
)

// errNoMailboxes is what Local answers when built without the mailbox
// service.
var errNoMailboxes = errors.New("admin: no mailbox service")

func (l *Local) mailboxOrg(orgRef string) (string, error) {
	if l.Mailboxes == nil {
		return "", errNoMailboxes
	}
	org, err := l.DB.FindOrganization(orgRef)
	if err != nil {
		return "", err
	}
	return org.ID, nil
}

// AddMailbox checks spec, tries the login, and stores the mailbox.
func (l *Local) AddMailbox(ctx context.Context, orgRef string, spec imapin.Spec) (*store.Mailbox, error) {
	orgID, err := l.mailboxOrg(orgRef)
	if err != nil {
		return nil, err
	}
	return l.Mailboxes.Create(ctx, orgID, spec)
}

// ListMailboxes lists the organization's mailboxes, newest first.
func (l *Local) ListMailboxes(_ context.Context, orgRef string) ([]*store.Mailbox, error) {
	org, err := l.DB.FindOrganization(orgRef)
	if err != nil {
		return nil, err
	}
	boxes, _, err := l.DB.ListMailboxes(org.ID, store.Page{Page: 1, Limit: 1 << 20})
	return boxes, err
}

// RemoveMailbox deletes one of the organization's mailboxes.
func (l *Local) RemoveMailbox(_ context.Context, orgRef, id string) error {
	orgID, err := l.mailboxOrg(orgRef)
	if err != nil {
		return err
	}
	return l.Mailboxes.Delete(orgID, id)
}

// PollMailbox polls one of the organization's mailboxes now.
func (l *Local) PollMailbox(ctx context.Context, orgRef, id string) (imapin.PollResult, error) {
	orgID, err := l.mailboxOrg(orgRef)
	if err != nil {
		return imapin.PollResult{}, err
	}
	return l.Mailboxes.Poll(ctx, orgID, id)
}

// Socket side.

func (h *handler) mailboxRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/orgs/{ref}/mailboxes", func(w http.ResponseWriter, r *http.Request) {
		boxes, err := h.svc.ListMailboxes(r.Context(), r.PathValue("ref"))
		h.answer(w, boxes, err)
	})
	mux.HandleFunc("POST /v1/orgs/{ref}/mailboxes", func(w http.ResponseWriter, r *http.Request) {
		var in imapin.Spec
		if !h.decode(w, r, &in) {
			return
		}
		m, err := h.svc.AddMailbox(r.Context(), r.PathValue("ref"), in)
		if err == nil {
			h.log.Info("mailbox added", "mailbox_id", m.ID, "org_id", m.OrgID, "host", m.Host, "via", "admin socket")
		}
		h.answer(w, m, asStoreError(err))
	})
	mux.HandleFunc("DELETE /v1/orgs/{ref}/mailboxes/{id}", func(w http.ResponseWriter, r *http.Request) {
		err := h.svc.RemoveMailbox(r.Context(), r.PathValue("ref"), r.PathValue("id"))
		h.answer(w, map[string]bool{"ok": true}, err)
	})
	mux.HandleFunc("POST /v1/orgs/{ref}/mailboxes/{id}/poll", func(w http.ResponseWriter, r *http.Request) {
		res, err := h.svc.PollMailbox(r.Context(), r.PathValue("ref"), r.PathValue("id"))
		h.answer(w, res, err)
	})
}

// asStoreError carries the mailbox service's refusals across the socket
// as store.ErrInvalid with their message.
func asStoreError(err error) error {
	var in *imapin.InputError
	var un *imapin.UnreachableError
	switch {
	case errors.As(err, &in), errors.As(err, &un):
		return &store.Error{Kind: store.ErrInvalid, Msg: err.Error()}
	}
	return err
}

// AddMailbox implements Mailboxes.
func (c *Client) AddMailbox(ctx context.Context, orgRef string, spec imapin.Spec) (*store.Mailbox, error) {
	var m store.Mailbox
	return &m, c.do(ctx, "POST", "/v1/orgs/"+url.PathEscape(orgRef)+"/mailboxes", spec, &m)
}

// ListMailboxes implements Mailboxes.
func (c *Client) ListMailboxes(ctx context.Context, orgRef string) ([]*store.Mailbox, error) {
	var boxes []*store.Mailbox
	return boxes, c.do(ctx, "GET", "/v1/orgs/"+url.PathEscape(orgRef)+"/mailboxes", nil, &boxes)
}

// RemoveMailbox implements Mailboxes.
func (c *Client) RemoveMailbox(ctx context.Context, orgRef, id string) error {
	var ok map[string]bool
	return c.do(ctx, "DELETE", "/v1/orgs/"+url.PathEscape(orgRef)+"/mailboxes/"+url.PathEscape(id), nil, &ok)
}

// PollMailbox implements Mailboxes.
func (c *Client) PollMailbox(ctx context.Context, orgRef, id string) (imapin.PollResult, error) {
	var res imapin.PollResult
	return res, c.do(ctx, "POST", "/v1/orgs/"+url.PathEscape(orgRef)+"/mailboxes/"+url.PathEscape(id)+"/poll", nil, &res)
}
