package store

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// SchemaVersion is the layout this program reads and writes. It is stored in
// the meta bucket under "schema_version" and equals len(migrations).
const SchemaVersion = 10

// A migration moves the file from version i to i+1, where i is its index in
// the migrations slice. It runs inside Open's write transaction, after every
// bucket of allBuckets exists.
type migration func(tx *bolt.Tx) error

// migrations is indexed by the version a migration starts from. To change
// stored data: append a func and bump SchemaVersion.
var migrations = []migration{
	// 0 -> 1: the initial layout; its buckets come from ensureBuckets.
	func(*bolt.Tx) error { return nil },
	// 1 -> 2: per-source roll-ups for the reports stored before them
	// (source_backfill.go); Open backfills them after the migration.
	migrateSourceRollups,
	// 2 -> 3: the organization index of aggregate reports and its counts
	// (report_org_index.go), built from the domain index.
	migrateOrgReportIndex,
	// 3 -> 4: the compact day totals of every roll-up (day_totals.go).
	migrateDayTotals,
	// 4 -> 5: per-source segments may be written in version 2
	// (store/internal/reports/source_codec.go), which programs of schema
	// 4 cannot read; those of version 1 stay as they are. Nothing to
	// rewrite: the bump makes an older dmarcd refuse the file instead of
	// failing on its segments.
	func(*bolt.Tx) error { return nil },
	// 5 -> 6: the dedup index by identity goes: the date index keys carry
	// the identity, and an in-memory filter stands in for the index
	// (identity_filter.go).
	dropIdentityIndex,
	// 6 -> 7: failure reports may be written in version 2
	// (reports/failure_codec.go: the Auth-Failure values as reported, the
	// identity of a report without Arrival-Date), which programs of schema
	// 6 cannot read; version 1 values stay as they are and read as before.
	// Nothing to rewrite: the bump makes an older dmarcd refuse the file.
	func(*bolt.Tx) error { return nil },
	// 7 -> 8: per-source evidence (source_codec.go, version 3): the DKIM
	// and SPF domains of each source with their messages and passes, which
	// name senders; rebuilt from the records by the backfill of 1 -> 2.
	migrateSourceRollups,
	// 8 -> 9: sealed record blocks (record_block.go). Nothing to rewrite
	// here: schema 8's records are the write form of schema 9, which the
	// sealing job moves into blocks day by day, one transaction per block,
	// while every read merges both forms (record_seal.go). The bump makes
	// an older dmarcd, which would not see sealed records, refuse the file.
	func(*bolt.Tx) error { return nil },
	// 9 -> 10: smaller indexes and roll-ups (issue 25). The organization
	// index goes: the listing merges the domains' date indexes
	// (report_org_index.go). New date index values hold the report id in
	// binary (report.go); sealed days keep their roll-ups compressed and
	// their reports' metadata in compressed report tables. Nothing else
	// is rewritten: every read takes both forms, and the sealing job
	// converts closed days as it goes. The bump makes an older dmarcd,
	// which would miss the index and misread the new forms, refuse the
	// file.
	dropOrgReportIndex,
}

// dropIdentityIndex deletes schema 5's dedup index, whose inserts, one
// random page per report, were most of what a commit of small reports
// wrote.
func dropIdentityIndex(tx *bolt.Tx) error {
	if tx.Bucket(bucketReportsByIdentity) == nil {
		return nil
	}
	return tx.DeleteBucket(bucketReportsByIdentity)
}

// upgrade creates missing buckets and runs the migrations the file lacks.
func upgrade(tx *bolt.Tx, migs []migration) error {
	// Refuse to scribble buckets into some other program's bolt file.
	if first, _ := tx.Cursor().First(); first != nil && tx.Bucket(bucketMeta) == nil {
		return errorf(ErrInvalid, "not a dmarcd database: no meta bucket")
	}
	for _, name := range allBuckets {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return fmt.Errorf("create bucket %s: %w", name, err)
		}
	}
	v, err := readVersion(tx)
	if err != nil {
		return err
	}
	if v > len(migs) {
		return errorf(ErrInvalid, "database schema version %d is newer than this program supports (%d)", v, len(migs))
	}
	for i := v; i < len(migs); i++ {
		if err := migs[i](tx); err != nil {
			return fmt.Errorf("migrate schema %d to %d: %w", i, i+1, err)
		}
	}
	if v == len(migs) {
		return nil
	}
	return tx.Bucket(bucketMeta).Put(keySchemaVersion, versionValue(len(migs)))
}

// checkReadable reports why a read-only transaction cannot serve this program:
// nothing may be created or migrated in that mode.
func checkReadable(tx *bolt.Tx, want int) error {
	v, err := readVersion(tx)
	if err != nil {
		return err
	}
	if v != want {
		return errorf(ErrInvalid, "database schema version %d, this program needs %d: open it read-write once to upgrade", v, want)
	}
	for _, name := range allBuckets {
		if tx.Bucket(name) == nil {
			return errorf(ErrInvalid, "database lacks bucket %s: open it read-write once to upgrade", name)
		}
	}
	return nil
}

// readVersion returns the stored schema version, 0 for a file that has a
// meta bucket but no version yet. A file without a meta bucket is not a
// dmarcd database.
func readVersion(tx *bolt.Tx) (int, error) {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return 0, errorf(ErrInvalid, "not a dmarcd database: no meta bucket")
	}
	raw := meta.Get(keySchemaVersion)
	if raw == nil {
		return 0, nil
	}
	if len(raw) != 8 {
		return 0, errorf(ErrInvalid, "not a dmarcd database: malformed schema version")
	}
	v := binary.BigEndian.Uint64(raw)
	if v > 1<<31 {
		return 0, errorf(ErrInvalid, "not a dmarcd database: schema version %d out of range", v)
	}
	return int(v), nil
}
