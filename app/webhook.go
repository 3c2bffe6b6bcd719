package app

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dmarcd/dmarcd/alert"
	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/internal/egress"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/webhook"
)

// Webhooks (advanced alerting): every operation needs a plan that
// includes them (ReadWebhooks, WriteWebhooks).

// errNoWebhooks is the Internal error of an App built without webhook
// support.
var errNoWebhooks = errors.New("app: no webhook client or resolver configured")

// WebhookList is one page of an organization's webhooks.
type WebhookList struct {
	Hooks []*store.Webhook
	Total int // webhooks in all
	Max   int // webhooks the plan allows
}

// ListWebhooks returns one page of the actor's organization's webhooks.
func (a *App) ListWebhooks(_ context.Context, actor Actor, p store.Page) (*WebhookList, error) {
	if err := Authorize(actor, ReadWebhooks); err != nil {
		return nil, err
	}
	hooks, total, err := a.db.ListWebhooks(actor.orgID(), p)
	if err != nil {
		return nil, err
	}
	return &WebhookList{Hooks: hooks, Total: total, Max: actor.org.Plan.Limits().MaxWebhooks}, nil
}

// FindWebhook returns webhook id.
func (a *App) FindWebhook(_ context.Context, actor Actor, id string) (*store.Webhook, error) {
	if err := Authorize(actor, ReadWebhooks); err != nil {
		return nil, err
	}
	hook, err := a.db.FindWebhook(actor.orgID(), id)
	return hook, notFound(err, "webhook")
}

// CreateWebhook validates url, name and format and creates the webhook,
// returning it with its signing secret, which is shown this once. format
// is one of webhook.Formats; "" is webhook.FormatDMARCD. Errors: Invalid
// naming every bad field, DNSUnavailable when the host could not be
// resolved for now, PlanLimit.
func (a *App) CreateWebhook(ctx context.Context, actor Actor, url, name, format string) (*store.Webhook, string, error) {
	if err := Authorize(actor, WriteWebhooks); err != nil {
		return nil, "", err
	}
	u, n := &url, &name
	f := cmp.Or(strings.TrimSpace(format), webhook.FormatDMARCD)
	if err := a.checkWebhookFields(ctx, &u, &n, &f, true); err != nil {
		return nil, "", err
	}
	secret := webhook.NewSecret()
	hook := &store.Webhook{OrgID: actor.orgID(), URL: *u, Name: *n, Format: f}
	if err := a.db.CreateWebhook(hook, store.WebhookSecret(secret)); err != nil {
		return nil, "", err
	}
	return hook, secret, nil
}

// WebhookUpdate is what UpdateWebhook changes; nil fields stay.
type WebhookUpdate struct {
	URL, Name *string
	Format    *string // one of webhook.Formats
	IsActive  *bool
}

// UpdateWebhook changes the fields of webhook id that u gives, validated
// as CreateWebhook's. NotFound comes before any field is checked.
func (a *App) UpdateWebhook(ctx context.Context, actor Actor, id string, u WebhookUpdate) (*store.Webhook, error) {
	if err := Authorize(actor, WriteWebhooks); err != nil {
		return nil, err
	}
	// The id first: a body for a webhook that is not there is a 404, not
	// a DNS lookup.
	if _, err := a.db.FindWebhook(actor.orgID(), id); err != nil {
		return nil, notFound(err, "webhook")
	}
	if u.Format != nil {
		f := strings.TrimSpace(*u.Format)
		u.Format = &f
	}
	if err := a.checkWebhookFields(ctx, &u.URL, &u.Name, u.Format, false); err != nil {
		return nil, err
	}
	hook, err := a.db.UpdateWebhook(actor.orgID(), id, store.WebhookUpdate{URL: u.URL, Name: u.Name, Format: u.Format, IsActive: u.IsActive})
	return hook, notFound(err, "webhook")
}

// DeleteWebhook deletes webhook id with its pending deliveries.
func (a *App) DeleteWebhook(_ context.Context, actor Actor, id string) error {
	if err := Authorize(actor, WriteWebhooks); err != nil {
		return err
	}
	return notFound(a.db.DeleteWebhook(actor.orgID(), id), "webhook")
}

