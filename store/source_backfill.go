package store

import (
	"bytes"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store/internal/days"
	"github.com/dmarcd/dmarcd/store/internal/reports"
)

// Backfill of the per-source roll-ups (source.go) for reports
// stored before they existed (schema migration 1 -> 2) or before they kept
// the evidence of who sends (7 -> 8). The migration (migrateSourceRollups)
// empties the source roll-ups, which a development version may have kept
// for part of the reports only, or kept in an older layout, and records in
// the meta bucket the last report stored; Open then reads every report up to it, in transactions
// of about backfillRecords records, and writes their roll-ups exactly as
// ingest would (queuing their sources for reverse DNS too). The position
// reached is saved with each transaction, so an interrupted backfill
// resumes where it stopped at the next Open. Reports ingested afterwards
// have later ids and their own roll-ups.

// Keys in bucketMeta of a backfill under way: the id of the last report to
// backfill, and of the last one done.
var (
	keySourceBackfillUntil = []byte("source_backfill_until")
	keySourceBackfillAfter = []byte("source_backfill_after")
)

// backfillRecords is about how many records one backfill transaction reads
// (a report is never split).
const backfillRecords = 50_000

// migrateSourceRollups is migrations 1 -> 2 and 7 -> 8: it schedules the
// backfill.
func migrateSourceRollups(tx *bolt.Tx) error {
	for _, name := range [][]byte{bucketSourceRollups, bucketRDNSPending} {
		if err := tx.DeleteBucket(name); err != nil {
			return err
		}
		if _, err := tx.CreateBucket(name); err != nil {
			return err
		}
	}
	meta := tx.Bucket(bucketMeta)
	if err := meta.Delete(keySourceBackfillAfter); err != nil {
		return err
	}
	last, _ := tx.Bucket(bucketReports).Cursor().Last()
	if last == nil {
		return meta.Delete(keySourceBackfillUntil)
	}
	return meta.Put(keySourceBackfillUntil, bytes.Clone(last))
}

// backfillSourceRollups runs the backfill scheduled by the migration, if
// any, to its end, and returns how many reports it read.
func (db *DB) backfillSourceRollups(maxRecords int) (int, error) {
	total := 0
	for {
		done := false
		n := 0
		err := db.bolt.Update(func(tx *bolt.Tx) error {
			var err error
			n, done, err = backfillStep(tx, maxRecords)
			return err
		})
		total += n
		if err != nil {
			return total, wrap("backfill source roll-ups", err)
		}
		if done {
			return total, nil
		}
	}
}

// backfillStep backfills the reports after the saved position, stopping
// after the report that reaches maxRecords records, and saves the
// position; done when no report is left.
func backfillStep(tx *bolt.Tx, maxRecords int) (nreports int, done bool, err error) {
	meta := tx.Bucket(bucketMeta)
	until := meta.Get(keySourceBackfillUntil)
	if until == nil {
		return 0, true, nil
	}
	c := tx.Bucket(bucketReports).Cursor()
	var k, v []byte
	if after := meta.Get(keySourceBackfillAfter); after != nil {
		if k, v = c.Seek(after); bytes.Equal(k, after) {
			k, v = c.Next()
		}
	} else {
		k, v = c.First()
	}
	records := tx.Bucket(bucketRecords)
	sources := newSourceRollups()
	var tables tableCache
	var last []byte
	read := 0
	for ; k != nil && bytes.Compare(k, until) <= 0 && read < maxRecords; k, v = c.Next() {
		if isReportPointer(v) {
			if v, err = reportValue(tx, &tables, string(k)); err != nil {
				return 0, false, err
			}
		}
		rep, _, err := reports.DecodeReport(string(k), v, false)
		if err != nil {
			return 0, false, fmt.Errorf("report %s: %w", k, err)
		}
		bin, ok := binID(rep.ID)
		if !ok {
			return 0, false, fmt.Errorf("report id %q: %w", k, errCorrupt)
		}
		var src reports.Sources
		rc := records.Cursor()
		for bk, bv := rc.Seek(bin[:]); bk != nil && bytes.HasPrefix(bk, bin[:]); bk, bv = rc.Next() {
			if err := reports.DecodeBlock(bv, func(r *Record) error {
				src.Add(r)
				read++
				return nil
			}); err != nil {
				return 0, false, fmt.Errorf("record block %x: %w", bk, err)
			}
		}
		src.Compact()
		sources.addEntries(rep.DomainID, days.Of(rep.DateBegin), src.Encode(rep.DateBegin, rep.DateEnd))
		last = k
		nreports++
	}
	if err := sources.put(tx); err != nil {
		return 0, false, err
	}
	if k == nil || bytes.Compare(k, until) > 0 {
		return nreports, true, errors.Join(meta.Delete(keySourceBackfillUntil), meta.Delete(keySourceBackfillAfter))
	}
	return nreports, false, meta.Put(keySourceBackfillAfter, bytes.Clone(last))
}
