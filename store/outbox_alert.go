package store

import (
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// enqueueAlertDeliveries puts the alert.created event of a into the outbox,
// one entry per active webhook of a's organization, due at once. The body
// is built once, with one event id that every attempt to every webhook
// carries. It does nothing when the organization's plan has no webhooks
// or it has no active webhook: the alert then stays pending.
func enqueueAlertDeliveries(tx *bolt.Tx, a *Alert, now time.Time) error {
	org, err := getOrg(tx, a.OrgID)
	if err != nil {
		return err
	}
	if !org.Plan.Limits().Webhooks {
		return nil
	}
	hooks, err := activeWebhooks(tx, a.OrgID)
	if err != nil || len(hooks) == 0 {
		return err
	}
	alert, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("encode alert %s: %w", a.ID, err)
	}
	body, eventID, err := alertEventBody(a.OrgID, alert, now)
	if err != nil {
		return err
	}
	for _, w := range hooks {
		rec := &outboxRecord{
			ID: NewID(), WebhookID: w.ID, OrgID: a.OrgID, AlertID: a.ID, EventID: eventID,
			Body: body, Attempt: 1, Due: now, CreatedAt: now,
		}
		if err := putOutbox(tx, rec); err != nil {
			return err
		}
		if err := tx.Bucket(bucketOutboxAlerts).Put(outboxAlertKey(a.ID, w.ID), []byte{alertDeliveryPending}); err != nil {
			return err
		}
	}
	return nil
}

// alertEvent is the body of an alert.created delivery (API.md, Delivery).
// Package webhook defines the same envelope (webhook.Event); the store
// builds it itself so that it needs no package above it.
type alertEvent struct {
	ID             string    `json:"id"`
	Type           string    `json:"type"`
	CreatedAt      string    `json:"created_at"`
	Test           bool      `json:"test"`
	OrganizationID string    `json:"organization_id"`
	Data           alertData `json:"data"`
}

type alertData struct {
	Alert json.RawMessage `json:"alert"`
}

// alertEventBody encodes the alert.created event of alert (already JSON)
// with a new event id, and returns the body and the id.
func alertEventBody(orgID string, alert []byte, now time.Time) ([]byte, string, error) {
	id := "evt_" + NewID()
	body, err := json.Marshal(alertEvent{
		ID: id, Type: "alert.created", CreatedAt: now.UTC().Format(time.RFC3339),
		OrganizationID: orgID, Data: alertData{Alert: alert},
	})
	if err != nil {
		return nil, "", fmt.Errorf("encode alert event: %w", err)
	}
	return body, id, nil
}
