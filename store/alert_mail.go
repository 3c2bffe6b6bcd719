package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Alert mail: the alerts each recipient of an organization's notification
// settings is mailed at once, grouped so that one domain sends one
// recipient at most one mail per window (worker.AlertMail, 10 minutes).
//
// Nothing is added to the ingest commit: the job reads the alerts created
// since its cursor (the id of the last alert it saw: ids are time-ordered
// and made inside the write transaction that stores the alert, so a later
// commit always holds later ids) and files each under the windows of the
// recipients whose severities include it, in one transaction that also
// advances the cursor. A window (organization, domain, recipient) holds
// the pending alert ids and when its last mail was queued; when it is due
// the job renders the mail and FlushAlertMail queues it in the mail outbox
// and empties the window in one transaction. A crash anywhere loses
// nothing and queues nothing twice.

var (
	keyAlertMailCursor = []byte("cursor")
	noDomain           = strings.Repeat("-", idLen)
)

// alertWindow is one window's state (JSON in bucketAlertMailWindows).
type alertWindow struct {
	Pending  []string   `json:"pending"`
	LastMail *time.Time `json:"last_mail,omitempty"`
}

// alertWindowKey is org id | domain id (noDomain for alerts of no
// domain) | lower-cased recipient.
func alertWindowKey(orgID, domainID, email string) []byte {
	if domainID == "" {
		domainID = noDomain
	}
	return append(append([]byte(orgID), domainID...), strings.ToLower(email)...)
}

// CollectAlertMail files the alerts created since the last call under the
// windows of their recipients (see above) and returns how many alerts it
// read. The first call on a file starts after its newest alert: alerts
// raised before alert mail existed are not mailed. Windows left empty for
// a day are forgotten.
func (db *DB) CollectAlertMail(now time.Time) (int, error) {
	n := 0
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		n = 0
		state := tx.Bucket(bucketAlertMail)
		alerts := tx.Bucket(bucketAlerts)
		// The cursor's value is 'c' and the last alert id read (none on an
		// empty file), never empty.
		raw := state.Get(keyAlertMailCursor)
		c := alerts.Cursor()
		if len(raw) == 0 || raw[0] != 'c' {
			last, _ := c.Last()
			return state.Put(keyAlertMailCursor, append([]byte{'c'}, last...))
		}
		cursor := raw[1:]
		settings := map[string]*NotificationSettings{}
		windows := tx.Bucket(bucketAlertMailWindows)
		var k, v []byte
		if len(cursor) == 0 {
			k, v = c.First()
		} else if k, v = c.Seek(cursor); k != nil && bytes.Equal(k, cursor) {
			k, v = c.Next()
		}
		var lastKey []byte
		for ; k != nil; k, v = c.Next() {
			lastKey = k
			n++
			var rec alertRecord
			if err := json.Unmarshal(v, &rec); err != nil {
				return fmt.Errorf("%w: alert %s: %v", errCorrupt, k, err)
			}
			s, ok := settings[rec.OrgID]
			if !ok {
				var err error
				if s, err = getNotificationSettings(tx, rec.OrgID); err != nil {
					return err
				}
				settings[rec.OrgID] = s
			}
			for _, r := range s.Recipients {
				if !r.MailsSeverity(rec.Severity) {
					continue
				}
				if err := addToWindow(windows, alertWindowKey(rec.OrgID, rec.DomainID, r.Email), string(k)); err != nil {
					return err
				}
			}
		}
		if lastKey != nil {
			if err := state.Put(keyAlertMailCursor, append([]byte{'c'}, lastKey...)); err != nil {
				return err
			}
		}
		return forgetIdleWindows(windows, now.Add(-24*time.Hour))
	})
	return n, wrap("collect alert mail", err)
}

func addToWindow(b *bolt.Bucket, key []byte, alertID string) error {
	w := &alertWindow{}
	if raw := b.Get(key); raw != nil {
		if err := json.Unmarshal(raw, w); err != nil {
			return fmt.Errorf("%w: alert mail window %x: %v", errCorrupt, key, err)
		}
	}
	w.Pending = append(w.Pending, alertID)
	raw, err := json.Marshal(w)
	if err != nil {
		return err
	}
	return b.Put(key, raw)
}

