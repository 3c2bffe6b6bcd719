package store

import (
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// enqueueAlertDeliveries puts the alert.created event of a into the outbox,
// one entry per active webhook of a's organization, due at once: the alert
// as created, and one event id that every attempt to every webhook
// carries (package webhook builds the body at each attempt). It does nothing when the organization's plan has no webhooks
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
	eventID := NewEventID()
	for _, w := range hooks {
		rec := &outboxRecord{
			ID: NewID(), WebhookID: w.ID, OrgID: a.OrgID, AlertID: a.ID, EventID: eventID,
			Alert: alert, Attempt: 1, Due: now, CreatedAt: now,
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
