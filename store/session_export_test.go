package store

import (
	"bytes"

	bolt "go.etcd.io/bbolt"
)

// CountSessions returns how many sessions key keyID has open, expired ones
// not yet swept included.
func (db *DB) CountSessions(keyID string) (int, error) {
	n := 0
	err := db.bolt.View(func(tx *bolt.Tx) error {
		prefix := []byte(keyID)
		c := tx.Bucket(bucketSessionsByKey).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			n++
		}
		return nil
	})
	return n, err
}
