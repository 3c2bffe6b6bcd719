package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/alert"
)

// How an alert is stored: the record, its indexes by organization (with
// what the list filters on) and by domain, the one place alerts are
// created (insertAlert, which also queues their webhook deliveries), and
// what goes with a domain.

// alertRecord is how an alert is stored.
type alertRecord struct {
	ID          string          `json:"id"`
	OrgID       string          `json:"org_id"`
	DomainID    string          `json:"domain_id,omitempty"`
	Type        string          `json:"type"`
	Severity    string          `json:"severity"`
	Status      string          `json:"status"`
	Title       string          `json:"title"`
	Message     string          `json:"message"`
	Details     json.RawMessage `json:"details"`
	CreatedAt   time.Time       `json:"created_at"`
	SentAt      *time.Time      `json:"sent_at,omitempty"`
	DismissedAt *time.Time      `json:"dismissed_at,omitempty"`
}

func errAlertNotFound() error { return errorf(ErrNotFound, "alert not found") }

// severityRank is a severity as stored (index values, dedup entries):
// alert.Rank, 0 for no severity.
func severityRank(s string) byte { return byte(alert.Rank(s)) }

// severityOfRank is the severity of a stored rank, "" for none.
func severityOfRank(r byte) string {
	for _, s := range []string{alert.SeverityInfo, alert.SeverityWarning, alert.SeverityCritical} {
		if severityRank(s) == r {
			return s
		}
	}
	return ""
}

func statusCode(s string) byte {
	switch s {
	case AlertPending:
		return 'p'
	case AlertSent:
		return 's'
	case AlertDismissed:
		return 'd'
	}
	return 0
}

// markAlertSent records, in tx, that alert alertID reached every active
// webhook of its organization at time at: a pending alert becomes sent; a
// dismissed one stays dismissed. sent_at keeps the first delivery time.
// ErrNotFound when there is no such alert (it may have gone with its
// domain).
func markAlertSent(tx *bolt.Tx, alertID string, at time.Time) error {
	rec, err := getAlert(tx, alertID)
	if err != nil {
		return err
	}
	if rec.SentAt != nil {
		return nil
	}
	rec.SentAt = new(at.UTC().Truncate(time.Second))
	if rec.Status == AlertPending {
		rec.Status = AlertSent
	}
	return putAlert(tx, rec)
}

// insertAlert is the one place alerts are created: it completes a (id,
// pending status, "{}" details when none), checks it, stores it with its
// index entries, and queues its webhook deliveries, all in tx. a.OrgID and
// a.CreatedAt must be set. ErrInvalid for an unknown type or severity, a
// malformed organization or domain id, or details that are not a JSON
// object.
func insertAlert(tx *bolt.Tx, a *Alert) error {
	if a.ID == "" {
		a.ID = NewID()
	}
	a.Status, a.SentAt, a.DismissedAt = AlertPending, nil, nil
	a.CreatedAt = a.CreatedAt.UTC().Truncate(time.Second)
	if len(a.Details) == 0 {
		a.Details = json.RawMessage("{}")
	}
	rec := alertRecordOf(a)
	if err := rec.validate(); err != nil {
		return err
	}
	if err := putAlert(tx, rec); err != nil {
		return err
	}
	if rec.DomainID != "" {
		if err := tx.Bucket(bucketAlertsByDomain).Put(alertDomainKey(rec.DomainID, rec.ID), nil); err != nil {
			return err
		}
	}
	return enqueueAlertDeliveries(tx, a, a.CreatedAt)
}

func (rec *alertRecord) validate() error {
	switch {
	case !ValidID(rec.ID) || !ValidID(rec.OrgID):
		return errorf(ErrInvalid, "alert needs an id and an organization")
	case rec.DomainID != "" && !ValidID(rec.DomainID):
		return errorf(ErrInvalid, "malformed domain id of alert")
	case !alert.ValidType(rec.Type):
		return errorf(ErrInvalid, "unknown alert type %q", rec.Type)
	case !ValidAlertSeverity(rec.Severity):
		return errorf(ErrInvalid, "unknown alert severity %q", rec.Severity)
	case rec.CreatedAt.IsZero():
		return errorf(ErrInvalid, "alert needs a creation time")
	case !json.Valid(rec.Details) || bytes.TrimSpace(rec.Details)[0] != '{':
		return errorf(ErrInvalid, "alert details must be a JSON object")
	}
	return nil
}

