package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store/internal/block"
)

// Report tables (issue 25): a sealed report's value (reports.AppendReport:
// metadata and summary) moves from bucketReports into the report table of
// the block holding its first records, bucketReportTables under the same
// blockKey(domain id, day, seq): one zstd-compressed value per block (the
// reports of a domain and day share their reporters, policy and ids, so
// the table is several times smaller than its values apart). The report's
// value in bucketReports becomes a pointer to that table, written in the
// transaction that writes the block and the table (sealBlock), so a crash
// leaves one form or the other, never neither.
//
// A report has the full form (codecVersion first) until sealed, and for
// good when it has no records to seal or when its block's reports are too
// few for a table to be smaller than their values (a domain's lone report
// of a day). reportValue reads either form; every read of bucketReports
// goes through it. A table lives while a report points at it: deleting a
// report's value (retention) deletes the tables left without one
// (dropDeadTables), deleting a domain deletes all of its tables. Record
// retention drops record blocks, never tables: the reports stay.

// reportPointerMark is the first byte of a pointer value; a full value
// starts with codecVersion (1).
const reportPointerMark = 'P'

// reportPointerLen: the mark, the binary domain id, the day and the seq.
const reportPointerLen = 1 + 16 + 4 + 4

// boltElementBytes is what bbolt adds to each key and value in a leaf.
const boltElementBytes = 16

// reportPointer is the value of bucketReports pointing at the table under
// blockKey(domainID, day, seq).
func reportPointer(domainID string, day, seq uint32) ([]byte, error) {
	dom, ok := binID(domainID)
	if !ok {
		return nil, fmt.Errorf("domain id %q: %w", domainID, errCorrupt)
	}
	v := make([]byte, 0, reportPointerLen)
	v = append(v, reportPointerMark)
	v = append(v, dom[:]...)
	v = binary.BigEndian.AppendUint32(v, day)
	return binary.BigEndian.AppendUint32(v, seq), nil
}

// isReportPointer reports whether a value of bucketReports is a pointer.
func isReportPointer(v []byte) bool { return len(v) > 0 && v[0] == reportPointerMark }

// pointerTableKey returns the key in bucketReportTables a pointer names.
func pointerTableKey(v []byte) ([]byte, error) {
	if len(v) != reportPointerLen || v[0] != reportPointerMark {
		return nil, errCorrupt
	}
	var dom [16]byte
	copy(dom[:], v[1:17])
	return blockKey(formatUUID(dom), binary.BigEndian.Uint32(v[17:]), binary.BigEndian.Uint32(v[21:])), nil
}

// reportValue returns the value of report id (reports.AppendReport's
// bytes), whatever form it is stored in, or nil when the report is absent.
// The bytes are read-only and live as long as the transaction. Decoded
// tables come from (and go to) tables.
func reportValue(tx *bolt.Tx, tables *tableCache, id string) ([]byte, error) {
	v := tx.Bucket(bucketReports).Get(idKey(id))
	if !isReportPointer(v) {
		return v, nil
	}
	if len(v) != reportPointerLen {
		return nil, fmt.Errorf("report %s: pointer %x: %w", id, v, errCorrupt)
	}
	bin, ok := binID(id)
	if !ok {
		return nil, fmt.Errorf("report %q: %w", id, errCorrupt)
	}
	ref := v[1:]
	if val, ok := tables.lookup(ref, bin); ok {
		return val, nil
	}
	key, _ := pointerTableKey(v)
	t, err := tables.load(ref, tx.Bucket(bucketReportTables).Get(key))
	if err != nil {
		return nil, fmt.Errorf("report %s: table %x: %w", id, key, err)
	}
	val, ok := t.Get(bin)
	if !ok {
		return nil, fmt.Errorf("report %s: not in its table %x: %w", id, key, errCorrupt)
	}
	return val, nil
}

// putReportTable writes the table of the reports whose first records the
// block under key holds (their binary ids) and points their values at it,
// unless the table would not be smaller than their values. Reports
// already pointing elsewhere, or gone, are left alone.
func putReportTable(tx *bolt.Tx, key []byte, domainID string, day, seq uint32, ids [][16]byte) error {
	reps := tx.Bucket(bucketReports)
	entries := make([]block.TableEntry, 0, len(ids))
	for _, bin := range ids {
		v := reps.Get(idKey(formatUUID(bin)))
		if len(v) == 0 || v[0] != codecVersion {
			continue
		}
		entries = append(entries, block.TableEntry{ID: bin, Val: v})
	}
	if len(entries) == 0 {
		return nil
	}
	ptr, err := reportPointer(domainID, day, seq)
	if err != nil {
		return err
	}
	// Encoded (the values copied) before any Put moves the bucket's bytes.
	val, err := block.EncodeTable(nil, entries)
	if err != nil {
		return err
	}
	// Only where it saves room: a table of one report or two costs more
	// (its framing, its key) than the values it would replace.
	full := 0
	for _, e := range entries {
		full += len(e.Val)
	}
	if len(val)+len(key)+boltElementBytes+len(entries)*reportPointerLen >= full {
		return nil
	}
	if err := tx.Bucket(bucketReportTables).Put(key, val); err != nil {
		return err
	}
	for _, e := range entries {
		if err := reps.Put(idKey(formatUUID(e.ID)), ptr); err != nil {
			return err
		}
	}
	return nil
}

