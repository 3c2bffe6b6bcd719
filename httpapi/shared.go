package httpapi

import (
	"context"
	"encoding/csv"
	"io"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/webhook"
)

// The operations the web interface shares with the API, so that a rule
// (webhook URL policy, the CSV format) lives once.

// WriteReportCSV writes report id of organization orgID as the API's CSV
// export writes it: the same header, rows and formula defusing. The
// caller checks that the report exists first (ErrNotFound otherwise).
func WriteReportCSV(w io.Writer, db *store.DB, orgID, id string) error {
	cw := csv.NewWriter(w)
	cw.UseCRLF = true
	var row csvRow
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	err := db.ReportRecords(orgID, id, func(rec *store.Record) error { return cw.Write(row.fill(rec)) })
	if err != nil {
		return err
	}
	cw.Flush()
	return cw.Error()
}

// CreateWebhook validates url and name as POST /webhooks does and creates
// the webhook of organization org, returning it with its secret (shown
// once). Invalid fields are an *Error with status 422 and Details naming
// them; plan rules come from the store (ErrLimit) and the plan check.
func (s *Server) CreateWebhook(ctx context.Context, org *store.Organization, url, name string) (*store.Webhook, string, error) {
	if !org.Plan.Limits().Webhooks {
		return nil, "", errPlanFeature("webhooks (advanced alerting); upgrade to business or unlimited")
	}
	u, n := &url, &name
	if err := s.checkWebhookFields(ctx, &u, &n, true); err != nil {
		return nil, "", err
	}
	secret := webhook.NewSecret()
	hook := &store.Webhook{OrgID: org.ID, URL: *u, Name: *n}
	if err := s.store.CreateWebhook(hook, store.WebhookSecret(secret)); err != nil {
		return nil, "", err
	}
	return hook, secret, nil
}

// UpdateWebhook changes the fields given, validated as PUT /webhooks/{id}
// does.
func (s *Server) UpdateWebhook(ctx context.Context, org *store.Organization, id string, url, name *string, active *bool) (*store.Webhook, error) {
	if !org.Plan.Limits().Webhooks {
		return nil, errPlanFeature("webhooks (advanced alerting); upgrade to business or unlimited")
	}
	if _, err := s.store.FindWebhook(org.ID, id); err != nil {
		return nil, err
	}
	if err := s.checkWebhookFields(ctx, &url, &name, false); err != nil {
		return nil, err
	}
	return s.store.UpdateWebhook(org.ID, id, store.WebhookUpdate{URL: url, Name: name, IsActive: active})
}

// CreateDomain registers domain name (as typed: it is validated and
// normalized as POST /domains does) for org, with the same rules and
// errors as the API; the web interface's "add a domain" calls it.
func (s *Server) CreateDomain(ctx context.Context, org *store.Organization, name string) (*store.Domain, error) {
	d, _, err := s.AddDomain(ctx, org, name)
	return d, err
}

// TestWebhook sends the test event to webhook id as POST
// /webhooks/{id}/test does, changing nothing stored.
func (s *Server) TestWebhook(ctx context.Context, org *store.Organization, id string) (webhook.Result, error) {
	hook, secret, err := s.store.FindWebhookSecret(org.ID, id)
	if err != nil {
		return webhook.Result{}, err
	}
	if s.cfg.WebhookClient == nil {
		return webhook.Result{}, errNoWebhooks
	}
	now := s.now()
	ev, err := webhook.NewAlertEvent(store.NewEventID(), org.ID, sampleAlert(now), now, true)
	if err != nil {
		return webhook.Result{}, err
	}
	res, _, err := s.cfg.WebhookClient.Deliver(ctx, hook.URL, string(secret), ev, s.cfg.Now())
	return res, err
}

// ErrorMessage is the message the API would answer err with; for an
// invalid request (4xx), what a person should read.
func ErrorMessage(err error) (status int, msg string) {
	e := apiError(err)
	return e.Status, e.Message
}
