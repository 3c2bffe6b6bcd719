package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/dmarcd/dmarcd/alert"
	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/internal/egress"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/webhook"
)

// The webhook endpoints (API.md, Webhooks). Every one answers 403
// plan_feature_unavailable, before looking at anything else, when the
// organization's plan has no advanced alerting.

// errNoWebhooks is the 500 of a server built without webhook support.
var errNoWebhooks = errors.New("httpapi: no webhook client or resolver configured")

// webhooksAllowed is the plan check every webhook handler starts with.
func webhooksAllowed(r *request) error {
	if !r.org.Plan.Limits().Webhooks {
		return errPlanFeature("webhooks (advanced alerting); upgrade to business or unlimited")
	}
	return nil
}

func (s *Server) listWebhooks(w http.ResponseWriter, r *request) error {
	if err := webhooksAllowed(r); err != nil {
		return err
	}
	p, err := parsePage(r)
	if err != nil {
		return err
	}
	hooks, total, err := s.store.ListWebhooks(r.org.ID, store.Page{Page: p.Page, Limit: p.Limit})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, listBody{Data: hooks, Pagination: p.of(total)})
	return nil
}

// createdWebhook is the creation answer: the webhook and, this once, its
// secret.
type createdWebhook struct {
	*store.Webhook
	Secret string `json:"secret"`
}

func (s *Server) createWebhook(w http.ResponseWriter, r *request) error {
	if err := webhooksAllowed(r); err != nil {
		return err
	}
	var in struct {
		URL  *string `json:"url"`
		Name *string `json:"name"`
	}
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	if err := s.checkWebhookFields(r.Context(), &in.URL, &in.Name, true); err != nil {
		return err
	}
	secret := webhook.NewSecret()
	hook := &store.Webhook{OrgID: r.org.ID, URL: *in.URL, Name: *in.Name}
	if err := s.store.CreateWebhook(hook, store.WebhookSecret(secret)); err != nil {
		return err
	}
	w.Header().Set("Location", "/api/v1/webhooks/"+hook.ID)
	writeJSON(w, http.StatusCreated, createdWebhook{Webhook: hook, Secret: secret})
	return nil
}

// checkWebhookFields validates the url and name of a request, those sent
// or, when required, both, and leaves them trimmed. Every invalid field is
// named in one 422; a host that could not be resolved for a temporary
// reason is a 503.
func (s *Server) checkWebhookFields(ctx context.Context, url, name **string, required bool) error {
	var details []FieldError
	if *name != nil || required {
		n := ""
		if *name != nil {
			n = **name
		}
		clean, err := store.CleanWebhookName(n)
		if err != nil {
			msg := strings.TrimPrefix(err.Error(), "name ")
			if strings.TrimSpace(n) == "" {
				msg = "is required"
			}
			details = append(details, FieldError{Field: "name", Message: msg})
		}
		*name = &clean
	}
	if *url != nil || required {
		u := ""
		if *url != nil {
			u = strings.TrimSpace(**url)
		}
		*url = &u
		if u == "" {
			details = append(details, FieldError{Field: "url", Message: "is required"})
		} else if err := s.validateWebhookURL(ctx, u); err != nil {
			var ue *egress.URLError
			if !errors.As(err, &ue) || errors.Is(err, dnscheck.ErrTemporary) {
				return err
			}
			details = append(details, FieldError{Field: "url", Message: ue.Reason})
		}
	}
	if len(details) == 0 {
		return nil
	}
	msgs := make([]string, len(details))
	for i, d := range details {
		msgs[i] = "invalid " + d.Field + ": " + d.Message
	}
	return &Error{Status: http.StatusUnprocessableEntity, Code: "validation_failed",
		Message: strings.Join(msgs, "; "), Details: details}
}

// validateWebhookURL applies package egress's rules with the server's
// policy and resolver, within the DNS budget of a request.
func (s *Server) validateWebhookURL(ctx context.Context, u string) error {
	if s.cfg.WebhookResolver == nil {
		return errNoWebhooks
	}
	dnsCtx, cancel := context.WithTimeout(ctx, s.cfg.DNSTimeout)
	defer cancel()
	err := egress.ValidateURL(dnsCtx, u, s.cfg.WebhookResolver, s.cfg.WebhookPolicy)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return fmt.Errorf("httpapi: resolving the webhook host took over %s: %w", s.cfg.DNSTimeout, dnscheck.ErrTemporary)
	}
	return err
}

func (s *Server) getWebhook(w http.ResponseWriter, r *request) error {
	if err := webhooksAllowed(r); err != nil {
		return err
	}
	hook, err := s.store.FindWebhook(r.org.ID, r.params.ByName("id"))
	if err != nil {
		return webhookNotFound(err)
	}
	writeJSON(w, http.StatusOK, hook)
	return nil
}

// webhookNotFound gives another organization's webhook, or a malformed id,
// the same 404 as an unknown one.
func webhookNotFound(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return errNotFound("webhook not found")
	}
	return err
}

func (s *Server) updateWebhook(w http.ResponseWriter, r *request) error {
	if err := webhooksAllowed(r); err != nil {
		return err
	}
	var in struct {
		URL      *string `json:"url"`
		Name     *string `json:"name"`
		IsActive *bool   `json:"is_active"`
	}
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	// The id first: a body for a webhook that is not there is a 404, not a
	// DNS lookup.
	if _, err := s.store.FindWebhook(r.org.ID, r.params.ByName("id")); err != nil {
		return webhookNotFound(err)
	}
	if err := s.checkWebhookFields(r.Context(), &in.URL, &in.Name, false); err != nil {
		return err
	}
	hook, err := s.store.UpdateWebhook(r.org.ID, r.params.ByName("id"),
		store.WebhookUpdate{URL: in.URL, Name: in.Name, IsActive: in.IsActive})
	if err != nil {
		return webhookNotFound(err)
	}
	writeJSON(w, http.StatusOK, hook)
	return nil
}

func (s *Server) deleteWebhook(w http.ResponseWriter, r *request) error {
	if err := webhooksAllowed(r); err != nil {
		return err
	}
	if err := s.store.DeleteWebhook(r.org.ID, r.params.ByName("id")); err != nil {
		return webhookNotFound(err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// testWebhook sends a test event ("test": true, a sample alert) to the
// webhook, whether active or not, and answers with the attempt's result.
// It changes nothing: the webhook's failure count and last delivery stay
// as they are.
func (s *Server) testWebhook(w http.ResponseWriter, r *request) error {
	if err := webhooksAllowed(r); err != nil {
		return err
	}
	res, err := s.TestWebhook(r.Context(), r.org, r.params.ByName("id"))
	if err != nil {
		return webhookNotFound(err)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// sampleAlert is the alert of a test event: shaped like every alert, and
// saying what it is.
func sampleAlert(now time.Time) *store.Alert {
	return &store.Alert{
		ID: store.NewID(), Type: alert.TypeDMARCFailureRate, Severity: alert.SeverityInfo, Status: store.AlertPending,
		Title: "Test alert from dmarcd",
		Message: "A test event sent by POST /api/v1/webhooks/{id}/test to check your receiver. " +
			"It reports nothing; it has the shape of every alert.",
		Details: json.RawMessage(`{}`), CreatedAt: now,
	}
}
