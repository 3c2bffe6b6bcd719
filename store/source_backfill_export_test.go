package store

import bolt "go.etcd.io/bbolt"

// MakeOldFile turns the file into what a version before the per-source
// roll-ups left: schema version 1, and (unless keepRollups, a development
// version's file with roll-ups for some reports) no source roll-ups.
func MakeOldFile(db *DB, keepRollups bool) error {
	return db.bolt.Update(func(tx *bolt.Tx) error {
		if !keepRollups {
			for _, name := range [][]byte{bucketSourceRollups, bucketRDNSPending} {
				if err := tx.DeleteBucket(name); err != nil {
					return err
				}
				if _, err := tx.CreateBucket(name); err != nil {
					return err
				}
			}
		}
		return PutSchemaVersion(tx, 1)
	})
}

// BackfillSteps runs the source roll-up migration on an open file and
// then only steps backfill transactions of maxRecords records each, as
// an Open interrupted after them would have; it returns the reports read.
func BackfillSteps(db *DB, steps, maxRecords int) (int, error) {
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		if err := migrateSourceRollups(tx); err != nil {
			return err
		}
		return PutSchemaVersion(tx, SchemaVersion)
	})
	if err != nil {
		return 0, err
	}
	total := 0
	for range steps {
		err := db.bolt.Update(func(tx *bolt.Tx) error {
			n, _, err := backfillStep(tx, maxRecords)
			total += n
			return err
		})
		if err != nil {
			return total, err
		}
	}
	return total, nil
}
