package store

import (
	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/alert"
)

// DNSCheck is the outcome of one DNS change check of a domain, as package
// worker saw it and package alert judged it (alert.ClassifyDNSChange).
type DNSCheck struct {
	DomainID string
	// Seen is the Domain.LastDNSRecord the check compared with: the write
	// happens only while the domain still has it.
	Seen string
	// Record is what to remember as the domain's LastDNSRecord.
	Record string
	// Alert, when set, is raised for the domain, created now.
	Alert *alert.Candidate
	// Deactivate sets an active domain inactive (the reporting address is
	// no longer published).
	Deactivate bool
}

// RecordDNSCheck stores the outcome of a DNS change check in one
// transaction: the domain's LastDNSRecord, its status, and the alert, and
// returns the alert as stored (nil when none). Errors: ErrNotFound when the
// domain is gone; ErrConflict when its LastDNSRecord is no longer c.Seen (a
// concurrent check got there first: nothing is written); ErrInvalid for a
// malformed alert.
func (db *DB) RecordDNSCheck(c DNSCheck) (*Alert, error) {
	dom, err := db.FindDomainByID(c.DomainID)
	if err != nil {
		return nil, err
	}
	var raised *Alert
	now := db.now()
	err = db.domainVersions.changing(dom.OrgID, func() error {
		return db.bolt.Update(func(tx *bolt.Tx) error {
			rec, err := getDomain(tx, c.DomainID)
			if err != nil {
				return err
			}
			if rec.LastDNSRecord != c.Seen {
				return errorf(ErrConflict, "the domain's DNS record changed during the check")
			}
			rec.LastDNSRecord = c.Record
			if c.Deactivate && rec.Status == DomainActive {
				rec.Status = DomainInactive
			}
			if err := putDomain(tx, rec); err != nil {
				return err
			}
			if c.Alert == nil {
				return nil
			}
			a, err := alertOf(c.Alert, rec.OrgID, rec.ID, now)
			if err != nil {
				return err
			}
			if err := db.raiseAlert(tx, a); err != nil {
				return err
			}
			raised = a
			return nil
		})
	})
	if err != nil {
		return nil, wrap("record DNS check", err)
	}
	return raised, nil
}

// DomainIDs returns the id of every domain of every organization, in id
// order (creation order). It reads keys only, so it stays cheap with many
// domains: the DNS change detection spreads its checks by this order.
func (db *DB) DomainIDs() ([]string, error) {
	var ids []string
	err := db.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketDomains).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			ids = append(ids, string(k))
		}
		return nil
	})
	if err != nil {
		return nil, wrap("list domain ids", err)
	}
	return ids, nil
}
