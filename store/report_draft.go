package store

import (
	"encoding/binary"
	"strconv"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store/internal/days"
	"github.com/dmarcd/dmarcd/store/internal/reports"
)

// The write side of reports, used by package ingest. A report is built in a
// ReportDraft while it is parsed (its records encoded, its summary and
// roll-up contribution accumulated, all in the caller's goroutine), then
// made visible by Ingester.Commit (ingest.go) together with the work of
// other callers: one bbolt transaction (one fsync) for many reports.
//
// A report too large for one transaction hands out its records in
// RecordChunks, each committed under a pending marker
// (bucketReportsPending); the report becomes visible (meta, index entry,
// roll-ups) only in the commit of its draft, which removes the
// marker. A draft given up on the way deletes what it committed itself
// (ReportDraft.Abort). A crash in between leaves the marker and some
// records, which DiscardPendingReports deletes at the next start: every
// report is either fully stored or absent.

// maxMetaLen bounds the text fields of a report's metadata, which every
// listing decodes; real ones are far shorter.
const maxMetaLen = 1024

// Records are stored in blocks of up to maxBlockRecords records or about
// maxBlockBytes: one bbolt value per block instead of per record, so that
// the single writer spends its time on bytes, not on B+tree operations, and
// a full scan decodes few values.
const (
	maxBlockRecords = 64
	maxBlockBytes   = 16 << 10
)

// discardStep is how many record blocks one transaction of
// ReportDraft.Abort deletes, so that deleting a million leftover records
// needs no huge transaction.
const discardStep = 1000

// ReportDraft is a report being ingested: its metadata, its records encoded
// and not yet written, its summary so far. It is used by one goroutine.
type ReportDraft struct {
	rep     Report
	bin     [16]byte
	sum     *reports.SummaryAcc
	src     []reports.IPCount
	buf     []byte // encoded record blocks not yet handed out, back to back
	ends    []int  // end offset in buf of each closed block
	open    int    // offset in buf of the open block
	openN   int    // records in the open block
	bufN    int    // records in buf
	first   uint32 // seq of the first block in buf
	n       uint32 // records added
	pending bool   // records were handed out by TakeChunk and not discarded
	stored  bool   // a Commit made the report visible
	scratch []byte
	hints   *draftHints // the DB's, learnt from the reports before

	// srcDay is the report's per-source roll-up (source.go), which
	// Finish encodes into srcEnc.
	srcDay reports.Sources
	srcEnc reports.SourceEntries

	// key is the date index key, which carries the dedup identity.
	key []byte
	// Set by Finish.
	val, index []byte
	day        uint32
}

// NewReportDraft starts a report of db from its metadata. The caller sets
// DomainID, Domain and OrgID (from routing), ReceivedAt, and what the
// report says about itself; the draft gets a new ID. Times are kept in UTC
// at second precision; a report without a date range gets ReceivedAt as
// DateBegin and DateEnd. Counts are computed from the records added.
// ErrInvalid for a malformed domain or organization id, a zero ReceivedAt
// or a text field longer than 1024 bytes.
func (db *DB) NewReportDraft(r Report) (*ReportDraft, error) {
	if !ValidID(r.DomainID) || !ValidID(r.OrgID) {
		return nil, errorf(ErrInvalid, "report needs a domain and an organization")
	}
	if r.ReceivedAt.IsZero() {
		return nil, errorf(ErrInvalid, "report needs a receive time")
	}
	for _, f := range []struct{ name, v string }{
		{"org_name", r.OrgName}, {"email", r.OrgEmail}, {"report_id", r.ExternalReportID},
		{"domain", r.Domain}, {"policy domain", r.PolicyPublished.Domain},
	} {
		if len(f.v) > maxMetaLen {
			return nil, errorf(ErrInvalid, "report %s is longer than %d bytes", f.name, maxMetaLen)
		}
	}
	bin := newIDBytes()
	r.ID = formatUUID(bin)
	r.ReceivedAt = r.ReceivedAt.UTC().Truncate(time.Second)
	if r.DateBegin.IsZero() {
		r.DateBegin = r.ReceivedAt
	}
	if r.DateEnd.IsZero() {
		r.DateEnd = r.DateBegin
	}
	r.DateBegin, r.DateEnd = r.DateBegin.UTC().Truncate(time.Second), r.DateEnd.UTC().Truncate(time.Second)
	r.MessageCount, r.DMARCPassCount, r.DMARCFailCount, r.RecordCount = 0, 0, 0, 0
	d := &ReportDraft{rep: r, sum: reports.NewSummaryAcc(), hints: &db.drafts}
	d.srcDay.Pool = &db.drafts.sources
	d.bin = bin
	// The date index key carries the dedup identity: FindDuplicate needs it
	// before the records are read.
	d.key = reportIndexKey(&d.rep)
	return d, nil
}

// ID returns the id the report will have once stored.
func (d *ReportDraft) ID() string { return d.rep.ID }

// Report returns the report as it stands (counts are set by Finish).
func (d *ReportDraft) Report() Report { return d.rep }

// Add appends a record: it is encoded at once, so r may be reused. Its
// DMARC field is ignored (derived from DKIM and SPF).
func (d *ReportDraft) Add(r *Record) {
	if d.openN == 0 {
		if d.buf == nil {
			// Room for as many bytes as the last report finished took
			// (reports of one import or reporter are alike), without the
			// dozen copies of growing from nothing.
			d.buf = make([]byte, 0, d.hints.bufSize())
		}
		d.buf = append(d.buf, codecVersion)
	}
	d.scratch = reports.AppendRecord(d.scratch[:0], r)
	d.buf = binary.AppendUvarint(d.buf, uint64(len(d.scratch)))
	d.buf = append(d.buf, d.scratch...)
	d.openN++
	d.bufN++
	if d.openN >= maxBlockRecords || len(d.buf)-d.open >= maxBlockBytes {
		d.closeBlock()
	}
	d.n++
	d.sum.Add(r)
	// The report's sources for the day roll-up (d.src) are taken from the
	// per-source roll-up at Finish: one map per record, not two.
	d.srcDay.Add(r)
}

