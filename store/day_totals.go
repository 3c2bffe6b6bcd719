package store

import (
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store/internal/codec"
	"github.com/dmarcd/dmarcd/store/internal/reports"
)

// The compact per-domain-day totals the overview reads.
//
// bucketDayTotals: rollupKey(domain id, UTC day) -> the head of that day's
// roll-up (version, reports, messages, DMARC pass, DMARC fail; the bytes
// reports.AppendDayRollup writes first), so eachRollupTotals reads a few bytes per
// day from densely packed pages instead of the start of every large roll-up
// (a cold overview of 1,000 domains x 30 days at 333 records a report paid
// one page fault per roll-up). It is written with the roll-up (putRollup),
// deleted with it (domain deletion, retention) and built for existing files
// by migration 3 -> 4.

// rollupHead returns the head of an encoded roll-up: its version byte and
// the four totals that follow it. A sealed roll-up has the same head
// under its own version byte: the copy takes the plain one's.
func rollupHead(raw []byte) ([]byte, error) {
	d := codec.NewDec(raw)
	if v := d.Byte(); v != codecVersion && !reports.DayRollupSealed(raw) {
		return nil, errCorrupt
	}
	for range 4 {
		d.Varint()
	}
	if !d.Ok() {
		return nil, errCorrupt
	}
	return append([]byte{codecVersion}, raw[1:len(raw)-d.Len()]...), nil
}

// putDayTotals stores the totals of the roll-up raw stored under key.
func putDayTotals(tx *bolt.Tx, key, raw []byte) error {
	head, err := rollupHead(raw)
	if err != nil {
		return fmt.Errorf("roll-up %x: %w", key, err)
	}
	return tx.Bucket(bucketDayTotals).Put(key, head)
}

// migrateDayTotals is migration 3 -> 4: it builds the day totals of every
// stored roll-up, in Open's transaction.
func migrateDayTotals(tx *bolt.Tx) error {
	if err := tx.DeleteBucket(bucketDayTotals); err != nil {
		return err
	}
	if _, err := tx.CreateBucket(bucketDayTotals); err != nil {
		return err
	}
	return tx.Bucket(bucketRollups).ForEach(func(k, v []byte) error {
		return putDayTotals(tx, k, v)
	})
}
