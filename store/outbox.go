package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The webhook outbox. Every alert.created event waits here, one entry per
// active webhook of the organization, until it is delivered, given up or
// dropped. Entries are keyed by due time, so the delivery job reads what is
// due with one range scan, and everything about a delivery (the event id,
// the alert as it was created, the attempt it is at) is in the file: a
// restart between two attempts loses nothing. The body is not stored:
// package webhook builds it from these at each attempt, the same bytes
// every time.
//
// Two indexes keep the outbox consistent with the webhooks and alerts:
// bucketOutboxByWebhook finds the entries of a webhook that is deleted or
// disabled, and bucketOutboxAlerts tracks, per alert, what became of its
// delivery to each webhook, so that the alert turns sent once it has
// reached every webhook that is still active.

// outboxRecord is one pending delivery. It is stored in binary
// (appendOutbox) so that the delivery job can skip entries by webhook
// without decoding them.
type outboxRecord struct {
	ID        string // from the key
	WebhookID string
	OrgID     string
	AlertID   string
	EventID   string
	Attempt   int // the number of the next attempt, from 1
	Due       time.Time
	CreatedAt time.Time // when the event was created: its created_at
	Alert     []byte    // the alert object as JSON, as it was created
}

// Versions of a stored entry, its first byte. Entries of version 1 carry
// the whole alert.created body where version 2 carries the alert: they
// are read (decodeOutbox takes the alert out of the body) and written
// back as version 2 at their next retry, so no migration is needed.
const (
	outboxVersionBody = 1
	outboxVersion     = 2
)

// appendOutbox encodes rec: version, webhook, organization and alert ids
// (36 bytes each), event id (uvarint length, bytes), attempt (uvarint),
// due and created (big-endian Unix nanoseconds), then the alert JSON.
func appendOutbox(b []byte, rec *outboxRecord) []byte {
	b = append(b, outboxVersion)
	b = append(append(append(b, rec.WebhookID...), rec.OrgID...), rec.AlertID...)
	b = binary.AppendUvarint(b, uint64(len(rec.EventID)))
	b = append(b, rec.EventID...)
	b = binary.AppendUvarint(b, uint64(rec.Attempt))
	b = binary.BigEndian.AppendUint64(b, timeKey(rec.Due))
	b = binary.BigEndian.AppendUint64(b, timeKey(rec.CreatedAt))
	return append(b, rec.Alert...)
}

// outboxWebhookID reads the webhook id of a stored entry without decoding
// the rest.
func outboxWebhookID(raw []byte) string {
	if len(raw) < 1+idLen || raw[0] != outboxVersion && raw[0] != outboxVersionBody {
		return ""
	}
	return string(raw[1 : 1+idLen])
}

// decodeOutbox decodes the entry stored under key, of either version; its
// alert is copied.
func decodeOutbox(key, raw []byte) (*outboxRecord, error) {
	bad := fmt.Errorf("malformed outbox entry %x", key)
	if len(key) != 8+idLen || len(raw) < 1+3*idLen || raw[0] != outboxVersion && raw[0] != outboxVersionBody {
		return nil, bad
	}
	rec := &outboxRecord{
		ID: string(key[8:]), WebhookID: string(raw[1 : 1+idLen]),
		OrgID: string(raw[1+idLen : 1+2*idLen]), AlertID: string(raw[1+2*idLen : 1+3*idLen]),
	}
	rest := raw[1+3*idLen:]
	n, w := binary.Uvarint(rest)
	if w <= 0 || uint64(len(rest)-w) < n {
		return nil, bad
	}
	rec.EventID, rest = string(rest[w:w+int(n)]), rest[w+int(n):]
	attempt, w := binary.Uvarint(rest)
	if w <= 0 || attempt == 0 || attempt > 1<<20 || len(rest)-w < 16 {
		return nil, bad
	}
	rec.Attempt, rest = int(attempt), rest[w:]
	rec.Due = time.Unix(0, int64(binary.BigEndian.Uint64(rest))).UTC()
	rec.CreatedAt = time.Unix(0, int64(binary.BigEndian.Uint64(rest[8:]))).UTC()
	rec.Alert = bytes.Clone(rest[16:])
	if raw[0] == outboxVersionBody {
		var body struct {
			Data struct {
				Alert json.RawMessage `json:"alert"`
			} `json:"data"`
		}
		if json.Unmarshal(rec.Alert, &body) != nil || len(body.Data.Alert) == 0 {
			return nil, bad
		}
		// Its created_at is rec.CreatedAt: both were the enqueue time.
		rec.Alert = body.Data.Alert
	}
	return rec, nil
}

