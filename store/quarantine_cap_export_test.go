package store

import bolt "go.etcd.io/bbolt"

// QuarantineBytes returns the count of bytes the quarantine keeps in all,
// as putQuarantine and deleteQuarantine maintain it.
func (db *DB) QuarantineBytes() (int64, error) {
	var n int64
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		n, err = quarantineBytes(tx)
		return err
	})
	return n, err
}
