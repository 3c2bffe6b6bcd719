package httpapi

import (
	"net/http"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/store"
)

// The webhook endpoints (API.md, Webhooks). Their routes need the plan
// feature (readHooks, writeHooks), so an organization without webhooks
// hears 403 plan_feature_unavailable before anything else is looked at.

func (s *Server) listWebhooks(w http.ResponseWriter, r *request) error {
	p, err := parsePage(r)
	if err != nil {
		return err
	}
	l, err := s.app.ListWebhooks(r.Context(), r.actor, store.Page{Page: p.Page, Limit: p.Limit})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, listBody{Data: l.Hooks, Pagination: p.of(l.Total)})
	return nil
}

// createdWebhook is the creation answer: the webhook and, this once, its
// secret.
type createdWebhook struct {
	*store.Webhook
	Secret string `json:"secret"`
}

func (s *Server) createWebhook(w http.ResponseWriter, r *request) error {
	var in struct {
		URL    *string `json:"url"`
		Name   *string `json:"name"`
		Format *string `json:"format"`
	}
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	hook, secret, err := s.app.CreateWebhook(r.Context(), r.actor, deref(in.URL), deref(in.Name), deref(in.Format))
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/v1/webhooks/"+hook.ID)
	writeJSON(w, http.StatusCreated, createdWebhook{Webhook: hook, Secret: secret})
	return nil
}

func (s *Server) getWebhook(w http.ResponseWriter, r *request) error {
	hook, err := s.app.FindWebhook(r.Context(), r.actor, r.params.ByName("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, hook)
	return nil
}

func (s *Server) updateWebhook(w http.ResponseWriter, r *request) error {
	var in struct {
		URL      *string `json:"url"`
		Name     *string `json:"name"`
		Format   *string `json:"format"`
		IsActive *bool   `json:"is_active"`
	}
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	hook, err := s.app.UpdateWebhook(r.Context(), r.actor, r.params.ByName("id"),
		app.WebhookUpdate{URL: in.URL, Name: in.Name, Format: in.Format, IsActive: in.IsActive})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, hook)
	return nil
}

func (s *Server) deleteWebhook(w http.ResponseWriter, r *request) error {
	if err := s.app.DeleteWebhook(r.Context(), r.actor, r.params.ByName("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// testWebhook sends a test event to the webhook, whether active or not,
// and answers with the attempt's result; it changes nothing.
func (s *Server) testWebhook(w http.ResponseWriter, r *request) error {
	res, err := s.app.TestWebhook(r.Context(), r.actor, r.params.ByName("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}
