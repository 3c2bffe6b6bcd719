package store

import (
	"bytes"
	"encoding/json"
	"time"

	bolt "go.etcd.io/bbolt"
)

// sweepBatch bounds the sessions one sweep transaction deletes, so that a
// sweep never holds the write lock for long.
const sweepBatch = 1000

// SweepSessions deletes every session that has expired at now (idle or
// past its absolute lifetime), with its index entry, and returns how many
// it deleted. Sessions are otherwise deleted only when they are used after
// expiry, at sign-out or with their key; the scheduler calls this
// periodically so that abandoned sessions do not stay in the file.
func (db *DB) SweepSessions(now time.Time) (int, error) {
	total := 0
	for {
		var doomed []*sessionRecord
		var hashes [][]byte
		err := db.bolt.View(func(tx *bolt.Tx) error {
			c := tx.Bucket(bucketSessions).Cursor()
			for k, v := c.First(); k != nil && len(hashes) < sweepBatch; k, v = c.Next() {
				rec, err := decodeSessionRecord(v)
				if err != nil || rec.expired(now) {
					if rec == nil {
						rec = &sessionRecord{}
					}
					doomed, hashes = append(doomed, rec), append(hashes, bytes.Clone(k))
				}
			}
			return nil
		})
		if err != nil || len(hashes) == 0 {
			return total, wrap("sweep sessions", err)
		}
		err = db.bolt.Update(func(tx *bolt.Tx) error {
			sessions, byKey := tx.Bucket(bucketSessions), tx.Bucket(bucketSessionsByKey)
			for i, h := range hashes {
				// Read again: the session may have been used (and so
				// renewed) between the two transactions.
				raw := sessions.Get(h)
				if raw == nil {
					continue
				}
				if rec, err := decodeSessionRecord(raw); err == nil && !rec.expired(now) {
					continue
				}
				if doomed[i].KeyID != "" {
					if err := byKey.Delete(sessionByKeyKey(doomed[i].KeyID, h)); err != nil {
						return err
					}
				}
				if err := sessions.Delete(h); err != nil {
					return err
				}
				total++
			}
			return nil
		})
		if err != nil {
			return total, wrap("sweep sessions", err)
		}
		if len(hashes) < sweepBatch {
			return total, nil
		}
	}
}

// decodeSessionRecord reads a stored session.
func decodeSessionRecord(raw []byte) (*sessionRecord, error) {
	rec := new(sessionRecord)
	if err := json.Unmarshal(raw, rec); err != nil {
		return nil, err
	}
	return rec, nil
}
