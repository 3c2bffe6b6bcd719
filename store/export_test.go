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
