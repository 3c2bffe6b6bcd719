package admin

import (
	"context"
	"net/http"
	"net/url"

	"github.com/dmarcd/dmarcd/store"
)

// RenameOrganization gives the organization orgRef a new name.
func (l *Local) RenameOrganization(ctx context.Context, orgRef, name string) (*store.Organization, error) {
	op, err := l.operator(orgRef)
	if err != nil {
		return nil, err
	}
	return l.app().RenameOrganization(ctx, op, name)
}

// DeleteOrganization deletes the organization orgRef with its domains,
// reports, keys, webhooks and quarantine entries.
func (l *Local) DeleteOrganization(ctx context.Context, orgRef string) (*store.OrganizationDeletion, error) {
	op, err := l.operator(orgRef)
	if err != nil {
		return nil, err
	}
	return l.app().DeleteOrganization(ctx, op)
}

type renameRequest struct {
	Name string `json:"name"`
}

func (h *handler) organizationRoutes(mux *http.ServeMux) {
	mux.HandleFunc("PUT /v1/orgs/{ref}/name", func(w http.ResponseWriter, r *http.Request) {
		var in renameRequest
		if !h.decode(w, r, &in) {
			return
		}
		org, err := h.svc.RenameOrganization(r.Context(), r.PathValue("ref"), in.Name)
		h.answer(w, org, err)
	})
	mux.HandleFunc("DELETE /v1/orgs/{ref}", func(w http.ResponseWriter, r *http.Request) {
		del, err := h.svc.DeleteOrganization(r.Context(), r.PathValue("ref"))
		if err == nil {
			h.log.Info("organization deleted", "org_id", del.Organization.ID, "name", del.Organization.Name,
				"domains", del.Domains, "api_keys", del.Keys, "webhooks", del.Webhooks, "via", "admin socket")
		}
		h.answer(w, del, err)
	})
}

// RenameOrganization implements Service.
func (c *Client) RenameOrganization(ctx context.Context, orgRef, name string) (*store.Organization, error) {
	var org store.Organization
	return &org, c.do(ctx, "PUT", "/v1/orgs/"+url.PathEscape(orgRef)+"/name", renameRequest{Name: name}, &org)
}

// DeleteOrganization implements Service.
func (c *Client) DeleteOrganization(ctx context.Context, orgRef string) (*store.OrganizationDeletion, error) {
	var del store.OrganizationDeletion
	return &del, c.do(ctx, "DELETE", "/v1/orgs/"+url.PathEscape(orgRef), nil, &del)
}
