package store

import bolt "go.etcd.io/bbolt"

// Migration and OpenWithMigrations let the external tests run Open with a
// migration list of their own, to exercise the hook.
type Migration = migration

// Migrations returns a copy of the built-in migration list.
func Migrations() []Migration { return append([]Migration(nil), migrations...) }

// OpenWithMigrations is Open with migs in place of the built-in migrations.
func OpenWithMigrations(path string, opts *Options, migs []Migration) (*DB, error) {
	return open(path, opts, migs)
}

// MetaBucket is the name of the meta bucket, for tests that build files by hand.
var MetaBucket = bucketMeta

// PutSchemaVersion stores v as the schema version, for tests that fake files.
func PutSchemaVersion(tx *bolt.Tx, v int) error {
	return tx.Bucket(bucketMeta).Put(keySchemaVersion, versionValue(v))
}

// RecordsStored counts the records stored for each report id, in rows and
// sealed blocks together, straight from the buckets: a record kept in both
// forms counts twice.
func RecordsStored(db *DB) (rows, sealed map[string]int, err error) {
	rows, sealed = map[string]int{}, map[string]int{}
	err = db.bolt.View(func(tx *bolt.Tx) error {
		err := tx.Bucket(bucketRecords).ForEach(func(k, v []byte) error {
			n, err := rowRecords(v)
			var bin [16]byte
			copy(bin[:], k)
			rows[formatUUID(bin)] += n
			return err
		})
		if err != nil {
			return err
		}
		return tx.Bucket(bucketRecordBlocks).ForEach(func(k, v []byte) error {
			h, err := decodeBlockHeader(v)
			if err != nil {
				return err
			}
			if _, err := h.decode(); err != nil {
				return err
			}
			for _, e := range h.entries {
				sealed[formatUUID(e.report)] += int(e.count)
			}
			return nil
		})
	})
	return rows, sealed, err
}

// BucketBytes returns, per top-level bucket, its allocated bytes, the
// bytes in use and its keys (bbolt's bucket stats).
func BucketBytes(db *DB) (map[string][3]int, error) {
	out := map[string][3]int{}
	err := db.bolt.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			st := b.Stats()
			out[string(name)] = [3]int{st.LeafAlloc + st.BranchAlloc, st.LeafInuse + st.BranchInuse, st.KeyN}
			return nil
		})
	})
	return out, err
}
