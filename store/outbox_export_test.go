package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// QueueTestAlert creates a through insertAlert (and so queues its webhook
// deliveries) in a transaction of its own, for the external tests of the
// outbox.
func (db *DB) QueueTestAlert(a *Alert) error {
	return db.bolt.Update(func(tx *bolt.Tx) error { return insertAlert(tx, a) })
}

// MarkAlertSent records, in a transaction of its own, that alert alertID
// reached every active webhook at time at (as a delivery that settles it
// does), for the external tests of alert statuses.
func (db *DB) MarkAlertSent(alertID string, at time.Time) error {
	return db.bolt.Update(func(tx *bolt.Tx) error { return markAlertSent(tx, alertID, at) })
}

// OutboxAsVersion1 rewrites every outbox entry as version 1 stored it:
// the whole alert.created body, which body returns for the entry's event
// id, in place of the alert. For the test that such entries still
// deliver.
func OutboxAsVersion1(db *DB, body func(eventID string) []byte) error {
	return db.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketOutbox)
		var keys, vals [][]byte
		err := b.ForEach(func(k, v []byte) error {
			rec, err := decodeOutbox(k, v)
			if err != nil {
				return err
			}
			old := appendOutbox(nil, rec)
			old[0] = outboxVersionBody
			keys = append(keys, bytes.Clone(k))
			vals = append(vals, append(old[:len(old)-len(rec.Alert)], body(rec.EventID)...))
			return nil
		})
		if err != nil {
			return err
		}
		for i, k := range keys {
			if err := b.Put(k, vals[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// WebhookAsStoredBeforeFormats rewrites webhook id as it was stored before
// webhooks had a format: the record without the "format" key. For the test
// that such webhooks still deliver the dmarcd JSON. It fails when the
// record has another format than the default.
func WebhookAsStoredBeforeFormats(db *DB, id string) error {
	return db.bolt.Update(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketWebhooks).Get(idKey(id))
		var rec map[string]json.RawMessage
		if err := json.Unmarshal(raw, &rec); err != nil {
			return err
		}
		if f, ok := rec["format"]; ok {
			return fmt.Errorf("webhook %s is stored with format %s", id, f)
		}
		rec["name"] = json.RawMessage(`"before formats"`)
		out, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		return tx.Bucket(bucketWebhooks).Put(idKey(id), out)
	})
}
