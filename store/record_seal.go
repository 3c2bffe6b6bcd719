package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store/internal/block"
	"github.com/dmarcd/dmarcd/store/internal/days"
	"github.com/dmarcd/dmarcd/store/internal/reports"
)

// Sealing moves records from their write form (bucketRecords: rows of up
// to 64 records under each report's binary id, written by the ingest
// commit) into sealed blocks (record_block.go), grouped by domain and the
// UTC day of the report's date_begin.
//
// A group is sealed when its day is closed (the day started more than
// SealOptions.DayAge ago and no report of it arrived within Quiet), or
// when it holds sealBlockRecords records or more, whatever its day. Each
// block is one bbolt transaction: it writes the block and deletes the rows
// it took, so a crash leaves every record either in a row or in a block,
// never both and never neither. Readers merge the two forms (a report's
// sealed runs come first, its rows after: sealing takes a report's rows
// from its first), so sealing is invisible to them.

// Sealing defaults.
const (
	// DefaultSealDayAge: a day is closed once it started 36 hours ago
	// (reporters send a day's reports within a day of its end).
	DefaultSealDayAge = 36 * time.Hour
	// DefaultSealQuiet: ... and no report for it arrived for 5 minutes.
	DefaultSealQuiet = 5 * time.Minute
)

// A sealed block holds about sealBlockRecords records (whole rows: a block
// may exceed it by a row) and at most about sealBlockBytes of encoded
// records: large enough for the compression to find the repetitions, small
// enough that a report's detail decompresses little it does not show.
const (
	sealBlockRecords = 16384
	sealBlockBytes   = 4 << 20
)

// sealScanReports bounds the unsealed reports one scan collects, so a
// migrated file of millions of reports is sealed in bounded memory.
const sealScanReports = 100_000

// SealOptions say which unsealed records SealRecords seals.
type SealOptions struct {
	// Now is the time the rules are checked at; zero means the DB's clock.
	Now time.Time
	// DayAge and Quiet make a day closed (zero: the defaults).
	DayAge, Quiet time.Duration
	// All seals every stored report's records, closed day or not (dmarcd
	// compact, tests).
	All bool
	// Progress, when set, is called after every block with the figures
	// so far.
	Progress func(SealStats)
}

// SealStats count what SealRecords did.
type SealStats struct {
	Blocks  int // blocks written
	Reports int // report runs sealed (a report across blocks counts per block)
	Records int // records sealed
	// Open is the number of stored reports whose records stay unsealed
	// (their day is not closed yet).
	Open int
}

// SealRecords seals the records of closed days (see SealOptions) into
// blocks, one transaction per block, and returns what it did. It stops
// between blocks when ctx is done. Reads see the same records before,
// during and after.
func (db *DB) SealRecords(ctx context.Context, o SealOptions) (SealStats, error) {
	if o.Now.IsZero() {
		o.Now = db.now()
	}
	st, err := sealRecords(ctx, db.bolt, o)
	return st, wrap("seal records", err)
}

// sealGroup is the unsealed reports of one domain and day.
type sealGroup struct {
	domainID string
	day      uint32
	reports  [][16]byte
	records  int
	newest   time.Time
}

func (g *sealGroup) due(o *SealOptions) bool {
	dayAge, quiet := o.DayAge, o.Quiet
	if dayAge <= 0 {
		dayAge = DefaultSealDayAge
	}
	if quiet <= 0 {
		quiet = DefaultSealQuiet
	}
	switch {
	case o.All || g.records >= sealBlockRecords:
		return true
	default:
		return !days.Start(g.day).Add(dayAge).After(o.Now) && !g.newest.Add(quiet).After(o.Now)
	}
}

func sealRecords(ctx context.Context, bdb *bolt.DB, o SealOptions) (SealStats, error) {
	var st SealStats
	var after []byte
	for {
		var groups []*sealGroup
		var next []byte
		err := bdb.View(func(tx *bolt.Tx) error {
			var err error
			groups, next, err = scanUnsealed(tx, after, sealScanReports)
			return err
		})
		if err != nil {
			return st, err
		}
		for _, g := range groups {
			if !g.due(&o) {
				st.Open += len(g.reports)
				continue
			}
			for len(g.reports) > 0 {
				if err := ctx.Err(); err != nil {
					return st, err
				}
				var took int
				var bst SealStats
				err := bdb.Update(func(tx *bolt.Tx) error {
					var err error
					took, bst, err = sealBlock(tx, g)
					return err
				})
				if err != nil {
					return st, err
				}
				g.reports = g.reports[took:]
				st.Blocks += bst.Blocks
				st.Reports += bst.Reports
				st.Records += bst.Records
				if bst.Blocks > 0 && o.Progress != nil {
					o.Progress(st)
				}
			}
			if err := sealGroupRollups(bdb, g, &o); err != nil {
				return st, err
			}
		}
		if next == nil {
			if o.All {
				return st, sealAllRollups(ctx, bdb)
			}
			return st, nil
		}
		after = next
	}
}