// getAlert reads alert id; ErrNotFound when absent or id malformed.
func getAlert(tx *bolt.Tx, id string) (*alertRecord, error) {
	if !ValidID(id) {
		return nil, errAlertNotFound()
	}
	raw := tx.Bucket(bucketAlerts).Get(idKey(id))
	if raw == nil {
		return nil, errAlertNotFound()
	}
	rec := new(alertRecord)
	if err := json.Unmarshal(raw, rec); err != nil {
		return nil, fmt.Errorf("decode alert %s: %w", id, err)
	}
	return rec, nil
}

// getOrgAlert is getAlert that also hides other organizations' alerts.
func getOrgAlert(tx *bolt.Tx, orgID, id string) (*alertRecord, error) {
	rec, err := getAlert(tx, id)
	if err != nil {
		return nil, err
	}
	if rec.OrgID != orgID {
		return nil, errAlertNotFound()
	}
	return rec, nil
}

// putAlert writes an alert and its organization index entry, whose value
// carries what the list filters on.
func putAlert(tx *bolt.Tx, rec *alertRecord) error {
	raw, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode alert %s: %w", rec.ID, err)
	}
	if err := tx.Bucket(bucketAlerts).Put(idKey(rec.ID), raw); err != nil {
		return err
	}
	return tx.Bucket(bucketAlertsByOrg).Put(orgTimeIDKey(rec.OrgID, rec.CreatedAt, rec.ID), alertIndexValue(rec))
}

// removeAlert deletes an alert and its index entries.
func removeAlert(tx *bolt.Tx, rec *alertRecord) error {
	if err := tx.Bucket(bucketAlerts).Delete(idKey(rec.ID)); err != nil {
		return err
	}
	if err := tx.Bucket(bucketAlertsByOrg).Delete(orgTimeIDKey(rec.OrgID, rec.CreatedAt, rec.ID)); err != nil {
		return err
	}
	if rec.DomainID == "" {
		return nil
	}
	return tx.Bucket(bucketAlertsByDomain).Delete(alertDomainKey(rec.DomainID, rec.ID))
}

// deleteDomainAlerts removes a deleted domain's alerts and what the rules
// remember of it. It runs inside DeleteDomain. Dedup entries of the domain
// are left to expire (see deleteAlertStateBefore): their keys start with
// the day.
func deleteDomainAlerts(tx *bolt.Tx, domainID string) error {
	prefix := []byte(domainID)
	var ids []string
	c := tx.Bucket(bucketAlertsByDomain).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		ids = append(ids, string(k[len(prefix):]))
	}
	for _, id := range ids {
		rec, err := getAlert(tx, id)
		if isKind(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if err := removeAlert(tx, rec); err != nil {
			return err
		}
	}
	for _, b := range [][]byte{bucketAlertsByDomain, bucketAlertSources, bucketAlertSenders} {
		if _, err := deletePrefix(tx.Bucket(b), prefix, -1); err != nil {
			return err
		}
	}
	return nil
}

func alertRecordOf(a *Alert) *alertRecord {
	rec := &alertRecord{ID: a.ID, OrgID: a.OrgID, Type: a.Type, Severity: a.Severity, Status: a.Status,
		Title: a.Title, Message: a.Message, Details: a.Details, CreatedAt: a.CreatedAt,
		SentAt: secondUTC(a.SentAt), DismissedAt: secondUTC(a.DismissedAt)}
	if a.DomainID != nil {
		rec.DomainID = *a.DomainID
	}
	return rec
}

func (rec *alertRecord) alert() *Alert {
	a := &Alert{ID: rec.ID, OrgID: rec.OrgID, Type: rec.Type, Severity: rec.Severity, Status: rec.Status,
		Title: rec.Title, Message: rec.Message, Details: rec.Details, CreatedAt: rec.CreatedAt,
		SentAt: rec.SentAt, DismissedAt: rec.DismissedAt}
	if rec.DomainID != "" {
		a.DomainID = new(rec.DomainID)
	}
	if len(a.Details) == 0 {
		a.Details = json.RawMessage("{}")
	}
	return a
}

// alertIndexValue is status code | severity rank | domain id (or nothing).
func alertIndexValue(rec *alertRecord) []byte {
	v := make([]byte, 0, 2+idLen)
	v = append(v, statusCode(rec.Status), severityRank(rec.Severity))
	return append(v, rec.DomainID...)
}

func decodeAlertIndex(v []byte) (status, severity byte, domainID string) {
	if len(v) < 2 {
		return 0, 0, ""
	}
	return v[0], v[1], string(v[2:])
}

// alertDomainKey is domain id | alert id.
func alertDomainKey(domainID, alertID string) []byte {
	k := make([]byte, 0, 2*idLen)
	return append(append(k, domainID...), alertID...)
}
