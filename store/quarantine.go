package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// QuarantineEntry is an input that yielded nothing usable: a mail or file
// with no report, a report that could not be read or routed to a domain.
// Its raw bytes are kept beside it (see FindQuarantine), never dropped.
// Source is "smtp" or "import"; Name is a file name or "MAIL FROM -> RCPT
// TO"; Size is the size of the input, which may be more than the bytes kept.
type QuarantineEntry struct {
	ID         string    `json:"id"`
	ReceivedAt time.Time `json:"received_at"`
	Source     string    `json:"source"`
	Name       string    `json:"name"`
	Reason     string    `json:"reason"`
	Size       int64     `json:"size"`
	OrgID      string    `json:"organization_id,omitempty"`
	Retries    int       `json:"retries"`
	// Recipient is the RCPT TO address of a mail, which routes its reports
	// when the entry is retried.
	Recipient string `json:"recipient,omitempty"`
}

// quarantineRecord is how an entry is stored.
type quarantineRecord struct {
	ID         string    `json:"id"`
	ReceivedAt time.Time `json:"received_at"`
	Source     string    `json:"source"`
	Name       string    `json:"name"`
	Reason     string    `json:"reason"`
	Size       int64     `json:"size"`
	OrgID      string    `json:"org_id,omitempty"`
	Retries    int       `json:"retries"`
	Recipient  string    `json:"recipient,omitempty"`
}

func errQuarantineNotFound() error { return errorf(ErrNotFound, "quarantine entry not found") }

// ListQuarantine returns one page of quarantine entries, newest first, and
// how many there are in all. ErrInvalid for a page or limit below 1.
func (db *DB) ListQuarantine(p Page) ([]*QuarantineEntry, int, error) {
	skip, err := p.offset()
	if err != nil {
		return nil, 0, err
	}
	entries := []*QuarantineEntry{}
	total := 0
	err = db.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketQuarantine).Cursor()
		for k, v := c.Last(); k != nil; k, v = c.Prev() {
			if total >= skip && len(entries) < p.Limit {
				rec, err := decodeQuarantine(k, v)
				if err != nil {
					return err
				}
				entries = append(entries, rec.entry())
			}
			total++
		}
		return nil
	})
	if err != nil {
		return nil, 0, wrap("list quarantine", err)
	}
	return entries, total, nil
}

// FindQuarantine returns entry id and a copy of the raw bytes kept for it.
// ErrNotFound when there is no such entry (or id is malformed).
func (db *DB) FindQuarantine(id string) (*QuarantineEntry, []byte, error) {
	var rec *quarantineRecord
	var raw []byte
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		if rec, err = getQuarantine(tx, id); err != nil {
			return err
		}
		raw = bytes.Clone(tx.Bucket(bucketQuarantineRaw).Get(idKey(id)))
		if raw == nil {
			raw = []byte{}
		}
		return nil
	})
	if err != nil {
		return nil, nil, wrap("find quarantine", err)
	}
	return rec.entry(), raw, nil
}

// DeleteQuarantine removes entry id and its bytes. ErrNotFound when there
// is no such entry.
func (db *DB) DeleteQuarantine(id string) error {
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		if _, err := getQuarantine(tx, id); err != nil {
			return err
		}
		return deleteQuarantine(tx, id)
	})
	return wrap("delete quarantine", err)
}

func getQuarantine(tx *bolt.Tx, id string) (*quarantineRecord, error) {
	if !ValidID(id) {
		return nil, errQuarantineNotFound()
	}
	v := tx.Bucket(bucketQuarantine).Get(idKey(id))
	if v == nil {
		return nil, errQuarantineNotFound()
	}
	return decodeQuarantine([]byte(id), v)
}

func decodeQuarantine(k, v []byte) (*quarantineRecord, error) {
	rec := new(quarantineRecord)
	if err := json.Unmarshal(v, rec); err != nil {
		return nil, fmt.Errorf("decode quarantine entry %s: %w", k, err)
	}
	return rec, nil
}

func deleteQuarantine(tx *bolt.Tx, id string) error {
	if err := tx.Bucket(bucketQuarantine).Delete(idKey(id)); err != nil {
		return err
	}
	return tx.Bucket(bucketQuarantineRaw).Delete(idKey(id))
}

// putQuarantine writes an item of a commit. A new entry (no ID) gets an id,
// written back into item; an existing one (a retry that failed again) keeps
// its bytes and gets the new reason, one more retry, and no second entry.
// An existing entry deleted meanwhile is written anew.
func putQuarantine(tx *bolt.Tx, item *QuarantineItem, now time.Time) error {
	e := &item.Entry
	if e.ID != "" {
		if old, err := getQuarantine(tx, e.ID); err == nil {
			old.Reason, old.Retries = e.Reason, old.Retries+1
			*e = *old.entry()
			return putQuarantineRecord(tx, old)
		}
	}
	e.ID = NewID()
	if e.ReceivedAt.IsZero() {
		e.ReceivedAt = now
	}
	e.ReceivedAt = e.ReceivedAt.UTC().Truncate(time.Second)
	rec := &quarantineRecord{ID: e.ID, ReceivedAt: e.ReceivedAt, Source: e.Source, Name: e.Name, Reason: e.Reason,
		Size: e.Size, OrgID: e.OrgID, Retries: e.Retries, Recipient: e.Recipient}
	if err := putQuarantineRecord(tx, rec); err != nil {
		return err
	}
	raw := item.Raw
	if raw == nil {
		raw = []byte{}
	}
	return tx.Bucket(bucketQuarantineRaw).Put(idKey(e.ID), raw)
}

func putQuarantineRecord(tx *bolt.Tx, rec *quarantineRecord) error {
	raw, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode quarantine entry %s: %w", rec.ID, err)
	}
	return tx.Bucket(bucketQuarantine).Put(idKey(rec.ID), raw)
}

func (rec *quarantineRecord) entry() *QuarantineEntry {
	return &QuarantineEntry{ID: rec.ID, ReceivedAt: rec.ReceivedAt, Source: rec.Source, Name: rec.Name,
		Reason: rec.Reason, Size: rec.Size, OrgID: rec.OrgID, Retries: rec.Retries, Recipient: rec.Recipient}
}
