package store

import (
	bolt "go.etcd.io/bbolt"
)

// RaiseForFailures runs the alert rules for failure reports as the ingest
// commit does, in a transaction of its own, for tests of the rules that do
// not depend on how failure reports are stored.
func RaiseForFailures(db *DB, refs []FailureRef) error {
	in := db.NewIngester()
	return db.bolt.Update(func(tx *bolt.Tx) error {
		return in.raiseAlerts(tx, nil, refs, db.now())
	})
}

// DedupEntries counts the alert dedup entries, and SourceEntries the
// source index entries, for tests of the pruning.
func DedupEntries(db *DB) int  { return countBucket(db, bucketAlertDedup) }
func SourceEntries(db *DB) int { return countBucket(db, bucketAlertSources) }

func countBucket(db *DB, name []byte) int {
	n := 0
	_ = db.bolt.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(name).Stats().KeyN
		return nil
	})
	return n
}

// ReportsPendingCount counts the pending markers, which retention leaves
// only when it is interrupted.
func ReportsPendingCount(db *DB) int { return countBucket(db, bucketReportsPending) }
