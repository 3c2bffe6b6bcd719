package store

import (
	"bytes"
	"encoding/binary"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store/internal/days"
)

// retentionStep bounds the entities one retention transaction deletes, so
// that the single writer is never held long and ingest goes on meanwhile.
const retentionStep = 500

// DeleteReportsBefore deletes the aggregate reports whose date_end is
// before t, and the daily roll-ups of the UTC days before t's (statistics
// of those days go with them, also the share of a report kept because it
// ends after t), and returns how many reports it deleted.
// It works in transactions of bounded size: each makes up to a few hundred
// reports invisible (metadata and index entries) and marks their records
// pending, which are then deleted a block range at a time; a crash in
// between leaves pending records that DiscardPendingReports removes at the
// next start.
func (db *DB) DeleteReportsBefore(t time.Time) (int, error) {
	cutoff := unixKey(t)
	total := 0
	for {
		var gone [][16]byte
		err := db.bolt.Update(func(tx *bolt.Tx) error {
			var err error
			gone, err = hideOldReports(tx, cutoff, retentionStep)
			return err
		})
		if err != nil {
			return total, wrap("delete old reports", err)
		}
		for _, bin := range gone {
			if err := db.discardPending(bin[:]); err != nil {
				return total, wrap("delete old reports", err)
			}
		}
		total += len(gone)
		if len(gone) < retentionStep {
			break
		}
	}
	if err := db.deleteRollupsBefore(days.Of(t)); err != nil {
		return total, wrap("delete old roll-ups", err)
	}
	if total > 0 {
		if err := db.refreshIdentities(); err != nil {
			return total, wrap("delete old reports", err)
		}
	}
	return total, nil
}

// hideOldReports removes the metadata and index entries of up to max
// reports whose date_end is before cutoff (Unix seconds), marks their
// records pending, and returns their binary ids.
func hideOldReports(tx *bolt.Tx, cutoff uint64, max int) ([][16]byte, error) {
	type victim struct {
		key []byte
		id  string
	}
	var victims []victim
	byDomain := tx.Bucket(bucketReportsByDomain)
	domains := tx.Bucket(bucketDomains).Cursor()
	for dom, _ := domains.First(); dom != nil && len(victims) < max; dom, _ = domains.Next() {
		c := byDomain.Cursor()
		for k, v := c.Seek(dom); k != nil && bytes.HasPrefix(k, dom) && len(victims) < max; k, v = c.Next() {
			if len(k) != reportKeyLen {
				continue
			}
			// date_begin <= date_end: past the cutoff, no report of the
			// domain can end before it.
			if binary.BigEndian.Uint64(k[idLen:idLen+8]) >= cutoff {
				break
			}
			if indexedEnd(v) < cutoff {
				victims = append(victims, victim{key: bytes.Clone(k), id: indexedID(v)})
			}
		}
	}
	gone := make([][16]byte, 0, len(victims))
	for _, vic := range victims {
		if err := byDomain.Delete(vic.key); err != nil {
			return nil, err
		}
		if dom, err := getDomain(tx, string(vic.key[:idLen])); err == nil {
			if err := unindexOrgReport(tx, dom.OrgID, vic.key); err != nil {
				return nil, err
			}
		} else if !isKind(err, ErrNotFound) {
			return nil, err
		}
		rep, _, err := getReport(tx, vic.id, false)
		if isKind(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if err := tx.Bucket(bucketReports).Delete(idKey(rep.ID)); err != nil {
			return nil, err
		}
		bin, _ := binID(rep.ID)
		if err := tx.Bucket(bucketReportsPending).Put(bin[:], []byte(rep.DomainID)); err != nil {
			return nil, err
		}
		gone = append(gone, bin)
	}
	return gone, nil
}

// deleteRollupsBefore deletes every domain's roll-ups of days before day,
// in transactions of bounded size.
func (db *DB) deleteRollupsBefore(day uint32) error {
	for _, bucket := range [][]byte{bucketRollups, bucketSourceRollups, bucketDayTotals} {
		if err := db.deleteDayKeysBefore(bucket, day); err != nil {
			return err
		}
	}
	return nil
}

// deleteDayKeysBefore deletes the keys of bucket, each rollupKey(domain,
// day) or longer, of days before day.
func (db *DB) deleteDayKeysBefore(bucket []byte, day uint32) error {
	for {
		n := 0
		err := db.bolt.Update(func(tx *bolt.Tx) error {
			var old [][]byte
			rollups := tx.Bucket(bucket)
			domains := tx.Bucket(bucketDomains).Cursor()
			for dom, _ := domains.First(); dom != nil && len(old) < retentionStep; dom, _ = domains.Next() {
				end := rollupKey(string(dom), day)
				c := rollups.Cursor()
				for k, _ := c.Seek(dom); k != nil && bytes.Compare(k, end) < 0 && len(old) < retentionStep; k, _ = c.Next() {
					old = append(old, bytes.Clone(k))
				}
			}
			for _, k := range old {
				if err := rollups.Delete(k); err != nil {
					return err
				}
			}
			n = len(old)
			return nil
		})
		if err != nil || n < retentionStep {
			return err
		}
	}
}