// States of an alert's delivery to one webhook, in bucketOutboxAlerts. A
// delivery dropped because its webhook went away has no row.
const (
	alertDeliveryPending   = 'p'
	alertDeliveryDone      = 'd'
	alertDeliveryAbandoned = 'g'
)

// outboxKey is due (big-endian Unix nanoseconds) | entry id.
func outboxKey(due time.Time, id string) []byte {
	k := make([]byte, 0, 8+idLen)
	k = binary.BigEndian.AppendUint64(k, timeKey(due))
	return append(k, id...)
}

// outboxWebhookKey is webhook id | entry id.
func outboxWebhookKey(webhookID, entryID string) []byte {
	return append([]byte(webhookID), entryID...)
}

// outboxAlertKey is alert id | webhook id.
func outboxAlertKey(alertID, webhookID string) []byte {
	return append([]byte(alertID), webhookID...)
}

// OutboxEntry is an outbox entry due for an attempt, with what the attempt
// needs: what its alert.created event is made of (package webhook builds
// the body from EventID, OrgID, Alert and CreatedAt, the same bytes on
// every attempt), and the webhook's current URL and secret.
type OutboxEntry struct {
	ID        string // the outbox entry
	WebhookID string
	OrgID     string
	AlertID   string
	EventID   string          // NewEventID's, the X-Webhook-Id of every attempt
	Alert     json.RawMessage // the alert object as it was created
	CreatedAt time.Time       // when the event was created
	Attempt   int             // the number of this attempt, from 1
	Due       time.Time
	URL       string        // "" when the webhook is gone or inactive: drop the entry
	Secret    WebhookSecret // "" when URL is ""
	// Format is the webhook's delivery format now (WebhookFormatDMARCD
	// when URL is ""): the entry is rendered in it at each attempt.
	Format string
	// Domain is the name of the alert's domain for a chat format ("" for
	// WebhookFormatDMARCD, an alert of no domain or a deleted domain).
	Domain string

	key []byte
}

// putOutbox writes an entry under its due time, with its webhook index
// entry (value: the outbox key, then the alert id).
func putOutbox(tx *bolt.Tx, rec *outboxRecord) error {
	key := outboxKey(rec.Due, rec.ID)
	if err := tx.Bucket(bucketOutbox).Put(key, appendOutbox(nil, rec)); err != nil {
		return err
	}
	return tx.Bucket(bucketOutboxByWebhook).Put(outboxWebhookKey(rec.WebhookID, rec.ID), append(key, rec.AlertID...))
}

// deleteOutbox removes an entry and its webhook index entry.
func deleteOutbox(tx *bolt.Tx, key []byte, rec *outboxRecord) error {
	if err := tx.Bucket(bucketOutbox).Delete(key); err != nil {
		return err
	}
	return tx.Bucket(bucketOutboxByWebhook).Delete(outboxWebhookKey(rec.WebhookID, rec.ID))
}