// forgetIdleWindows deletes windows with nothing pending whose last mail
// was queued before t.
func forgetIdleWindows(b *bolt.Bucket, t time.Time) error {
	var dead [][]byte
	err := b.ForEach(func(k, v []byte) error {
		var w alertWindow
		if json.Unmarshal(v, &w) == nil && len(w.Pending) == 0 && (w.LastMail == nil || w.LastMail.Before(t)) {
			dead = append(dead, bytes.Clone(k))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range dead {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// AlertMailBatch is the pending alerts of one window: one domain (or none)
// of one organization, for one recipient, due to be mailed.
type AlertMailBatch struct {
	OrgID   string
	OrgName string
	// DomainID and Domain are "" for alerts about no domain (a mailbox).
	DomainID string
	Domain   string
	To       string
	// Alerts are the pending alerts still there and not dismissed, oldest
	// first; empty when all went (FlushAlertMail with nil then empties the
	// window).
	Alerts []*Alert
	// LastMail is when the window's previous mail was queued; nil for
	// none.
	LastMail *time.Time

	key     []byte
	pending []string
}

// DueAlertMail returns up to max windows with pending alerts whose last
// mail was queued at least window before now (or never).
func (db *DB) DueAlertMail(now time.Time, window time.Duration, max int) ([]*AlertMailBatch, error) {
	var out []*AlertMailBatch
	err := db.bolt.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketAlertMailWindows).ForEach(func(k, v []byte) error {
			if len(out) >= max {
				return nil
			}
			var w alertWindow
			if len(k) <= 2*idLen || json.Unmarshal(v, &w) != nil {
				return fmt.Errorf("%w: alert mail window %x", errCorrupt, k)
			}
			if len(w.Pending) == 0 || w.LastMail != nil && now.Before(w.LastMail.Add(window)) {
				return nil
			}
			b := &AlertMailBatch{OrgID: string(k[:idLen]), DomainID: string(k[idLen : 2*idLen]), To: string(k[2*idLen:]),
				LastMail: w.LastMail, key: bytes.Clone(k), pending: w.Pending, Alerts: []*Alert{}}
			if b.DomainID == noDomain {
				b.DomainID = ""
			}
			if org, err := getOrg(tx, b.OrgID); err == nil {
				b.OrgName = org.Name
			}
			if b.DomainID != "" {
				if d, err := getDomain(tx, b.DomainID); err == nil {
					b.Domain = d.Name
				}
			}
			for _, id := range w.Pending {
				rec, err := getAlert(tx, id)
				if isKind(err, ErrNotFound) {
					continue // gone with its domain, or by retention
				}
				if err != nil {
					return err
				}
				if rec.Status != AlertDismissed {
					b.Alerts = append(b.Alerts, rec.alert())
				}
			}
			out = append(out, b)
			return nil
		})
	})
	return out, wrap("due alert mail", err)
}

// FlushAlertMail queues m (the mail of batch b; nil when b has no alert
// left to mail) and takes b's alerts out of its window, stamping the
// window's last mail now, in one transaction. Alerts filed in the window
// since DueAlertMail stay pending for the next one. It returns m's status
// (nil for a nil m). ErrInvalid as EnqueueMail.
func (db *DB) FlushAlertMail(b *AlertMailBatch, m *OutgoingMail) (*MailStatus, error) {
	var st *MailStatus
	now := db.now()
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		bucket := tx.Bucket(bucketAlertMailWindows)
		var w alertWindow
		raw := bucket.Get(b.key)
		if raw == nil {
			return nil // forgotten meanwhile
		}
		if err := json.Unmarshal(raw, &w); err != nil {
			return fmt.Errorf("%w: alert mail window %x: %v", errCorrupt, b.key, err)
		}
		w.Pending = slices.DeleteFunc(w.Pending, func(id string) bool { return slices.Contains(b.pending, id) })
		if m != nil {
			var err error
			if st, err = enqueueMail(tx, m, now); err != nil {
				return err
			}
			w.LastMail = &now
		}
		out, err := json.Marshal(&w)
		if err != nil {
			return err
		}
		return bucket.Put(b.key, out)
	})
	if err != nil {
		return nil, wrap("flush alert mail", err)
	}
	return st, nil
}
