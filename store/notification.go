package store

import (
	"encoding/json"
	"fmt"
	"net/mail"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/alert"
)

// Notification settings: per organization, who is mailed what. A
// recipient is keyed by its lower-cased address, so that once people
// (accounts) exist, a person's own settings are the entry of their
// address: one model for the organization's list and for "my settings".

// The digest frequencies of a recipient.
const (
	DigestOff    = "off"
	DigestDaily  = "daily"
	DigestWeekly = "weekly"
)

// MaxNotificationRecipients bounds an organization's recipient list.
const MaxNotificationRecipients = 200

// NotificationRecipient is one address of an organization's list: the
// alert severities mailed at once (grouped per domain, see
// alert_mail.go) and the digest frequency.
type NotificationRecipient struct {
	// Email is the address, lower-cased: the entry's key.
	Email string `json:"email"`
	// Severities are the alert severities mailed at once (info, warning,
	// critical), in that order; empty mails no alert.
	Severities []string `json:"alert_severities"`
	// Digest is DigestOff, DigestDaily or DigestWeekly.
	Digest string `json:"digest"`
}

// NotificationSettings are an organization's recipients, in address
// order.
type NotificationSettings struct {
	OrgID      string                  `json:"-"`
	Recipients []NotificationRecipient `json:"recipients"`
	// UpdatedAt is nil until the list is first saved.
	UpdatedAt *time.Time `json:"updated_at"`
}

// Recipient returns the entry of email (any case), or nil.
func (s *NotificationSettings) Recipient(email string) *NotificationRecipient {
	email = strings.ToLower(strings.TrimSpace(email))
	for i := range s.Recipients {
		if s.Recipients[i].Email == email {
			return &s.Recipients[i]
		}
	}
	return nil
}

// MailsSeverity reports whether r is mailed alerts of severity at once.
func (r *NotificationRecipient) MailsSeverity(severity string) bool {
	return slices.Contains(r.Severities, severity)
}

// NormalizeRecipient checks r and returns it with its address trimmed
// and lower-cased, its severities deduplicated in rank order and an empty
// digest read as off. ErrInvalid names the field.
func NormalizeRecipient(r NotificationRecipient) (NotificationRecipient, error) {
	email := strings.ToLower(strings.TrimSpace(r.Email))
	a, err := mail.ParseAddress(email)
	if err != nil || a.Address != email || a.Name != "" || !strings.Contains(email, "@") ||
		len(email) > 254 || strings.ContainsAny(email, "\r\n<>\" ,;") {
		return r, errorf(ErrInvalid, "email %q is no mail address (want a bare address such as ops@example.net)", r.Email)
	}
	out := NotificationRecipient{Email: email, Severities: []string{}, Digest: r.Digest}
	for _, s := range []string{alert.SeverityInfo, alert.SeverityWarning, alert.SeverityCritical} {
		if slices.Contains(r.Severities, s) {
			out.Severities = append(out.Severities, s)
		}
	}
	for _, s := range r.Severities {
		if !ValidAlertSeverity(s) {
			return r, errorf(ErrInvalid, "alert_severities of %s: %q is no severity (info, warning or critical)", email, s)
		}
	}
	switch out.Digest {
	case "":
		out.Digest = DigestOff
	case DigestOff, DigestDaily, DigestWeekly:
	default:
		return r, errorf(ErrInvalid, "digest of %s: %q (want off, daily or weekly)", email, r.Digest)
	}
	return out, nil
}

// normalizeRecipients checks a whole list: NormalizeRecipient for each,
// no address twice, at most MaxNotificationRecipients; sorted by address.
func normalizeRecipients(list []NotificationRecipient) ([]NotificationRecipient, error) {
	if len(list) > MaxNotificationRecipients {
		return nil, errorf(ErrInvalid, "at most %d recipients", MaxNotificationRecipients)
	}
	out := make([]NotificationRecipient, 0, len(list))
	seen := map[string]bool{}
	for _, r := range list {
		n, err := NormalizeRecipient(r)
		if err != nil {
			return nil, err
		}
		if seen[n.Email] {
			return nil, errorf(ErrInvalid, "%s is listed twice", n.Email)
		}
		seen[n.Email] = true
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b NotificationRecipient) int { return strings.Compare(a.Email, b.Email) })
	return out, nil
}

