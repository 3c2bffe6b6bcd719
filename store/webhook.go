package store

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// Webhook is an HTTPS endpoint of an organization that receives its
// alert.created events. Its JSON is the API's (API.md); the signing secret
// is never part of it (see WebhookSecret and FindWebhookSecret).
type Webhook struct {
	ID                  string     `json:"id"`
	OrgID               string     `json:"-"`
	URL                 string     `json:"url"`
	Name                string     `json:"name"`
	Format              string     `json:"format"`
	IsActive            bool       `json:"is_active"`
	CreatedAt           time.Time  `json:"created_at"`
	UpdatedAt           time.Time  `json:"updated_at"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
	DisabledReason      *string    `json:"disabled_reason"`
	LastDeliveryAt      *time.Time `json:"last_delivery_at"`
	LastStatusCode      *int       `json:"last_status_code"`
}

// Webhook limits and the reason an automatically disabled webhook shows.
const (
	// MaxWebhookNameLen is the longest webhook name, in characters.
	MaxWebhookNameLen = 100
	// MaxWebhookURLLen is the longest webhook URL, in bytes.
	MaxWebhookURLLen = 2048
	// MaxWebhookFailures is how many consecutive failed delivery attempts
	// disable a webhook.
	MaxWebhookFailures = 10
	// DisabledConsecutiveFailures is the disabled_reason of a webhook
	// disabled after MaxWebhookFailures failed attempts in a row.
	DisabledConsecutiveFailures = "consecutive_failures"
)

// The delivery formats of a webhook (package webhook renders them; its
// Format constants are the same names). A webhook stored before formats
// existed has none and is WebhookFormatDMARCD.
const (
	WebhookFormatDMARCD = "dmarcd"
	WebhookFormatSlack  = "slack"
	WebhookFormatTeams  = "teams"
)

// checkWebhookFormat is the store's own guard; the caller validates the
// format for the client first.
func checkWebhookFormat(f string) error {
	switch f {
	case WebhookFormatDMARCD, WebhookFormatSlack, WebhookFormatTeams:
		return nil
	}
	return errorf(ErrInvalid, "format must be dmarcd, slack or teams")
}

// WebhookSecret is the secret a webhook's deliveries are signed with:
// "whsec_" and 64 lowercase hex characters. It prints, logs and marshals
// as a redacted placeholder so that it cannot leak by accident; string(s)
// is the value, for signing and for the one answer that shows it.
type WebhookSecret string

const redactedSecret = "whsec_[redacted]"

// String returns a redacted placeholder, never the secret.
func (WebhookSecret) String() string { return redactedSecret }

// GoString returns a redacted placeholder, never the secret.
func (WebhookSecret) GoString() string { return redactedSecret }

// LogValue returns a redacted placeholder, never the secret.
func (WebhookSecret) LogValue() slog.Value { return slog.StringValue(redactedSecret) }

// MarshalJSON encodes a redacted placeholder, never the secret.
func (WebhookSecret) MarshalJSON() ([]byte, error) { return json.Marshal(redactedSecret) }

// valid reports whether s has the form of a secret made by webhook.NewSecret.
func (s WebhookSecret) valid() bool {
	hex, ok := strings.CutPrefix(string(s), "whsec_")
	if !ok || len(hex) != 64 {
		return false
	}
	for i := 0; i < len(hex); i++ {
		if !isLowerHex(hex[i]) {
			return false
		}
	}
	return true
}

// WebhookUpdate holds the fields an update changes; nil leaves a field as
// it is.
type WebhookUpdate struct {
	URL      *string
	Name     *string
	Format   *string
	IsActive *bool
}

// webhookRecord is how a webhook is stored, its secret included.
type webhookRecord struct {
	ID                  string     `json:"id"`
	OrgID               string     `json:"org_id"`
	URL                 string     `json:"url"`
	Name                string     `json:"name"`
	Secret              string     `json:"secret"`
	Format              string     `json:"format,omitempty"` // "" for WebhookFormatDMARCD
	IsActive            bool       `json:"is_active"`
	CreatedAt           time.Time  `json:"created_at"`
	UpdatedAt           time.Time  `json:"updated_at"`
	ConsecutiveFailures int        `json:"consecutive_failures,omitempty"`
	DisabledReason      *string    `json:"disabled_reason,omitempty"`
	LastDeliveryAt      *time.Time `json:"last_delivery_at,omitempty"`
	LastStatusCode      *int       `json:"last_status_code,omitempty"`
}

// CleanWebhookName trims a webhook name and checks it: 1 to
// MaxWebhookNameLen characters of valid UTF-8 without control characters.
// The error is an ErrInvalid *Error whose message suits the client.
func CleanWebhookName(s string) (string, error) {
	s = strings.TrimSpace(s)
	if n := utf8.RuneCountInString(s); n == 0 || n > MaxWebhookNameLen {
		return "", errorf(ErrInvalid, "name must be 1 to %d characters", MaxWebhookNameLen)
	}
	if !utf8.ValidString(s) || strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return "", errorf(ErrInvalid, "name must be valid text without control characters")
	}
	return s, nil
}

// checkWebhookURL is the store's own guard: the SSRF rules are package
// webhook's and are applied by the caller before saving.
func checkWebhookURL(u string) error {
	if !strings.HasPrefix(u, "https://") || len(u) > MaxWebhookURLLen {
		return errorf(ErrInvalid, "url must be an https URL of at most %d characters", MaxWebhookURLLen)
	}
	return nil
}

// CreateWebhook stores w, active, with secret to sign its deliveries. The
// caller sets OrgID, URL (already checked by egress.ValidateURL) and Name;
// Format "" is WebhookFormatDMARCD. The store sets ID, IsActive, CreatedAt
// and UpdatedAt and writes them back into w. Errors: ErrInvalid for a bad
// name or format, a URL that is not https or too long, or a malformed
// secret; ErrNotFound for an unknown organization;
// ErrLimit when the plan has no webhooks or its count of webhooks is
// reached (inactive webhooks count: they can be re-activated at any time).
func (db *DB) CreateWebhook(w *Webhook, secret WebhookSecret) error {
	if w == nil {
		return errorf(ErrInvalid, "webhook is required")
	}
	name, err := CleanWebhookName(w.Name)
	if err != nil {
		return err
	}
	if err := checkWebhookURL(w.URL); err != nil {
		return err
	}
	if !secret.valid() {
		return errorf(ErrInvalid, "malformed webhook secret")
	}
	format := cmp.Or(w.Format, WebhookFormatDMARCD)
	if err := checkWebhookFormat(format); err != nil {
		return err
	}
	now := db.now()
	rec := &webhookRecord{
		ID: NewID(), OrgID: w.OrgID, URL: w.URL, Name: name, Secret: string(secret),
		IsActive: true, CreatedAt: now, UpdatedAt: now,
	}
	rec.setFormat(format)
	err = db.bolt.Update(func(tx *bolt.Tx) error {
		org, err := getOrg(tx, rec.OrgID)
		if err != nil {
			return err
		}
		limits := org.Plan.Limits()
		if !limits.Webhooks {
			return errorf(ErrLimit, "plan %s does not include webhooks", org.Plan)
		}
		if countPrefix(tx.Bucket(bucketWebhooksByOrg), orgPrefix(rec.OrgID)) >= limits.MaxWebhooks {
			return errorf(ErrLimit, "plan limit of %d webhooks reached", limits.MaxWebhooks)
		}
		if err := putWebhook(tx, rec); err != nil {
			return err
		}
		return tx.Bucket(bucketWebhooksByOrg).Put(orgTimeIDKey(rec.OrgID, rec.CreatedAt, rec.ID), nil)
	})
	if err != nil {
		return wrap("create webhook", err)
	}
	*w = *rec.webhook()
	return nil
}

// FindWebhook returns webhook id of organization orgID. ErrNotFound also
// when it belongs to another organization or id is malformed.
func (db *DB) FindWebhook(orgID, id string) (*Webhook, error) {
	var rec *webhookRecord
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		rec, err = getOrgWebhook(tx, orgID, id)
		return err
	})
	if err != nil {
		return nil, wrap("find webhook", err)
	}
	return rec.webhook(), nil
}

// FindWebhookSecret returns the webhook (as FindWebhook) and the secret its
// deliveries are signed with, for a test delivery. ErrNotFound as
// FindWebhook.
func (db *DB) FindWebhookSecret(orgID, id string) (*Webhook, WebhookSecret, error) {
	var rec *webhookRecord
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		rec, err = getOrgWebhook(tx, orgID, id)
		return err
	})
	if err != nil {
		return nil, "", wrap("find webhook", err)
	}
	return rec.webhook(), WebhookSecret(rec.Secret), nil
}

// ListWebhooks returns one page of the webhooks of organization orgID,
// newest first, and how many it has in all. A page past the end is empty.
// Errors: ErrInvalid for a page or limit below 1, ErrNotFound for an
// unknown organization.
func (db *DB) ListWebhooks(orgID string, p Page) ([]*Webhook, int, error) {
	skip, err := p.offset()
	if err != nil {
		return nil, 0, err
	}
	hooks := []*Webhook{}
	total := 0
	err = db.bolt.View(func(tx *bolt.Tx) error {
		if _, err := getOrg(tx, orgID); err != nil {
			return err
		}
		prefix := orgPrefix(orgID)
		c := tx.Bucket(bucketWebhooksByOrg).Cursor()
		for k := lastWithPrefix(c, prefix); k != nil; k = prevWithPrefix(c, prefix) {
			if total >= skip && len(hooks) < p.Limit {
				rec, err := getWebhook(tx, idFromOrgTimeIDKey(k))
				if err != nil {
					return err
				}
				hooks = append(hooks, rec.webhook())
			}
			total++
		}
		return nil
	})
	if err != nil {
		return nil, 0, wrap("list webhooks", err)
	}
	return hooks, total, nil
}

// UpdateWebhook applies u to webhook id of organization orgID and returns
// the result. Setting IsActive to true also resets ConsecutiveFailures and
// DisabledReason; setting it to false drops the webhook's pending
// deliveries. A new URL must have been checked by egress.ValidateURL; the
// deliveries still pending go to it; so does a new format, in which they
// are rendered at their next attempt. Errors: ErrNotFound as FindWebhook,
// ErrInvalid for a bad name or URL.
func (db *DB) UpdateWebhook(orgID, id string, u WebhookUpdate) (*Webhook, error) {
	if u.Name != nil {
		name, err := CleanWebhookName(*u.Name)
		if err != nil {
			return nil, err
		}
		u.Name = &name
	}
	if u.URL != nil {
		if err := checkWebhookURL(*u.URL); err != nil {
			return nil, err
		}
	}
	if u.Format != nil {
		if err := checkWebhookFormat(*u.Format); err != nil {
			return nil, err
		}
	}
	now := db.now()
	var rec *webhookRecord
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		var err error
		if rec, err = getOrgWebhook(tx, orgID, id); err != nil {
			return err
		}
		if u.URL != nil {
			rec.URL = *u.URL
		}
		if u.Name != nil {
			rec.Name = *u.Name
		}
		if u.Format != nil {
			rec.setFormat(*u.Format)
		}
		if u.IsActive != nil {
			rec.IsActive = *u.IsActive
			if rec.IsActive {
				rec.ConsecutiveFailures, rec.DisabledReason = 0, nil
			}
		}
		if u != (WebhookUpdate{}) {
			rec.UpdatedAt = now
		}
		if err := putWebhook(tx, rec); err != nil || rec.IsActive {
			return err
		}
		return dropWebhookDeliveries(tx, rec.ID, now)
	})
	if err != nil {
		return nil, wrap("update webhook", err)
	}
	return rec.webhook(), nil
}

// DeleteWebhook removes webhook id of organization orgID and drops its
// pending deliveries, in one transaction. ErrNotFound as FindWebhook.
func (db *DB) DeleteWebhook(orgID, id string) error {
	now := db.now()
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		rec, err := getOrgWebhook(tx, orgID, id)
		if err != nil {
			return err
		}
		if err := dropWebhookDeliveries(tx, rec.ID, now); err != nil {
			return err
		}
		if err := tx.Bucket(bucketWebhooks).Delete(idKey(rec.ID)); err != nil {
			return err
		}
		return tx.Bucket(bucketWebhooksByOrg).Delete(orgTimeIDKey(rec.OrgID, rec.CreatedAt, rec.ID))
	})
	if err != nil {
		return wrap("delete webhook", err)
	}
	return nil
}

func errWebhookNotFound() error { return errorf(ErrNotFound, "webhook not found") }

// getWebhook reads webhook id; ErrNotFound when absent or id malformed.
func getWebhook(tx *bolt.Tx, id string) (*webhookRecord, error) {
	if !ValidID(id) {
		return nil, errWebhookNotFound()
	}
	raw := tx.Bucket(bucketWebhooks).Get(idKey(id))
	if raw == nil {
		return nil, errWebhookNotFound()
	}
	rec := new(webhookRecord)
	if err := json.Unmarshal(raw, rec); err != nil {
		return nil, fmt.Errorf("decode webhook %s: %w", id, err)
	}
	return rec, nil
}

// getOrgWebhook is getWebhook that also hides other organizations' webhooks.
func getOrgWebhook(tx *bolt.Tx, orgID, id string) (*webhookRecord, error) {
	rec, err := getWebhook(tx, id)
	if err != nil {
		return nil, err
	}
	if rec.OrgID != orgID {
		return nil, errWebhookNotFound()
	}
	return rec, nil
}

func putWebhook(tx *bolt.Tx, rec *webhookRecord) error {
	raw, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode webhook %s: %w", rec.ID, err)
	}
	return tx.Bucket(bucketWebhooks).Put(idKey(rec.ID), raw)
}

// activeWebhooks returns the active webhooks of organization orgID, oldest
// first.
func activeWebhooks(tx *bolt.Tx, orgID string) ([]*webhookRecord, error) {
	var out []*webhookRecord
	prefix := orgPrefix(orgID)
	c := tx.Bucket(bucketWebhooksByOrg).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		rec, err := getWebhook(tx, idFromOrgTimeIDKey(k))
		if err != nil {
			return nil, err
		}
		if rec.IsActive {
			out = append(out, rec)
		}
	}
	return out, nil
}

// setFormat stores format, the default as none, so that a record reads
// the same whether it was written before formats existed or after.
func (rec *webhookRecord) setFormat(format string) {
	if format == WebhookFormatDMARCD {
		format = ""
	}
	rec.Format = format
}

// format returns the record's delivery format.
func (rec *webhookRecord) format() string { return cmp.Or(rec.Format, WebhookFormatDMARCD) }

func (rec *webhookRecord) webhook() *Webhook {
	return &Webhook{
		ID: rec.ID, OrgID: rec.OrgID, URL: rec.URL, Name: rec.Name, Format: rec.format(), IsActive: rec.IsActive,
		CreatedAt: rec.CreatedAt, UpdatedAt: rec.UpdatedAt, ConsecutiveFailures: rec.ConsecutiveFailures,
		DisabledReason: rec.DisabledReason, LastDeliveryAt: rec.LastDeliveryAt, LastStatusCode: rec.LastStatusCode,
	}
}