// tableLive reports whether a report still points at the table under key.
func tableLive(tx *bolt.Tx, tables *tableCache, key []byte) (bool, error) {
	raw := tx.Bucket(bucketReportTables).Get(key)
	if raw == nil {
		return false, nil
	}
	dom, _ := binID(string(key[:idLen]))
	t, err := tables.load(append(dom[:], key[idLen:]...), raw)
	if err != nil {
		return false, fmt.Errorf("report table %x: %w", key, err)
	}
	reps := tx.Bucket(bucketReports)
	for i := range t.Len() {
		v := reps.Get(idKey(formatUUID(t.ID(i))))
		if !isReportPointer(v) {
			continue
		}
		if k, err := pointerTableKey(v); err == nil && bytes.Equal(k, key) {
			return true, nil
		}
	}
	return false, nil
}

// dropDeadTables deletes the tables of keys no report points at any more.
func dropDeadTables(tx *bolt.Tx, tables *tableCache, keys map[string]bool) error {
	for k := range keys {
		live, err := tableLive(tx, tables, []byte(k))
		if err != nil {
			return err
		}
		if !live {
			if err := tx.Bucket(bucketReportTables).Delete([]byte(k)); err != nil {
				return err
			}
		}
	}
	return nil
}

// tableCache keeps the report tables read last, decoded, so that a
// listing page (up to 200 reports of a few days) or the detail pages read
// one after the other decode each table once. Entries are keyed by the
// table's reference, a pointer's bytes after its mark (binary domain id,
// day, seq: the table's key, shorter).
//
// A hit needs no read of the stored table: a report's value never changes
// and a report is sealed into one table only, so any table that holds the
// report holds its value, even one since deleted and replaced under the
// same key (which happens only once no report points at it). A report not
// in the cached table sends the reader to the stored one (load), which
// replaces the entry unless it carries the same tag (block.Tag: each
// table written has its own). A hit takes no lock when it is on the table
// used last. The zero value is ready: a function without the DB's makes
// one of its own.
type tableCache struct {
	mu    sync.Mutex
	byRef map[string]*cachedTable
	bytes int
	// clock stamps each use; the least recently used entry goes first.
	clock atomic.Int64
	// last is the entry used last: a listing's reports share a few tables.
	last atomic.Pointer[cachedTable]
}

type cachedTable struct {
	ref  string
	tag  [block.TagLen]byte
	t    *block.Table
	used atomic.Int64
}

// tableCacheBytes bounds the (estimated) memory the cache holds.
const tableCacheBytes = 16 << 20

// lookup returns the value of report bin from the cached table ref, if
// it is cached and holds it.
func (c *tableCache) lookup(ref []byte, bin [16]byte) ([]byte, bool) {
	ct := c.last.Load()
	if ct == nil || ct.ref != string(ref) {
		c.mu.Lock()
		ct = c.byRef[string(ref)]
		c.mu.Unlock()
		if ct == nil {
			return nil, false
		}
		// Stamped when it becomes the last: while it stays so, no other
		// entry is used, so its stamp stays the newest.
		ct.used.Store(c.clock.Add(1))
		c.last.Store(ct)
	}
	return ct.t.Get(bin)
}

// load returns the table ref stored as raw, decoded: the cached one when
// it carries raw's tag.
func (c *tableCache) load(refb []byte, raw []byte) (*block.Table, error) {
	ref := string(refb)
	if raw == nil {
		return nil, fmt.Errorf("missing: %w", errCorrupt)
	}
	tag, err := block.Tag(raw)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if ct := c.byRef[ref]; ct != nil && ct.tag == tag {
		c.mu.Unlock()
		ct.used.Store(c.clock.Add(1))
		c.last.Store(ct)
		return ct.t, nil
	}
	c.mu.Unlock()
	t, err := block.DecodeTable(raw)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byRef == nil {
		c.byRef = map[string]*cachedTable{}
	}
	if old := c.byRef[ref]; old != nil {
		c.bytes -= old.t.Size()
		delete(c.byRef, ref)
	}
	size := t.Size()
	for len(c.byRef) > 0 && c.bytes+size > tableCacheBytes {
		var lru *cachedTable
		for _, ct := range c.byRef {
			if lru == nil || ct.used.Load() < lru.used.Load() {
				lru = ct
			}
		}
		c.bytes -= lru.t.Size()
		delete(c.byRef, lru.ref)
	}
	if size <= tableCacheBytes {
		ct := &cachedTable{ref: ref, tag: tag, t: t}
		ct.used.Store(c.clock.Add(1))
		c.byRef[ref] = ct
		c.bytes += size
		c.last.Store(ct)
	}
	return t, nil
}