// NotificationSettings returns the settings of organization orgID (an
// empty list when never saved). ErrNotFound for an unknown organization.
func (db *DB) NotificationSettings(orgID string) (*NotificationSettings, error) {
	var s *NotificationSettings
	err := db.bolt.View(func(tx *bolt.Tx) error {
		if _, err := getOrg(tx, orgID); err != nil {
			return err
		}
		var err error
		s, err = getNotificationSettings(tx, orgID)
		return err
	})
	return s, wrap("notification settings", err)
}

// AllNotificationSettings returns the settings of every organization that
// saved some, for the digest job: fn is called for each, in organization
// id order, inside one read transaction (it must not write).
func (db *DB) AllNotificationSettings(fn func(*NotificationSettings) error) error {
	return wrap("notification settings", db.bolt.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketNotifySettings).ForEach(func(k, v []byte) error {
			s, err := decodeNotificationSettings(string(k), v)
			if err != nil {
				return err
			}
			return fn(s)
		})
	}))
}

// PutNotificationSettings replaces the recipient list of organization
// orgID and returns it as stored. ErrNotFound for an unknown
// organization, ErrInvalid for a bad entry (see NormalizeRecipient), an
// address listed twice, or too many.
func (db *DB) PutNotificationSettings(orgID string, recipients []NotificationRecipient) (*NotificationSettings, error) {
	list, err := normalizeRecipients(recipients)
	if err != nil {
		return nil, err
	}
	s := &NotificationSettings{OrgID: orgID, Recipients: list}
	err = db.bolt.Update(func(tx *bolt.Tx) error {
		if _, err := getOrg(tx, orgID); err != nil {
			return err
		}
		return putNotificationSettings(tx, s, db.now())
	})
	if err != nil {
		return nil, wrap("put notification settings", err)
	}
	return s, nil
}

// PutNotificationRecipient sets the entry of r.Email in organization
// orgID's list, adding it when missing; a nil r.Severities with digest
// off and remove set deletes the entry instead. It returns the list as
// stored. Errors as PutNotificationSettings.
func (db *DB) PutNotificationRecipient(orgID string, r NotificationRecipient, remove bool) (*NotificationSettings, error) {
	n, err := NormalizeRecipient(r)
	if err != nil {
		return nil, err
	}
	var s *NotificationSettings
	err = db.bolt.Update(func(tx *bolt.Tx) error {
		if _, err := getOrg(tx, orgID); err != nil {
			return err
		}
		if s, err = getNotificationSettings(tx, orgID); err != nil {
			return err
		}
		list := slices.DeleteFunc(s.Recipients, func(e NotificationRecipient) bool { return e.Email == n.Email })
		if !remove {
			list = append(list, n)
		}
		if list, err = normalizeRecipients(list); err != nil {
			return err
		}
		s.Recipients = list
		return putNotificationSettings(tx, s, db.now())
	})
	if err != nil {
		return nil, wrap("put notification recipient", err)
	}
	return s, nil
}

func getNotificationSettings(tx *bolt.Tx, orgID string) (*NotificationSettings, error) {
	raw := tx.Bucket(bucketNotifySettings).Get(idKey(orgID))
	if raw == nil {
		return &NotificationSettings{OrgID: orgID, Recipients: []NotificationRecipient{}}, nil
	}
	return decodeNotificationSettings(orgID, raw)
}

func decodeNotificationSettings(orgID string, raw []byte) (*NotificationSettings, error) {
	s := &NotificationSettings{}
	if err := json.Unmarshal(raw, s); err != nil {
		return nil, fmt.Errorf("%w: notification settings of %s: %v", errCorrupt, orgID, err)
	}
	s.OrgID = orgID
	if s.Recipients == nil {
		s.Recipients = []NotificationRecipient{}
	}
	return s, nil
}

func putNotificationSettings(tx *bolt.Tx, s *NotificationSettings, now time.Time) error {
	s.UpdatedAt = &now
	raw, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketNotifySettings).Put(idKey(s.OrgID), raw)
}
