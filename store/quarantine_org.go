package store

import (
	bolt "go.etcd.io/bbolt"
)

// The quarantine as an organization sees it (API.md "Quarantine"): the
// entries whose recipient (SMTP) or import belongs to it. An entry of no
// organization is not found by these methods: only the CLI sees it.
// Entries are few (capped, deleted after a retention period), so a list
// reads them all rather than keeping an index per organization.

// ListQuarantineOf returns one page of org's quarantine entries, newest
// first, and how many it has. ErrInvalid for a page or limit below 1.
func (db *DB) ListQuarantineOf(orgID string, p Page) ([]*QuarantineEntry, int, error) {
	skip, err := p.offset()
	if err != nil {
		return nil, 0, err
	}
	entries := []*QuarantineEntry{}
	total := 0
	if !ValidID(orgID) {
		return entries, 0, nil
	}
	err = db.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketQuarantine).Cursor()
		for k, v := c.Last(); k != nil; k, v = c.Prev() {
			rec, err := decodeQuarantine(k, v)
			if err != nil {
				return err
			}
			if rec.OrgID != orgID {
				continue
			}
			if total >= skip && len(entries) < p.Limit {
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

// FindQuarantineOf returns org's entry id and a copy of its bytes.
// ErrNotFound when there is no such entry or it is not org's.
func (db *DB) FindQuarantineOf(orgID, id string) (*QuarantineEntry, []byte, error) {
	return db.findQuarantine(id, func(tx *bolt.Tx, id string) (*quarantineRecord, error) {
		return getQuarantineOf(tx, orgID, id)
	})
}

// DeleteQuarantineOf removes org's entry id and its bytes. ErrNotFound
// when there is no such entry or it is not org's.
func (db *DB) DeleteQuarantineOf(orgID, id string) error {
	return db.deleteQuarantineSeen(id, func(tx *bolt.Tx, id string) (*quarantineRecord, error) {
		return getQuarantineOf(tx, orgID, id)
	})
}

func getQuarantineOf(tx *bolt.Tx, orgID, id string) (*quarantineRecord, error) {
	rec, err := getQuarantine(tx, id)
	if err != nil {
		return nil, err
	}
	if orgID == "" || rec.OrgID != orgID {
		return nil, errQuarantineNotFound()
	}
	return rec, nil
}