// DueDeliveries returns up to max outbox entries due at now, earliest
// first, leaving out those skip reports true for. skip (which may be nil)
// is called in order with only the ID and WebhookID of each entry set, and
// every entry it keeps is returned until there are max: the delivery job
// uses it to leave out deliveries in flight and to count per webhook. An
// entry whose webhook is gone or inactive comes back with an empty URL.
// The error is a failure to read the database.
func (db *DB) DueDeliveries(now time.Time, max int, skip func(*OutboxEntry) bool) ([]*OutboxEntry, error) {
	var out []*OutboxEntry
	end := binary.BigEndian.AppendUint64(nil, timeKey(now)+1)
	err := db.bolt.View(func(tx *bolt.Tx) error {
		hooks := map[string]*webhookRecord{}
		domains := map[string]string{}
		c := tx.Bucket(bucketOutbox).Cursor()
		for k, raw := c.First(); k != nil && bytes.Compare(k, end) < 0 && len(out) < max; k, raw = c.Next() {
			if skip != nil && len(k) == 8+idLen && skip(&OutboxEntry{ID: string(k[8:]), WebhookID: outboxWebhookID(raw)}) {
				continue
			}
			rec, err := decodeOutbox(k, raw)
			if err != nil {
				return err
			}
			d := &OutboxEntry{
				ID: rec.ID, WebhookID: rec.WebhookID, OrgID: rec.OrgID, AlertID: rec.AlertID,
				EventID: rec.EventID, Alert: rec.Alert, CreatedAt: rec.CreatedAt, Attempt: rec.Attempt, Due: rec.Due,
				key: bytes.Clone(k),
			}
			w, seen := hooks[rec.WebhookID]
			if !seen {
				if w, err = getWebhook(tx, rec.WebhookID); err != nil && !errors.Is(err, ErrNotFound) {
					return err
				}
				hooks[rec.WebhookID] = w
			}
			d.Format = WebhookFormatDMARCD
			if w != nil && w.IsActive {
				d.URL, d.Secret, d.Format = w.URL, WebhookSecret(w.Secret), w.format()
			}
			if d.Format != WebhookFormatDMARCD {
				if d.Domain, err = alertDomainName(tx, rec, domains); err != nil {
					return err
				}
			}
			out = append(out, d)
		}
		return nil
	})
	if err != nil {
		return nil, wrap("due deliveries", err)
	}
	return out, nil
}

// alertDomainName returns the name of the domain of an entry's alert,
// "" when it has none or the domain is gone, remembering names in seen.
func alertDomainName(tx *bolt.Tx, rec *outboxRecord, seen map[string]string) (string, error) {
	var a struct {
		DomainID *string `json:"domain_id"`
	}
	if json.Unmarshal(rec.Alert, &a) != nil || a.DomainID == nil {
		return "", nil // a malformed alert fails later, where its body is built
	}
	if name, ok := seen[*a.DomainID]; ok {
		return name, nil
	}
	d, err := getOrgDomain(tx, rec.OrgID, *a.DomainID)
	switch {
	case errors.Is(err, ErrNotFound):
		seen[*a.DomainID] = ""
		return "", nil
	case err != nil:
		return "", err
	}
	seen[*a.DomainID] = d.Name
	return d.Name, nil
}

// OutboxDepth returns the number of deliveries waiting in the outbox.
func (db *DB) OutboxDepth() (int, error) {
	var n int
	err := db.bolt.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucketOutbox).Stats().KeyN
		return nil
	})
	return n, wrap("outbox depth", err)
}

// DeliveryResult is the outcome of one attempt at an OutboxEntry, for
// FinishDeliveries. Drop, instead, removes an entry not attempted because
// its webhook is gone or inactive.
type DeliveryResult struct {
	Entry      *OutboxEntry
	Success    bool
	StatusCode *int      // nil when no HTTP answer came
	At         time.Time // when the attempt ended
	Drop       bool
}

