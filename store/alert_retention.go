package store

import (
	"bytes"
	"encoding/binary"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store/internal/days"
)

// DeleteAlertsBefore deletes the alerts created before t, whatever their
// status, in transactions of bounded size, and returns how many it
// deleted.
func (db *DB) DeleteAlertsBefore(t time.Time) (int, error) {
	total := 0
	for {
		n := 0
		err := db.bolt.Update(func(tx *bolt.Tx) error {
			var old []*alertRecord
			err := tx.Bucket(bucketOrgs).ForEach(func(org, _ []byte) error {
				prefix := orgPrefix(string(org))
				end := orgTimeIDKey(string(org), t, "")
				c := tx.Bucket(bucketAlertsByOrg).Cursor()
				for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && bytes.Compare(k, end) < 0 && len(old) < retentionStep; k, _ = c.Next() {
					rec, err := getAlert(tx, idFromOrgTimeIDKey(k))
					if err != nil {
						return err
					}
					old = append(old, rec)
				}
				return nil
			})
			if err != nil {
				return err
			}
			for _, rec := range old {
				if err := removeAlert(tx, rec); err != nil {
					return err
				}
			}
			n = len(old)
			return nil
		})
		total += n
		if err != nil {
			return total, wrap("delete old alerts", err)
		}
		if n < retentionStep {
			return total, nil
		}
	}
}

// PruneAlertState forgets what the rules no longer need: dedup entries of
// days before yesterday (a day's dedup matters only that day), and the
// source sets of days no report's window reaches any more. It works in
// transactions of bounded size and returns how many entries it deleted.
func (db *DB) PruneAlertState(now time.Time) (int, error) {
	const step = retentionStep
	today := days.Of(now)
	total := 0
	// Dedup keys start with their day: delete from the first key up to
	// yesterday's.
	limit := dedupKey(today-min(today, 1), "", "", "")[:4]
	for {
		n := 0
		err := db.bolt.Update(func(tx *bolt.Tx) error {
			c := tx.Bucket(bucketAlertDedup).Cursor()
			for k, _ := c.First(); k != nil && bytes.Compare(k[:min(len(k), 4)], limit) < 0 && n < step; k, _ = c.First() {
				if err := c.Delete(); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		total += n
		if err != nil || n < step {
			if err != nil {
				return total, wrap("prune alert dedup", err)
			}
			break
		}
	}
	// A report of day D looks at the sets of D-window .. D, and reports
	// are of yesterday or today: older sets serve no one.
	window := uint32(db.AlertRules().NewSourceDays) + 1
	if today <= window {
		return total, nil
	}
	oldest := today - window
	var after []byte
	for {
		// Look in a read transaction, so that a large index is scanned
		// without holding the writer; delete in a short write.
		var stale [][]byte
		var next []byte
		err := db.bolt.View(func(tx *bolt.Tx) error {
			c := tx.Bucket(bucketAlertSources).Cursor()
			k, _ := c.First()
			if after != nil {
				k, _ = c.Seek(after)
			}
			for ; k != nil; k, _ = c.Next() {
				if len(stale) == step {
					next = bytes.Clone(k)
					break
				}
				if len(k) != idLen+4 || binary.BigEndian.Uint32(k[idLen:]) < oldest {
					stale = append(stale, bytes.Clone(k))
				}
			}
			return nil
		})
		n := 0
		if err == nil && len(stale) > 0 {
			err = db.bolt.Update(func(tx *bolt.Tx) error {
				b := tx.Bucket(bucketAlertSources)
				for _, k := range stale {
					if b.Get(k) == nil {
						continue
					}
					if err := b.Delete(k); err != nil {
						return err
					}
					n++
				}
				return nil
			})
		}
		total += n
		if err != nil {
			return total, wrap("prune alert sources", err)
		}
		if next == nil {
			return total, nil
		}
		after = next
	}
}
