package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"sort"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store/internal/block"
)

// Sealed record blocks: the read-optimized form of records (record_seal.go
// moves them there). A block holds the records of reports of one domain
// (so of one organization) whose date_begin falls on one UTC day, under
// blockKey(domain id, day, seq): a table of the reports it holds, each
// with the run of its records it carries, then the records themselves
// compressed column by column. A report's records are one run in one block, or, for a
// report larger than a block, consecutive runs in blocks of the same day,
// in report order. Blocks never change once written: a report arriving
// for a sealed day is sealed later into a block of its own (the next seq).

// Block formats, the first byte of a block.
const (
	// blockFormatColumns (schema 9): a table of the reports' runs (each
	// report's 16-byte id and its first record, count and an unused size),
	// then the records as one columnar block of package block
	// (store/internal/block: columns, a per-block dictionary, zstd), each
	// record's Index its position in its report.
	blockFormatColumns = 2
	// blockFormatRuns (schema 10): the columnar block alone, whose own
	// header holds the same table more densely (block.ScanRuns: ids delta
	// coded, runs as varints), about 14 bytes a report less.
	blockFormatRuns = 3
)

// blockKeyLen is the length of every blockKey.
const blockKeyLen = idLen + 4 + 4

// blockKey is domain id | UTC day | seq (big-endian): one domain's blocks
// are a range in day order, a day's blocks a range of its own.
func blockKey(domainID string, day, seq uint32) []byte {
	k := make([]byte, 0, blockKeyLen)
	k = append(k, domainID...)
	k = binary.BigEndian.AppendUint32(k, day)
	return binary.BigEndian.AppendUint32(k, seq)
}

// blockEntry is one report's run in a block: the index of its first
// record in the report and how many records; size is kept for a body
// format with runs apart (0 in both formats).
type blockEntry struct {
	report       [16]byte
	first, count uint32
	size         uint32
}

// blockHeader is what a block says about itself without decompressing.
type blockHeader struct {
	entries []blockEntry
	body    []byte // compressed
}

// find returns the index of report's entry, or -1.
func (h *blockHeader) find(report [16]byte) int {
	for i := range h.entries {
		if h.entries[i].report == report {
			return i
		}
	}
	return -1
}

// encodeBlock returns the value of a block of entries and their records
// (rows: Report is the index of the entry, Index the record's position in
// its report). Each entry is one run: its rows are indexes first to
// first+count-1 of its report.
func encodeBlock(entries []blockEntry, rows []block.Row) ([]byte, error) {
	ids := make([][16]byte, len(entries))
	for i, e := range entries {
		ids[i] = e.report
	}
	return block.Encode(append(make([]byte, 0, 16+len(entries)*16+len(rows)*12), blockFormatRuns), ids, rows)
}

// decodeBlockHeader parses a block's table; the body stays compressed.
func decodeBlockHeader(v []byte) (*blockHeader, error) {
	h := &blockHeader{}
	body, err := scanBlockHeader(v, func(_ int, e *blockEntry, _ int) bool {
		h.entries = append(h.entries, *e)
		return true
	})
	h.body = body
	return h, err
}

// scanBlockHeader calls fn for each entry of a block's table with its
// index and the offset of its run in the decompressed body, until fn
// returns false, and returns the compressed body (nil when fn stopped).
func scanBlockHeader(v []byte, fn func(i int, e *blockEntry, off int) bool) ([]byte, error) {
	if len(v) > 0 && v[0] == blockFormatRuns {
		return scanRunsHeader(v[1:], fn)
	}
	if len(v) == 0 || v[0] != blockFormatColumns {
		return nil, errCorrupt
	}
	n, m := binary.Uvarint(v[1:])
	if m <= 0 || n > uint64(len(v)) {
		return nil, errCorrupt
	}
	rest := v[1+m:]
	var e blockEntry
	off := 0
	for i := 0; i < int(n); i++ {
		if len(rest) < 16 {
			return nil, errCorrupt
		}
		copy(e.report[:], rest[:16])
		rest = rest[16:]
		for _, p := range []*uint32{&e.first, &e.count, &e.size} {
			x, m := binary.Uvarint(rest)
			if m <= 0 || x > 1<<32-1 {
				return nil, errCorrupt
			}
			*p, rest = uint32(x), rest[m:]
		}
		if !fn(i, &e, off) {
			return nil, nil
		}
		off += int(e.size)
	}
	return rest, nil
}

// errStopScan ends a block.ScanRuns early.
var errStopScan = errors.New("stop")

// scanRunsHeader is scanBlockHeader of a blockFormatRuns block, body its
// columnar block: each report of the block's table is one run, in order.
func scanRunsHeader(body []byte, fn func(i int, e *blockEntry, off int) bool) ([]byte, error) {
	next := 0
	err := block.ScanRuns(body, func(report uint32, id [16]byte, first, count uint32) error {
		if int(report) != next {
			return errCorrupt // a report without its run, or with two
		}
		next++
		if !fn(int(report), &blockEntry{report: id, first: first, count: count}, 0) {
			return errStopScan
		}
		return nil
	})
	switch {
	case errors.Is(err, errStopScan):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("%w: %v", errCorrupt, err)
	}
	return body, nil
}

// decodedBlock is a block's records, each entry's run in report order.
type decodedBlock struct {
	runs [][]Record
	size int // an estimate of its memory
}