// What FinishDeliveries did with a result (DeliveryOutcome.Outcome).
const (
	// DeliverySucceeded: delivered; the entry is gone.
	DeliverySucceeded = "success"
	// DeliveryRetrying: failed; the entry waits for its next attempt.
	DeliveryRetrying = "failure"
	// DeliveryGivenUp: the last attempt failed; the entry is gone.
	DeliveryGivenUp = "given_up"
	// DeliveryDisabled: failed, and the failure disabled the webhook, whose
	// entries are all gone.
	DeliveryDisabled = "disabled"
	// DeliveryDropped: the webhook was deleted or deactivated meanwhile;
	// the entry is gone and nothing else changed.
	DeliveryDropped = "dropped"
)

// DeliveryOutcome says what FinishDeliveries made of one DeliveryResult.
type DeliveryOutcome struct {
	Outcome string    // one of the Delivery* constants
	NextDue time.Time // for DeliveryRetrying: when the next attempt is due
	// ConsecutiveFailures is the webhook's count after this result (not
	// set for DeliveryDropped).
	ConsecutiveFailures int
	// AlertSent is set when this success completed the alert's delivery
	// to every webhook still active, which marked the alert sent.
	AlertSent bool
}

// FinishDeliveries records the results of attempts, in one transaction,
// and returns what became of each, in order. A success removes the entry,
// resets the webhook's consecutive failures and sets its last delivery
// time and status code. A failure counts toward the webhook's consecutive
// failures (MaxWebhookFailures disable it, dropping all its entries), sets
// the same two fields, and reschedules the entry retryDelays[n-1] after
// attempt n, or removes it when attempt n was the last
// (len(retryDelays)+1 attempts in all). An alert whose deliveries are all
// settled, at least one delivered and none given up for a webhook that is
// still active, is marked sent. The error is a failure to write the
// database, and then nothing of results was recorded.
func (db *DB) FinishDeliveries(results []DeliveryResult, retryDelays []time.Duration) ([]DeliveryOutcome, error) {
	outs := make([]DeliveryOutcome, len(results))
	now := db.now()
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		for i, r := range results {
			out, err := finishDelivery(tx, r, retryDelays, now)
			if err != nil {
				return err
			}
			outs[i] = out
		}
		return nil
	})
	if err != nil {
		return nil, wrap("finish deliveries", err)
	}
	return outs, nil
}

// finishDelivery applies one result; now stamps an alert it completes.
func finishDelivery(tx *bolt.Tx, r DeliveryResult, delays []time.Duration, now time.Time) (DeliveryOutcome, error) {
	dropped := DeliveryOutcome{Outcome: DeliveryDropped}
	d := r.Entry
	raw := tx.Bucket(bucketOutbox).Get(d.key)
	if raw == nil { // dropped while the attempt was in flight
		return dropped, nil
	}
	rec, err := decodeOutbox(d.key, raw)
	if err != nil {
		return dropped, err
	}
	w, err := getWebhook(tx, rec.WebhookID)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return dropped, err
	}
	if r.Drop || w == nil || !w.IsActive {
		_, err := removeEntry(tx, d.key, rec, 0, now)
		return dropped, err
	}
	at := r.At.UTC().Truncate(time.Second)
	w.LastDeliveryAt, w.LastStatusCode = &at, r.StatusCode
	if r.Success {
		w.ConsecutiveFailures = 0
		if err := putWebhook(tx, w); err != nil {
			return dropped, err
		}
		sent, err := removeEntry(tx, d.key, rec, alertDeliveryDone, at)
		return DeliveryOutcome{Outcome: DeliverySucceeded, AlertSent: sent}, err
	}
	w.ConsecutiveFailures++
	out := DeliveryOutcome{ConsecutiveFailures: w.ConsecutiveFailures}
	disable := w.ConsecutiveFailures >= MaxWebhookFailures
	if disable {
		reason := DisabledConsecutiveFailures
		w.IsActive, w.DisabledReason = false, &reason
	}
	// The webhook is stored first: settling an alert reads whether it is
	// still active.
	if err := putWebhook(tx, w); err != nil {
		return dropped, err
	}
	switch {
	case disable:
		out.Outcome = DeliveryDisabled
		err = dropWebhookDeliveries(tx, w.ID, now)
	case rec.Attempt > len(delays):
		out.Outcome = DeliveryGivenUp
		_, err = removeEntry(tx, d.key, rec, alertDeliveryAbandoned, now)
	default:
		out.Outcome, out.NextDue = DeliveryRetrying, at.Add(delays[rec.Attempt-1])
		if err = deleteOutbox(tx, d.key, rec); err == nil {
			rec.Attempt++
			rec.Due = out.NextDue
			err = putOutbox(tx, rec)
		}
	}
	return out, err
}

