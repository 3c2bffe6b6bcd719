package store

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The audit log: who did what in an organization, when, from where. One
// entry per operation, written by the application layer; listed newest
// first by organization and time; deleted past the retention by the
// housekeeping job and with the organization.

// AuditEntry is one line of the audit log.
type AuditEntry struct {
	At     time.Time `json:"at"`
	OrgID  string    `json:"org_id"`
	Actor  string    `json:"actor"`  // a person's email, "key:<prefix>" or "operator"
	Action string    `json:"action"` // e.g. domain.create, member.role
	Target string    `json:"target"` // what it was done to, e.g. a domain's name
	IP     string    `json:"ip"`     // the client address; "" for the CLI
}

// auditKey is org id | at (big-endian Unix nanoseconds) | a fresh id:
// one organization's entries are a range in time order.
func auditKey(orgID string, at time.Time) []byte { return orgTimeIDKey(orgID, at, NewID()) }

// AppendAudit records entries in one transaction; ErrNotFound for an
// unknown organization (nothing is written then).
func (db *DB) AppendAudit(entries ...AuditEntry) error {
	raws := make([][]byte, len(entries))
	for i := range entries {
		entries[i].At = entries[i].At.UTC()
		raw, err := json.Marshal(&entries[i])
		if err != nil {
			return fmt.Errorf("encode audit entry: %w", err)
		}
		raws[i] = raw
	}
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		for i, e := range entries {
			if _, err := getOrg(tx, e.OrgID); err != nil {
				return err
			}
			if err := tx.Bucket(bucketAudit).Put(auditKey(e.OrgID, e.At), raws[i]); err != nil {
				return err
			}
		}
		return nil
	})
	return wrap("append audit", err)
}

// AuditFilter selects audit entries; empty fields select all.
type AuditFilter struct {
	Actor, Action string
	// From and To bound the time (both included); zero for none.
	From, To time.Time
	// Cursor resumes after the last entry of a previous page (its
	// NextCursor); "" from the newest.
	Cursor string
	// Limit is the most entries a page holds (1 to 500; 0 means 50).
	Limit int
}

// AuditPage is one page of the log, newest first.
type AuditPage struct {
	Entries []*AuditEntry
	// NextCursor resumes after this page; "" when nothing follows.
	NextCursor string
}

// ListAudit returns one page of the audit log of orgID that passes f.
// ErrInvalid for a cursor that is not one of this organization's or a
// limit out of range.
func (db *DB) ListAudit(orgID string, f AuditFilter) (*AuditPage, error) {
	if f.Limit == 0 {
		f.Limit = 50
	}
	if f.Limit < 1 || f.Limit > 500 {
		return nil, errorf(ErrInvalid, "limit must be 1 to 500")
	}
	prefix := orgPrefix(orgID)
	var after []byte
	if f.Cursor != "" {
		c, err := base64.RawURLEncoding.DecodeString(f.Cursor)
		if err != nil || len(c) != idLen+8+idLen || !bytes.HasPrefix(c, prefix) {
			return nil, errorf(ErrInvalid, "cursor is not one this listing gave")
		}
		after = c
	}
	page := &AuditPage{Entries: []*AuditEntry{}}
	err := db.bolt.View(func(tx *bolt.Tx) error {
		if _, err := getOrg(tx, orgID); err != nil {
			return err
		}
		c := tx.Bucket(bucketAudit).Cursor()
		var k, v []byte
		if after != nil {
			k, v = c.Seek(after)
			if k != nil && bytes.Equal(k, after) {
				k, v = c.Prev()
			} else if k == nil {
				k, v = c.Last()
			} else {
				k, v = c.Prev()
			}
		} else if end := prefixEnd(prefix); end != nil {
			if k, v = c.Seek(end); k == nil {
				k, v = c.Last()
			} else {
				k, v = c.Prev()
			}
		}
		if !f.To.IsZero() {
			// Skip what is newer than To without decoding it.
			for ; k != nil && bytes.HasPrefix(k, prefix) && keyTime(k).After(f.To); k, v = c.Prev() {
			}
		}
		for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Prev() {
			if !f.From.IsZero() && keyTime(k).Before(f.From) {
				break
			}
			e := new(AuditEntry)
			if err := json.Unmarshal(v, e); err != nil {
				return fmt.Errorf("decode audit entry: %w", err)
			}
			if f.Actor != "" && e.Actor != f.Actor || f.Action != "" && e.Action != f.Action {
				continue
			}
			if len(page.Entries) == f.Limit {
				page.NextCursor = base64.RawURLEncoding.EncodeToString(after)
				return nil
			}
			page.Entries = append(page.Entries, e)
			after = bytes.Clone(k)
		}
		return nil
	})
	if err != nil {
		return nil, wrap("list audit", err)
	}
	return page, nil
}

// keyTime is the time in an auditKey.
func keyTime(k []byte) time.Time {
	return time.Unix(0, int64(binary.BigEndian.Uint64(k[idLen:idLen+8]))).UTC()
}

// DeleteAuditBefore deletes the audit entries older than before, of
// every organization, in batches, and returns how many.
func (db *DB) DeleteAuditBefore(before time.Time) (int, error) {
	total := 0
	for {
		var doomed [][]byte
		err := db.bolt.View(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketAudit).ForEach(func(k, _ []byte) error {
				if len(doomed) < sweepBatch && len(k) >= idLen+8 && keyTime(k).Before(before) {
					doomed = append(doomed, bytes.Clone(k))
				}
				return nil
			})
		})
		if err != nil || len(doomed) == 0 {
			return total, wrap("delete audit", err)
		}
		err = db.bolt.Update(func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketAudit)
			for _, k := range doomed {
				if err := b.Delete(k); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return total, wrap("delete audit", err)
		}
		total += len(doomed)
		if len(doomed) < sweepBatch {
			return total, nil
		}
	}
}

// SyncAudit flushes the file to disk as an audit write's commit does,
// writing nothing: a failed sign-in with an unknown email calls it so
// that it takes the time of one with a known email, whose failure is
// written to the log (no account enumeration by timing).
func (db *DB) SyncAudit() error { return db.bolt.Sync() }