// TestWebhook sends a test event ("test": true, a sample alert) to webhook
// id, active or not, in the webhook's format, and returns the attempt's
// result. It changes nothing: the webhook's failure count and last
// delivery stay.
func (a *App) TestWebhook(ctx context.Context, actor Actor, id string) (webhook.Result, error) {
	if err := Authorize(actor, WriteWebhooks); err != nil {
		return webhook.Result{}, err
	}
	hook, secret, err := a.db.FindWebhookSecret(actor.orgID(), id)
	if err != nil {
		return webhook.Result{}, notFound(err, "webhook")
	}
	if a.cfg.WebhookClient == nil {
		return webhook.Result{}, errNoWebhooks
	}
	now := a.now()
	ev, err := webhook.NewAlertEvent(store.NewEventID(), actor.orgID(), sampleAlert(now), now, true)
	if err != nil {
		return webhook.Result{}, err
	}
	body, err := webhook.Body(hook.Format, ev, webhook.ChatContext{Domain: sampleDomain, PublicURL: a.cfg.PublicURL})
	if err != nil {
		return webhook.Result{}, err
	}
	return a.cfg.WebhookClient.DeliverBody(ctx, hook.URL, string(secret), ev.ID, body, a.clock()), nil
}

// sampleDomain is the domain a test event's chat message names.
const sampleDomain = "example.com"

// sampleAlert is the alert of a test event: shaped like every alert, and
// saying what it is. Its details are those of a dmarc_failure_rate alert
// (documentation addresses and names), so that a chat message shows what
// its evidence lines look like.
func sampleAlert(now time.Time) *store.Alert {
	return &store.Alert{
		ID: store.NewID(), Type: alert.TypeDMARCFailureRate, Severity: alert.SeverityInfo, Status: store.AlertPending,
		Title: "Test alert from dmarcd",
		Message: "A test event sent by POST /api/v1/webhooks/{id}/test to check your receiver. " +
			"It reports nothing; it has the shape of every alert.",
		Details:   sampleDetails(now),
		CreatedAt: now,
	}
}

// sampleDetails are the details of the test event's alert.
func sampleDetails(now time.Time) json.RawMessage {
	day := now.UTC().Truncate(24 * time.Hour)
	b, _ := json.Marshal(map[string]any{
		"report_id": store.NewID(), "reporter": "reporter.example", "reporter_email": "dmarc-noreply@reporter.example",
		"external_report_id": "sample-1", "date_begin": day.Add(-24 * time.Hour).Format(time.RFC3339),
		"date_end": day.Add(-time.Second).Format(time.RFC3339),
		"messages": 120, "dmarc_pass": 90, "dmarc_fail": 30, "failure_rate": 0.25,
		"top_failing_sources": []map[string]any{{"source_ip": "192.0.2.10", "messages": 30, "dmarc_fail": 30,
			"country_code": nil, "asn": 64496, "as_org": "Example Net"}},
	})
	return b
}

// checkWebhookFields validates a url and a name, those given or, when
// required, both, and leaves them trimmed, and a format when given. Every
// invalid field is named in one Invalid error; a host that could not be
// resolved for a temporary reason is DNSUnavailable.
func (a *App) checkWebhookFields(ctx context.Context, url, name **string, format *string, required bool) error {
	var fields []FieldError
	if format != nil && !webhook.ValidFormat(*format) {
		fields = append(fields, FieldError{Field: "format", Message: "must be one of " + strings.Join(webhook.Formats(), ", ")})
	}
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
			fields = append(fields, FieldError{Field: "name", Message: msg})
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
			fields = append(fields, FieldError{Field: "url", Message: "is required"})
		} else if err := a.validateWebhookURL(ctx, u); err != nil {
			ue, ok := errors.AsType[*egress.URLError](err)
			if !ok || errors.Is(err, dnscheck.ErrTemporary) {
				return err
			}
			fields = append(fields, FieldError{Field: "url", Message: ue.Reason})
		}
	}
	if len(fields) == 0 {
		return nil
	}
	return invalid(nil, fields...)
}

// validateWebhookURL applies package egress's rules with the server's
// policy and resolver, within the DNS budget of an operation.
func (a *App) validateWebhookURL(ctx context.Context, u string) error {
	if a.cfg.WebhookResolver == nil {
		return errNoWebhooks
	}
	dctx, cancel := a.dnsContext(ctx)
	defer cancel()
	err := egress.ValidateURL(dctx, u, a.cfg.WebhookResolver, a.cfg.WebhookPolicy)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return fmt.Errorf("app: resolving the webhook host took over %s: %w", a.cfg.DNSTimeout, dnscheck.ErrTemporary)
	}
	return err
}