// removeEntry deletes an entry and records what became of its alert's
// delivery to that webhook (0: dropped), and reports whether that marked
// the alert sent (see settleAlert).
func removeEntry(tx *bolt.Tx, key []byte, rec *outboxRecord, state byte, at time.Time) (bool, error) {
	if err := deleteOutbox(tx, key, rec); err != nil {
		return false, err
	}
	return settleAlert(tx, rec.AlertID, rec.WebhookID, state, at)
}

// dropWebhookDeliveries removes every outbox entry of a webhook that is
// deleted or deactivated; an alert this completes is marked sent at time
// at (see settleAlert).
func dropWebhookDeliveries(tx *bolt.Tx, webhookID string, at time.Time) error {
	type entry struct{ index, value []byte } // value: outbox key | alert id
	var entries []entry
	prefix := []byte(webhookID)
	c := tx.Bucket(bucketOutboxByWebhook).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if len(v) < 8+idLen {
			return fmt.Errorf("malformed outbox index entry %x", k)
		}
		entries = append(entries, entry{bytes.Clone(k), bytes.Clone(v)})
	}
	for _, e := range entries {
		key, alertID := e.value[:8+idLen], string(e.value[8+idLen:])
		if err := tx.Bucket(bucketOutbox).Delete(key); err != nil {
			return err
		}
		if err := tx.Bucket(bucketOutboxByWebhook).Delete(e.index); err != nil {
			return err
		}
		if _, err := settleAlert(tx, alertID, webhookID, 0, at); err != nil {
			return err
		}
	}
	return nil
}

// settleAlert records the state of an alert's delivery to one webhook (0
// removes it: the webhook went away). Once none is pending it forgets the
// alert and, when the alert reached every webhook still active (at least
// one delivery done and none given up for a webhook still active), marks
// it sent at time at and reports true. An alert deleted meanwhile (with
// its domain) is no error.
func settleAlert(tx *bolt.Tx, alertID, webhookID string, state byte, at time.Time) (bool, error) {
	b := tx.Bucket(bucketOutboxAlerts)
	key := outboxAlertKey(alertID, webhookID)
	var err error
	if state == 0 {
		err = b.Delete(key)
	} else {
		err = b.Put(key, []byte{state})
	}
	if err != nil {
		return false, err
	}
	prefix := []byte(alertID)
	var rows [][]byte
	delivered, abandoned := false, false
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if len(v) != 1 {
			return false, fmt.Errorf("malformed alert delivery state %x", k)
		}
		switch v[0] {
		case alertDeliveryPending:
			return false, nil
		case alertDeliveryDone:
			delivered = true
		case alertDeliveryAbandoned:
			w, err := getWebhook(tx, string(k[len(prefix):]))
			if err != nil && !errors.Is(err, ErrNotFound) {
				return false, err
			}
			abandoned = abandoned || (w != nil && w.IsActive)
		}
		rows = append(rows, bytes.Clone(k))
	}
	for _, k := range rows {
		if err := b.Delete(k); err != nil {
			return false, err
		}
	}
	if !delivered || abandoned {
		return false, nil
	}
	if err := markAlertSent(tx, alertID, at); err != nil && !isKind(err, ErrNotFound) {
		return false, err
	}
	return true, nil
}

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
