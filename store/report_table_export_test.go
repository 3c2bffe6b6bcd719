package store

import (
	"bytes"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store/internal/block"
	"github.com/dmarcd/dmarcd/store/internal/days"
	"github.com/dmarcd/dmarcd/store/internal/reports"
)

// ReportForms counts the forms of the stored reports' values.
type ReportForms struct {
	Full, Pointers, Tables int
}

// CheckReportTables walks bucketReports and bucketReportTables and fails
// unless they agree: every value is the full form or a pointer to a table
// that holds the report, under the report's own domain and day, decoding
// to the same report as the table's id; every table is well-formed and
// pointed at by at least one report (no orphan, no dangling pointer).
func CheckReportTables(db *DB) (ReportForms, error) {
	var f ReportForms
	err := db.bolt.View(func(tx *bolt.Tx) error {
		pointed := map[string]bool{}
		err := tx.Bucket(bucketReports).ForEach(func(k, v []byte) error {
			if !isReportPointer(v) {
				if _, _, err := reports.DecodeReport(string(k), v, true); err != nil {
					return err
				}
				f.Full++
				return nil
			}
			f.Pointers++
			key, err := pointerTableKey(v)
			if err != nil {
				return fmt.Errorf("report %s: pointer %x: %w", k, v, err)
			}
			raw := tx.Bucket(bucketReportTables).Get(key)
			if raw == nil {
				return fmt.Errorf("report %s: dangling pointer to %x", k, key)
			}
			t, err := block.DecodeTable(raw)
			if err != nil {
				return fmt.Errorf("report %s: table %x: %w", k, key, err)
			}
			bin, _ := binID(string(k))
			val, ok := t.Get(bin)
			if !ok {
				return fmt.Errorf("report %s: not in its table %x", k, key)
			}
			rep, _, err := reports.DecodeReport(string(k), val, true)
			if err != nil {
				return err
			}
			if want := blockKey(rep.DomainID, days.Of(rep.DateBegin), 0); !bytes.Equal(key[:idLen+4], want[:idLen+4]) {
				return fmt.Errorf("report %s of domain %s, day %d in table %x", k, rep.DomainID, days.Of(rep.DateBegin), key)
			}
			pointed[string(key)] = true
			return nil
		})
		if err != nil {
			return err
		}
		return tx.Bucket(bucketReportTables).ForEach(func(k, v []byte) error {
			f.Tables++
			if len(k) != blockKeyLen {
				return fmt.Errorf("report table key %x", k)
			}
			if _, err := block.DecodeTable(v); err != nil {
				return fmt.Errorf("report table %x: %w", k, err)
			}
			if !pointed[string(k)] {
				return fmt.Errorf("orphan report table %x", k)
			}
			return nil
		})
	})
	return f, err
}

// ReportTableKeys returns the keys of the report tables and of the record
// blocks.
func ReportTableKeys(db *DB) (tables, blocks []string, err error) {
	err = db.bolt.View(func(tx *bolt.Tx) error {
		_ = tx.Bucket(bucketReportTables).ForEach(func(k, _ []byte) error {
			tables = append(tables, fmt.Sprintf("%x", k))
			return nil
		})
		return tx.Bucket(bucketRecordBlocks).ForEach(func(k, _ []byte) error {
			blocks = append(blocks, fmt.Sprintf("%x", k))
			return nil
		})
	})
	return tables, blocks, err
}
