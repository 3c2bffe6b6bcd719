package store

import (
	"bytes"
	"encoding/binary"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store/internal/days"
)

// Record retention apart from report retention: DropRecordsBefore deletes
// the records (sealed blocks and unsealed rows) of reports whose
// date_begin is before a day, leaving the reports' metadata, summaries and
// every roll-up as they are, so statistics stay exact for as long as the
// reports are kept (DeleteReportsBefore). A report whose records were
// dropped says so (Report.RecordsDropped) and lists none.

// DropRecordsBefore deletes the records of the reports whose date_begin
// falls on a UTC day before day's, in transactions of bounded size, and
// returns how many reports lost their records. When exported is not nil a
// report's records are kept while exported(report id) is false (a sink
// that has not copied them yet); a sealed block is dropped only when every
// report in it may go. exported is called outside any transaction and may
// use the DB.
func (db *DB) DropRecordsBefore(day time.Time, exported func(reportID string) bool) (int, error) {
	end := days.Of(day)
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if old := meta.Get(keyRecordsDroppedBefore); len(old) == 4 && binary.BigEndian.Uint32(old) >= end {
			return nil
		}
		return meta.Put(keyRecordsDroppedBefore, binary.BigEndian.AppendUint32(nil, end))
	})
	if err != nil {
		return 0, wrap("drop old records", err)
	}
	may := func(bin [16]byte) bool { return exported == nil || exported(formatUUID(bin)) }
	n, err := db.deleteBlocksBefore(end, func(_ *bolt.Tx, h *blockHeader) bool {
		for _, e := range h.entries {
			if !may(e.report) {
				return true
			}
		}
		return false
	}, exported != nil)
	if err != nil {
		return n, wrap("drop old records", err)
	}
	// Unsealed rows of those days (sealing had not reached them).
	var after []byte
	for {
		var groups []*sealGroup
		var next []byte
		err := db.bolt.View(func(tx *bolt.Tx) error {
			var err error
			groups, next, err = scanUnsealed(tx, after, sealScanReports)
			return err
		})
		if err != nil {
			return n, wrap("drop old records", err)
		}
		for _, g := range groups {
			if g.day >= end {
				continue
			}
			for _, bin := range g.reports {
				if !may(bin) {
					continue
				}
				if err := db.dropRows(bin); err != nil {
					return n, wrap("drop old records", err)
				}
				n++
			}
		}
		if next == nil {
			return n, nil
		}
		after = next
	}
}

// dropRows deletes a visible report's rows, a bounded number per
// transaction.
func (db *DB) dropRows(bin [16]byte) error {
	for {
		done := false
		err := db.bolt.Update(func(tx *bolt.Tx) error {
			n, err := deletePrefix(tx.Bucket(bucketRecords), bin[:], discardStep)
			done = n < discardStep
			return err
		})
		if err != nil || done {
			return err
		}
	}
}

// deleteBlocksBefore deletes the sealed blocks of days before end that
// keep does not keep, a bounded number per transaction, and returns how
// many report runs went with them. keep runs inside a read transaction
// unless outside is set: then the blocks are judged between transactions
// and deleted only if unchanged.
func (db *DB) deleteBlocksBefore(end uint32, keep func(*bolt.Tx, *blockHeader) bool, outside bool) (int, error) {
	runs := 0
	var from []byte
	for {
		type victim struct {
			key, raw []byte
			h        *blockHeader
		}
		var victims []victim
		var next []byte
		err := db.bolt.View(func(tx *bolt.Tx) error {
			c := tx.Bucket(bucketRecordBlocks).Cursor()
			k, v := c.First()
			if from != nil {
				k, v = c.Seek(from)
			}
			for k != nil && len(victims) < retentionStep {
				if len(k) != blockKeyLen {
					return errCorrupt
				}
				if binary.BigEndian.Uint32(k[idLen:]) >= end {
					// The rest of this domain is newer.
					pe := prefixEnd(k[:idLen])
					if pe == nil {
						k = nil
						break
					}
					k, v = c.Seek(pe)
					continue
				}
				h, err := decodeBlockHeader(v)
				if err != nil {
					return err
				}
				if outside || !keep(tx, h) {
					victims = append(victims, victim{key: bytes.Clone(k), raw: bytes.Clone(v), h: h})
				}
				k, v = c.Next()
			}
			if k != nil {
				next = bytes.Clone(k)
			}
			return nil
		})
		if err != nil {
			return runs, err
		}
		if outside {
			kept := victims[:0]
			for _, vic := range victims {
				if !keep(nil, vic.h) {
					kept = append(kept, vic)
				}
			}
			victims = kept
		}
		err = db.bolt.Update(func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketRecordBlocks)
			for _, vic := range victims {
				if !bytes.Equal(b.Get(vic.key), vic.raw) {
					continue // rewritten meanwhile: judged at the next run
				}
				if err := b.Delete(vic.key); err != nil {
					return err
				}
				runs += len(vic.h.entries)
			}
			return nil
		})
		if err != nil || next == nil {
			return runs, err
		}
		from = next
	}
}

// recordsDropped reports whether rep's records were dropped by
// DropRecordsBefore: it had records, its day is before the drop's and
// none is left.
func recordsDropped(tx *bolt.Tx, rep *Report) (bool, error) {
	if rep.RecordCount == 0 {
		return false, nil
	}
	v := tx.Bucket(bucketMeta).Get(keyRecordsDroppedBefore)
	day := days.Of(rep.DateBegin)
	if len(v) != 4 || day >= binary.BigEndian.Uint32(v) {
		return false, nil
	}
	bin, _ := binID(rep.ID)
	if k, _ := tx.Bucket(bucketRecords).Cursor().Seek(bin[:]); k != nil && bytes.HasPrefix(k, bin[:]) {
		return false, nil
	}
	runs, err := sealedRuns(tx.Bucket(bucketRecordBlocks), rep.DomainID, day, bin)
	return err == nil && runs.total == 0, err
}
