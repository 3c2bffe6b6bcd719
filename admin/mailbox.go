package admin

import (
	"context"
	"net/http"
	"net/url"

	"github.com/dmarcd/dmarcd/app"
	imapin "github.com/dmarcd/dmarcd/ingest/imap"
	"github.com/dmarcd/dmarcd/store"
)

// Mailboxes is the part of Service that manages an organization's IMAP
// mailboxes (dmarcd mailbox). orgRef is an organization's name or id.
// Errors: store kinds, store.ErrInvalid for a bad field (its message
// "invalid F: ...") and for a login tried before saving that failed
// ("mailbox unreachable: ...").
type Mailboxes interface {
	AddMailbox(ctx context.Context, orgRef string, spec app.MailboxSpec) (*store.Mailbox, error)
	ListMailboxes(ctx context.Context, orgRef string) ([]*store.Mailbox, error)
	RemoveMailbox(ctx context.Context, orgRef, id string) error
	PollMailbox(ctx context.Context, orgRef, id string) (imapin.PollResult, error)
}

var (
	_ Mailboxes = (*Local)(nil)
	_ Mailboxes = (*Client)(nil)
)

// AddMailbox checks spec, tries the login, and stores the mailbox.
func (l *Local) AddMailbox(ctx context.Context, orgRef string, spec app.MailboxSpec) (*store.Mailbox, error) {
	op, err := l.operator(orgRef)
	if err != nil {
		return nil, err
	}
	m, err := l.app().CreateMailbox(ctx, op, spec)
	return m, asStoreError(err)
}

// ListMailboxes lists the organization's mailboxes, newest first.
func (l *Local) ListMailboxes(ctx context.Context, orgRef string) ([]*store.Mailbox, error) {
	op, err := l.operator(orgRef)
	if err != nil {
		return nil, err
	}
	boxes, _, err := l.app().ListMailboxes(ctx, op, store.Page{Page: 1, Limit: 1 << 20})
	return boxes, err
}

// RemoveMailbox deletes one of the organization's mailboxes.
func (l *Local) RemoveMailbox(ctx context.Context, orgRef, id string) error {
	op, err := l.operator(orgRef)
	if err != nil {
		return err
	}
	return asStoreError(l.app().DeleteMailbox(ctx, op, id))
}

// PollMailbox polls one of the organization's mailboxes now.
func (l *Local) PollMailbox(ctx context.Context, orgRef, id string) (imapin.PollResult, error) {
	op, err := l.operator(orgRef)
	if err != nil {
		return imapin.PollResult{}, err
	}
	res, err := l.app().PollMailbox(ctx, op, id)
	return res, asStoreError(err)
}

// Socket side.

func (h *handler) mailboxRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/orgs/{ref}/mailboxes", func(w http.ResponseWriter, r *http.Request) {
		boxes, err := h.svc.ListMailboxes(r.Context(), r.PathValue("ref"))
		h.answer(w, boxes, err)
	})
	mux.HandleFunc("POST /v1/orgs/{ref}/mailboxes", func(w http.ResponseWriter, r *http.Request) {
		var in app.MailboxSpec
		if !h.decode(w, r, &in) {
			return
		}
		m, err := h.svc.AddMailbox(r.Context(), r.PathValue("ref"), in)
		if err == nil {
			h.log.Info("mailbox added", "mailbox_id", m.ID, "org_id", m.OrgID, "host", m.Host, "via", "admin socket")
		}
		h.answer(w, m, err)
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

// AddMailbox implements Mailboxes.
func (c *Client) AddMailbox(ctx context.Context, orgRef string, spec app.MailboxSpec) (*store.Mailbox, error) {
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