// decode returns the block's records by run, checked against its table.
func (h *blockHeader) decode() (*decodedBlock, error) {
	b, err := block.Decode(h.body)
	if err != nil {
		return nil, err
	}
	if len(b.Reports()) != len(h.entries) {
		return nil, errCorrupt
	}
	rows, err := b.Rows()
	if err != nil {
		return nil, err
	}
	d := &decodedBlock{runs: make([][]Record, len(h.entries)), size: len(h.body)}
	order := make([][]uint32, len(h.entries))
	for i, e := range h.entries {
		d.runs[i] = make([]Record, 0, e.count)
		order[i] = make([]uint32, 0, e.count)
	}
	for i := range rows {
		r := &rows[i]
		if int(r.Report) >= len(d.runs) {
			return nil, errCorrupt
		}
		d.runs[r.Report] = append(d.runs[r.Report], r.Rec)
		order[r.Report] = append(order[r.Report], r.Index)
		d.size += 256
	}
	// Each run in report order: the block keeps its rows by source address.
	for i, e := range h.entries {
		run, idx := d.runs[i], order[i]
		if len(run) != int(e.count) {
			return nil, errCorrupt
		}
		sort.Sort(byIndex{run, idx})
		for j := range idx {
			if idx[j] != e.first+uint32(j) {
				return nil, errCorrupt
			}
		}
	}
	return d, nil
}

// byIndex sorts a run's records by their index in the report.
type byIndex struct {
	recs []Record
	idx  []uint32
}

func (b byIndex) Len() int           { return len(b.idx) }
func (b byIndex) Less(i, j int) bool { return b.idx[i] < b.idx[j] }
func (b byIndex) Swap(i, j int) {
	b.recs[i], b.recs[j] = b.recs[j], b.recs[i]
	b.idx[i], b.idx[j] = b.idx[j], b.idx[i]
}

// rowRecords counts the records of a row of bucketRecords (codecVersion,
// then each record with its length) and checks its framing.
func rowRecords(v []byte) (int, error) {
	if len(v) == 0 || v[0] != codecVersion {
		return 0, errCorrupt
	}
	return countRecords(v[1:])
}

// countRecords counts length-prefixed records back to back.
func countRecords(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		l, m := binary.Uvarint(b)
		if m <= 0 || l > uint64(len(b)-m) {
			return 0, errCorrupt
		}
		b = b[m+int(l):]
		n++
	}
	return n, nil
}

// skipRecords returns b after its first n length-prefixed records.
func skipRecords(b []byte, n int) ([]byte, error) {
	for ; n > 0; n-- {
		l, m := binary.Uvarint(b)
		if m <= 0 || l > uint64(len(b)-m) {
			return nil, errCorrupt
		}
		b = b[m+int(l):]
	}
	return b, nil
}

// reportRuns are where a report's sealed records are: its runs in the
// blocks of its day, in report order, and how many records they hold.
type reportRuns struct {
	runs  []reportRun
	total int
}

type reportRun struct {
	key   []byte
	entry blockEntry
	index int // of the entry in its block
}

// sealedRuns finds the runs of report in the blocks of domain and day.
func sealedRuns(blocks *bolt.Bucket, domainID string, day uint32, report [16]byte) (reportRuns, error) {
	var rr reportRuns
	prefix := blockKey(domainID, day, 0)[:idLen+4]
	c := blocks.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		_, err := scanBlockHeader(v, func(i int, e *blockEntry, _ int) bool {
			if e.report != report {
				return true
			}
			rr.runs = append(rr.runs, reportRun{key: bytes.Clone(k), entry: *e, index: i})
			rr.total += int(e.count)
			return false
		})
		if err != nil {
			return rr, fmt.Errorf("record block %x: %w", k, err)
		}
	}
	// Runs are sealed in report order into growing seqs; order by first
	// all the same, cheaply, so that reads never depend on it.
	for i := 1; i < len(rr.runs); i++ {
		for j := i; j > 0 && rr.runs[j].entry.first < rr.runs[j-1].entry.first; j-- {
			rr.runs[j], rr.runs[j-1] = rr.runs[j-1], rr.runs[j]
		}
	}
	return rr, nil
}

// blockCache keeps the blocks read last, decoded, so that reading the
// reports of one day one after the other (a listing's details, an export)
// decodes each block once. An entry is used only while the stored block is
// still the bytes it was made from.
type blockCache struct {
	mu      sync.Mutex
	entries []cachedBlock // most recent last
	bytes   int
}

type cachedBlock struct {
	key string
	raw []byte
	d   *decodedBlock
}

// blockCacheBytes bounds the (estimated) memory the cache holds.
const blockCacheBytes = 24 << 20

// get returns the decoded block stored as raw under key.
func (c *blockCache) get(key, raw []byte) (*decodedBlock, error) {
	c.mu.Lock()
	for i := len(c.entries) - 1; i >= 0; i-- {
		if e := c.entries[i]; e.key == string(key) && bytes.Equal(e.raw, raw) {
			c.mu.Unlock()
			return e.d, nil
		}
	}
	c.mu.Unlock()
	h, err := decodeBlockHeader(raw)
	if err != nil {
		return nil, err
	}
	d, err := h.decode()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, e := range c.entries {
		if e.key == string(key) {
			c.bytes -= len(e.raw) + e.d.size
			c.entries = append(c.entries[:i], c.entries[i+1:]...)
			break
		}
	}
	size := len(raw) + d.size
	for len(c.entries) > 0 && c.bytes+size > blockCacheBytes {
		c.bytes -= len(c.entries[0].raw) + c.entries[0].d.size
		c.entries = c.entries[1:]
	}
	if size <= blockCacheBytes {
		c.entries = append(c.entries, cachedBlock{key: string(key), raw: bytes.Clone(raw), d: d})
		c.bytes += size
	}
	return d, nil
}