// draftHints are what a DB's drafts learn from the reports before them,
// kept on the DB so that two databases of a process share nothing.
type draftHints struct {
	// buf is the size a new draft's record buffer starts at: the bytes of
	// the last report finished in one piece, between 512 bytes and 64 KiB;
	// 0 before the first.
	buf atomic.Int64
	// sources are the per-source roll-ups' hint and spare slices.
	sources reports.SourcePool
}

const minDraftBuf, maxDraftBuf = 512, 64 << 10

// bufSize is the capacity of a new draft's record buffer.
func (h *draftHints) bufSize() int64 {
	if n := h.buf.Load(); n > 0 {
		return n
	}
	return minDraftBuf
}

// closeBlock ends the open block, if any.
func (d *ReportDraft) closeBlock() {
	if d.openN == 0 {
		return
	}
	d.ends = append(d.ends, len(d.buf))
	d.open, d.openN = len(d.buf), 0
}

// Buffered returns how many records were added and not yet handed out.
func (d *ReportDraft) Buffered() int { return d.bufN }

// Records returns how many records were added in all.
func (d *ReportDraft) Records() int { return int(d.n) }

// TakeChunk hands out the buffered records, to be committed (Ingester
// Commit) before the draft: a report too large for one transaction is
// written in several. The report stays invisible until its draft is
// committed. It returns nil when nothing is buffered.
func (d *ReportDraft) TakeChunk() *RecordChunk {
	d.closeBlock()
	if len(d.ends) == 0 {
		return nil
	}
	c := &RecordChunk{report: d.bin, domainID: d.rep.DomainID, first: d.first, buf: d.buf, ends: d.ends, n: d.bufN}
	d.first += uint32(len(d.ends))
	// The next chunk is about as long: an eighth more room spares the
	// copy of a growth when it is a little longer (1.4 MB in a million-
	// record import's heap).
	d.buf, d.ends = make([]byte, 0, len(c.buf)+len(c.buf)/8), make([]int, 0, len(c.ends)+len(c.ends)/8)
	d.open, d.bufN = 0, 0
	d.pending = true
	return c
}

// Finish completes the draft after its last record: counts, summary, and
// the encoded values Commit writes. Add must not be called afterwards.
func (d *ReportDraft) Finish() {
	d.closeBlock()
	if !d.pending {
		d.hints.buf.Store(int64(min(max(len(d.buf)+len(d.buf)/8, minDraftBuf), maxDraftBuf)))
	}
	r := &d.rep
	r.MessageCount, r.DMARCPassCount, r.DMARCFailCount = d.sum.Totals()
	r.RecordCount = int(d.n)
	s := d.sum.Summary()
	d.val = reports.AppendReport(nil, r, &s)
	d.index = indexValue(r.ID, r.DateEnd)
	d.day = days.Of(r.DateBegin)
	d.srcDay.Compact()
	d.src = d.srcDay.Counts()
	d.srcEnc = d.srcDay.Encode(r.DateBegin, r.DateEnd)
	d.srcDay.Release()
}

// reportIndexKey is the key of a report in the date index of the listings.
func reportIndexKey(r *Report) []byte {
	return reportKey(r.DomainID, r.DateBegin, r.OrgName, reportIdentity(r))
}

// reportIdentity is the external report id. A report without one is
// identified by its reporter's address and date range instead, so that
// re-importing it does not store it twice (a NUL byte, which XML cannot
// carry, keeps the two forms apart).
func reportIdentity(r *Report) string {
	if r.ExternalReportID != "" {
		return r.ExternalReportID
	}
	return "\x00" + strconv.FormatInt(r.DateEnd.Unix(), 10) + "-" + r.OrgEmail
}

// RecordChunk is a run of one report's records handed out by TakeChunk.
type RecordChunk struct {
	report   [16]byte
	domainID string
	first    uint32 // seq of the first block
	buf      []byte // blocks back to back
	ends     []int  // end offset of each block
	n        int    // records
}

// Len returns the number of records in the chunk.
func (c *RecordChunk) Len() int { return c.n }

// Abort deletes what the draft already committed for a report that will
// not be stored: the records it handed out (TakeChunk) and their pending
// marker, in transactions of bounded size. Call it for a draft given up
// before its commit (a report cut short, an input that failed, a failed
// commit) or whose commit did not store it (a duplicate, its domain
// gone). It does nothing for a draft that handed out nothing, one already
// aborted, or one a Commit stored. No chunk of the draft may be in flight.
// A draft is not committed after Abort. On an error the records stay for
// DiscardPendingReports at the next start.
func (d *ReportDraft) Abort(db *DB) error {
	if !d.pending || d.stored {
		return nil
	}
	if err := db.discardPending(d.bin[:]); err != nil {
		return wrap("abort report "+d.rep.ID, err)
	}
	d.pending = false
	return nil
}

func (db *DB) discardPending(bin []byte) error {
	for {
		done := false
		err := db.bolt.Update(func(tx *bolt.Tx) error {
			n, err := deletePrefix(tx.Bucket(bucketRecords), bin, discardStep)
			if err != nil || n == discardStep {
				return err
			}
			done = true
			return tx.Bucket(bucketReportsPending).Delete(bin)
		})
		if err != nil || done {
			return err
		}
	}
}
