package store

import bolt "go.etcd.io/bbolt"

// BoltOf returns db's bbolt handle, for the external tests that look at
// or damage the file's buckets directly.
func BoltOf(db *DB) *bolt.DB { return db.bolt }

// SchemaVersionOf returns the schema version stored in the file.
func SchemaVersionOf(db *DB) (int, error) {
	var v int
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		v, err = readVersion(tx)
		return err
	})
	return v, err
}
