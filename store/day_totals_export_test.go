package store

import (
	"bytes"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// CheckDayTotals returns how many day totals the file holds, and an error
// when they are not exactly the heads of the stored roll-ups, key for key.
func (db *DB) CheckDayTotals() (int, error) {
	n := 0
	err := db.bolt.View(func(tx *bolt.Tx) error {
		totals := tx.Bucket(bucketDayTotals)
		rollups := tx.Bucket(bucketRollups)
		if totals.Stats().KeyN != rollups.Stats().KeyN {
			return fmt.Errorf("%d day totals, %d roll-ups", totals.Stats().KeyN, rollups.Stats().KeyN)
		}
		return rollups.ForEach(func(k, v []byte) error {
			head, err := rollupHead(v)
			if err != nil {
				return err
			}
			if got := totals.Get(k); !bytes.Equal(got, head) {
				return fmt.Errorf("day totals of %x: %x, roll-up head %x", k, got, head)
			}
			n++
			return nil
		})
	})
	return n, err
}