// scanUnsealed groups the visible reports with rows in bucketRecords, from
// the first report id at or after after, up to max reports; next is where
// the following scan starts, nil at the end. Reports still pending (not
// visible) are left alone: their commit, or their discard, decides.
func scanUnsealed(tx *bolt.Tx, after []byte, max int) ([]*sealGroup, []byte, error) {
	byKey := map[string]*sealGroup{}
	// A report in the table form still has rows only while a report
	// larger than a block is sealed: few, so a cache of the scan's own.
	var tables tableCache
	c := tx.Bucket(bucketRecords).Cursor()
	n := 0
	var k []byte
	if after == nil {
		k, _ = c.First()
	} else {
		k, _ = c.Seek(after)
	}
	for k != nil {
		if len(k) != 20 {
			return nil, nil, fmt.Errorf("record row key %x: %w", k, errCorrupt)
		}
		var bin [16]byte
		copy(bin[:], k)
		end := prefixEnd(bin[:])
		id := formatUUID(bin)
		raw, err := reportValue(tx, &tables, id)
		if err != nil {
			return nil, nil, err
		}
		if raw != nil {
			rep, _, err := reports.DecodeReport(id, raw, false)
			if err != nil {
				return nil, nil, err
			}
			day := days.Of(rep.DateBegin)
			gk := string(blockKey(rep.DomainID, day, 0))
			g := byKey[gk]
			if g == nil {
				g = &sealGroup{domainID: rep.DomainID, day: day}
				byKey[gk] = g
			}
			g.reports = append(g.reports, bin)
			g.records += rep.RecordCount
			if rep.ReceivedAt.After(g.newest) {
				g.newest = rep.ReceivedAt
			}
			n++
		}
		if end == nil {
			break
		}
		if k, _ = c.Seek(end); n >= max && k != nil {
			return sortGroups(byKey), bytes.Clone(end), nil
		}
	}
	return sortGroups(byKey), nil, nil
}

// sortGroups orders groups by domain and day, for a deterministic layout.
func sortGroups(m map[string]*sealGroup) []*sealGroup {
	out := make([]*sealGroup, 0, len(m))
	for _, g := range m {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].domainID != out[j].domainID {
			return out[i].domainID < out[j].domainID
		}
		return out[i].day < out[j].day
	})
	return out
}

// sealBlock writes one block of g's reports, from the first, taking their
// rows out of bucketRecords, and returns how many of g.reports it is done
// with (a report whose rows did not all fit stays first for the next
// block). A report gone meanwhile (retention, its domain deleted) or
// without rows any more is skipped.
func sealBlock(tx *bolt.Tx, g *sealGroup) (int, SealStats, error) {
	var st SealStats
	rowsB := tx.Bucket(bucketRecords)
	reps := tx.Bucket(bucketReports)
	blocks := tx.Bucket(bucketRecordBlocks)
	if v := tx.Bucket(bucketMeta).Get(keyRecordsDroppedBefore); len(v) == 4 && g.day < binary.BigEndian.Uint32(v) {
		// Records of this day are being dropped (DropRecordsBefore):
		// left to it, even those a gate keeps for now.
		return len(g.reports), st, nil
	}
	var entries []blockEntry
	var rows []block.Row
	bodyBytes := 0
	var dels [][]byte
	total, done := 0, 0
	full := false
	for done < len(g.reports) && !full {
		bin := g.reports[done]
		if reps.Get(idKey(formatUUID(bin))) == nil {
			done++
			continue
		}
		c := rowsB.Cursor()
		k, v := c.Seek(bin[:])
		if k == nil || !bytes.HasPrefix(k, bin[:]) {
			done++
			continue
		}
		first := uint32(0)
		if binary.BigEndian.Uint32(k[16:]) != 0 {
			// Part of the report is sealed already (a report larger than
			// a block): this run follows those.
			runs, err := sealedRuns(blocks, g.domainID, g.day, bin)
			if err != nil {
				return 0, st, err
			}
			first = uint32(runs.total)
		}
		n := 0
		entry := uint32(len(entries))
		for ; k != nil && bytes.HasPrefix(k, bin[:]); k, v = c.Next() {
			if total+n >= sealBlockRecords || bodyBytes >= sealBlockBytes {
				full = true
				break
			}
			err := reports.DecodeBlock(v, func(r *Record) error {
				rows = append(rows, block.Row{Report: entry, Index: first + uint32(n), Rec: *r})
				n++
				return nil
			})
			if err != nil {
				return 0, st, fmt.Errorf("record row %x: %w", k, err)
			}
			bodyBytes += len(v)
			dels = append(dels, bytes.Clone(k))
		}
		if n == 0 {
			break
		}
		entries = append(entries, blockEntry{report: bin, first: first, count: uint32(n)})
		total += n
		if !full {
			done++
		}
	}
	if len(entries) == 0 {
		return done, st, nil
	}
	// The next seq after the day's blocks and report tables: a table
	// outlives its block when record retention drops the block.
	seq := uint32(0)
	prefix := blockKey(g.domainID, g.day, 0)[:idLen+4]
	for _, b := range []*bolt.Bucket{blocks, tx.Bucket(bucketReportTables)} {
		if last := lastWithPrefix(b.Cursor(), prefix); last != nil {
			seq = max(seq, binary.BigEndian.Uint32(last[idLen+4:])+1)
		}
	}
	val, err := encodeBlock(entries, rows)
	if err != nil {
		return 0, st, err
	}
	key := blockKey(g.domainID, g.day, seq)
	if err := blocks.Put(key, val); err != nil {
		return 0, st, err
	}
	// The values of the reports whose first records are here move to the
	// block's report table (report_table.go), in this transaction.
	var firsts [][16]byte
	for _, e := range entries {
		if e.first == 0 {
			firsts = append(firsts, e.report)
		}
	}
	if err := putReportTable(tx, key, g.domainID, g.day, seq, firsts); err != nil {
		return 0, st, err
	}
	for _, k := range dels {
		if err := rowsB.Delete(k); err != nil {
			return 0, st, err
		}
	}
	st.Blocks, st.Reports, st.Records = 1, len(entries), total
	return done, st, nil
}
