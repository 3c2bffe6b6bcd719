package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store/internal/codec"
	"github.com/dmarcd/dmarcd/store/internal/days"
	"github.com/dmarcd/dmarcd/store/internal/reports"
)

// The write side of reports, used by package ingest. A report is built in a
// ReportDraft while it is parsed (its records encoded, its summary and
// roll-up contribution accumulated, all in the caller's goroutine), then
// made visible by Ingester.Commit together with the work of other callers:
// one bbolt transaction (one fsync) for many reports.
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

	// srcDay is the report's per-source roll-up (source_rollup.go), which
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
	d.buf, d.ends = make([]byte, 0, len(c.buf)), make([]int, 0, len(c.ends))
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
	d.index = binary.BigEndian.AppendUint64([]byte(r.ID), unixKey(r.DateEnd))
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

// QuarantineItem is an input to keep in quarantine. A new entry leaves
// Entry.ID empty; Commit sets it. Retrying an entry sets Entry.ID: that
// entry then gets the new reason and one more retry instead of a second
// entry (its bytes stay).
type QuarantineItem struct {
	Entry QuarantineEntry
	Raw   []byte
	// MaxTotal caps the bytes the quarantine keeps in all; 0 means no cap.
	// See putQuarantine.
	MaxTotal int64
}

// IngestBatch is the work of one commit: record chunks of reports still
// being parsed, finished drafts to make visible, inputs to quarantine.
type IngestBatch struct {
	Chunks     []*RecordChunk
	Reports    []*ReportDraft
	Quarantine []*QuarantineItem
	// Failures are failure reports to store (failure_ingest.go); each
	// draft's Outcome says what the commit did with it.
	Failures []*FailureDraft
	// TLS are TLS reports to store (tls_ingest.go); each draft's Outcome
	// says what the commit did with it.
	TLS []*TLSDraft
}

// ReportOutcome is what Commit did with one draft.
type ReportOutcome struct {
	// Stored is set when the report is now visible.
	Stored bool
	// Duplicate is the report already stored with the same identity
	// (domain, org_name, report id) when that kept this one out.
	Duplicate *Report
	// DomainGone is set when the domain was deleted before the commit.
	DomainGone bool
}

// Ingester writes what package ingest produces. It keeps the day roll-ups
// it wrote last decoded in memory, so it must be used by one goroutine at
// a time (the pipeline's writer). It never trusts that cache blindly: an
// entry is used only while the stored bytes are still those it wrote.
type Ingester struct {
	db         *DB
	cache      map[string]*cachedRollup
	cacheBytes int
}

type cachedRollup struct {
	raw []byte
	r   *reports.DayRollup
}

// maxCacheBytes bounds the encoded size of the cached roll-ups.
const maxCacheBytes = 4 << 20

// NewIngester returns the writer of ingested reports.
func (db *DB) NewIngester() *Ingester {
	return &Ingester{db: db, cache: make(map[string]*cachedRollup)}
}

// Commit writes b in one transaction: the chunks' records under their
// pending markers, then each draft (Finish called) unless its domain is gone
// or a report with its identity is stored already, the domains' roll-ups
// for the UTC day of each stored report's date_begin, each domain's
// LastReportAt (the newest ReceivedAt stored), the failure reports (see
// FailureDraft.Outcome), the TLS reports (TLSDraft.Outcome), the alerts
// the rules raise for what was stored (alert_rules.go), and the quarantine
// items.
// The outcomes are in the order of b.Reports. An error means nothing of b
// was written.
func (in *Ingester) Commit(b *IngestBatch) ([]ReportOutcome, error) {
	orgs := map[string]bool{}
	for _, d := range b.Reports {
		if d.val == nil {
			return nil, fmt.Errorf("store: commit of report %s before Finish", d.rep.ID)
		}
		orgs[d.rep.OrgID] = true
	}
	// LastReportAt changes domains: bump their organizations' versions
	// around the write, as every domain write does (see versions.changing).
	for org := range orgs {
		in.db.domainVersions.counter(org).Add(1)
	}
	defer func() {
		for org := range orgs {
			in.db.domainVersions.counter(org).Add(1)
		}
	}()
	var outs []ReportOutcome
	now := in.db.now()
	err := in.db.bolt.Update(func(tx *bolt.Tx) error {
		var err error
		outs, err = in.commitTx(tx, b, now)
		return err
	})
	if err != nil {
		// Roll-ups were merged into the cache inside the failed transaction.
		clear(in.cache)
		in.cacheBytes = 0
		return nil, wrap("ingest commit", err)
	}
	for i, d := range b.Reports {
		d.stored = outs[i].Stored // Abort leaves a stored report alone
	}
	return outs, nil
}

func (in *Ingester) commitTx(tx *bolt.Tx, b *IngestBatch, now time.Time) ([]ReportOutcome, error) {
	records := tx.Bucket(bucketRecords)
	// Record keys only grow (time-ordered report ids): fill pages fully.
	records.FillPercent = 0.95
	for _, c := range b.Chunks {
		if err := putChunk(tx, records, c); err != nil {
			return nil, err
		}
	}
	outs := make([]ReportOutcome, len(b.Reports))
	days := map[string]*reports.DayRollup{}
	latest := map[string]time.Time{}
	owners := map[string]string{} // domain id -> org id, "" when gone
	var stored []*ReportDraft
	sources := newSourceRollups()
	orgAdds := map[string]int64{} // org id -> reports new to its index
	idents := in.db.identities(tx)
	for i, d := range b.Reports {
		out, err := storeDraft(tx, idents, records, d, owners, orgAdds)
		if err != nil {
			return nil, err
		}
		outs[i] = out
		if !out.Stored {
			continue
		}
		stored = append(stored, d)
		key := string(rollupKey(d.rep.DomainID, d.day))
		sources.addKeyed(key, d.srcEnc)
		day := days[key]
		if day == nil {
			if day, err = in.loadRollup(tx, key); err != nil {
				return nil, err
			}
			days[key] = day
		}
		day.Reports++
		day.Sum.Merge(d.sum)
		day.Src.MergeCounts(d.src)
		if t, ok := latest[d.rep.DomainID]; !ok || d.rep.ReceivedAt.After(t) {
			latest[d.rep.DomainID] = d.rep.ReceivedAt
		}
	}
	for key, day := range days {
		if err := in.putRollup(tx, key, day); err != nil {
			return nil, err
		}
	}
	if err := sources.put(tx); err != nil {
		return nil, err
	}
	for orgID, n := range orgAdds {
		if err := addOrgReportCount(tx, orgID, n); err != nil {
			return nil, err
		}
	}
	for domainID, t := range latest {
		if err := touchDomain(tx, domainID, t); err != nil {
			return nil, err
		}
	}
	failures, err := storeFailures(tx, b.Failures, owners)
	if err != nil {
		return nil, err
	}
	storedTLS, err := storeTLSDrafts(tx, b.TLS, owners)
	if err != nil {
		return nil, err
	}
	if err := in.db.raiseTLSAlerts(tx, storedTLS); err != nil {
		return nil, err
	}
	if err := in.raiseAlerts(tx, stored, failureRefs(failures), now); err != nil {
		return nil, err
	}
	for _, q := range b.Quarantine {
		if err := putQuarantine(tx, q, now); err != nil {
			return nil, err
		}
	}
	return outs, nil
}

// putChunk writes a chunk's records under its report's pending marker.
func putChunk(tx *bolt.Tx, records *bolt.Bucket, c *RecordChunk) error {
	if err := tx.Bucket(bucketReportsPending).Put(c.report[:], []byte(c.domainID)); err != nil {
		return err
	}
	return putRecords(records, c.report, c.first, c.buf, c.ends)
}

// putRecords writes record blocks, each under its own key.
func putRecords(records *bolt.Bucket, report [16]byte, first uint32, buf []byte, ends []int) error {
	// One key buffer per call: bbolt keeps the key slices of a transaction
	// until it commits, so each key needs its own bytes.
	keys := make([]byte, 0, len(ends)*20)
	start := 0
	for i, end := range ends {
		keys = recordKey(keys, report, first+uint32(i))
		if err := records.Put(keys[len(keys)-20:], buf[start:end]); err != nil {
			return err
		}
		start = end
	}
	return nil
}

// storeDraft makes one report visible unless its domain is gone or its
// identity is taken; it counts a report new to its organization's index in
// orgAdds, which the commit adds to the stored counts once per organization.
func storeDraft(tx *bolt.Tx, idents *identityFilter, records *bolt.Bucket, d *ReportDraft, owners map[string]string, orgAdds map[string]int64) (ReportOutcome, error) {
	owner, ok := owners[d.rep.DomainID]
	if !ok {
		dom, err := getDomain(tx, d.rep.DomainID)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return ReportOutcome{}, err
		}
		if err == nil {
			owner = dom.OrgID
		}
		owners[d.rep.DomainID] = owner
	}
	if owner == "" || owner != d.rep.OrgID {
		return ReportOutcome{DomainGone: true}, nil
	}
	existing, exact, err := idents.storedReport(tx, d.key)
	if err != nil {
		return ReportOutcome{}, err
	}
	if existing != nil {
		return ReportOutcome{Duplicate: existing}, nil
	}
	if err := putRecords(records, d.bin, d.first, d.buf, d.ends); err != nil {
		return ReportOutcome{}, err
	}
	reports := tx.Bucket(bucketReports)
	// Ids are time-ordered, and a domain's (and an organization's) index
	// keys mostly grow with date_begin: pages split fuller than bbolt's
	// half, for half the pages written as a listing grows.
	reports.FillPercent = 0.9
	byDomain := tx.Bucket(bucketReportsByDomain)
	byDomain.FillPercent = 0.9
	if err := reports.Put(idKey(d.rep.ID), d.val); err != nil {
		return ReportOutcome{}, err
	}
	if err := byDomain.Put(d.key, d.index); err != nil {
		return ReportOutcome{}, err
	}
	idents.add(d.key[:idLen], d.key[idLen+8:])
	if fresh, err := putOrgReport(tx, d.rep.OrgID, d.key, d.index, !exact); err != nil {
		return ReportOutcome{}, err
	} else if fresh {
		orgAdds[d.rep.OrgID]++
	}
	if d.pending {
		if err := tx.Bucket(bucketReportsPending).Delete(d.bin[:]); err != nil {
			return ReportOutcome{}, err
		}
	}
	return ReportOutcome{Stored: true}, nil
}

// loadRollup returns the day roll-up stored under key, decoded, or a new
// one. The cached copy is used while the stored bytes are those it wrote;
// it is changed in place, so Commit empties the cache when the transaction
// fails.
func (in *Ingester) loadRollup(tx *bolt.Tx, key string) (*reports.DayRollup, error) {
	cur := tx.Bucket(bucketRollups).Get([]byte(key))
	if cur == nil {
		return reports.NewDayRollup(), nil
	}
	if c := in.cache[key]; c != nil && bytes.Equal(c.raw, cur) {
		return c.r, nil
	}
	r, err := reports.DecodeDayRollup(cur)
	if err != nil {
		return nil, fmt.Errorf("roll-up %x: %w", key, err)
	}
	return r, nil
}

// putRollup stores a day roll-up, its sources capped, and caches it.
func (in *Ingester) putRollup(tx *bolt.Tx, key string, r *reports.DayRollup) error {
	r.Src.Prune(MaxDaySources)
	// Room for what it took last time and what the commit added: a day of
	// a few hundred sources grew its buffer from nothing a dozen times.
	raw := reports.AppendDayRollup(make(codec.Enc, 0, max(r.Size+r.Size/4, 64*len(r.Src)+512)), r)
	r.Size = len(raw)
	if err := tx.Bucket(bucketRollups).Put([]byte(key), raw); err != nil {
		return err
	}
	if err := putDayTotals(tx, []byte(key), raw); err != nil {
		return err
	}
	in.remember(key, raw, r)
	return nil
}

// remember caches a roll-up just written, emptying the cache when it would
// grow past its budget (commits mostly touch the same few recent days).
func (in *Ingester) remember(key string, raw []byte, r *reports.DayRollup) {
	if old := in.cache[key]; old != nil {
		in.cacheBytes -= len(old.raw)
	}
	if in.cacheBytes+len(raw) > maxCacheBytes {
		clear(in.cache)
		in.cacheBytes = 0
	}
	in.cache[key] = &cachedRollup{raw: raw, r: r}
	in.cacheBytes += len(raw)
}

// touchDomain sets the domain's LastReportAt to t unless it is later.
func touchDomain(tx *bolt.Tx, domainID string, t time.Time) error {
	rec, err := getDomain(tx, domainID)
	if err != nil {
		return err
	}
	if rec.LastReportAt != nil && !rec.LastReportAt.Before(t) {
		return nil
	}
	rec.LastReportAt = &t
	return putDomain(tx, rec)
}

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

// DiscardPendingReports deletes what is left of reports whose ingestion
// stopped half-way (a crash between the transactions of a large report)
// and returns how many there were. Package ingest calls it when a pipeline
// is created, before anything is ingested: a report is either fully stored
// or absent.
func (db *DB) DiscardPendingReports() (int, error) {
	var pending [][]byte
	err := db.bolt.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketReportsPending).ForEach(func(k, _ []byte) error {
			pending = append(pending, bytes.Clone(k))
			return nil
		})
	})
	if err != nil {
		return 0, wrap("discard pending reports", err)
	}
	for _, k := range pending {
		if err := db.discardPending(k); err != nil {
			return 0, wrap("discard pending reports", err)
		}
	}
	return len(pending), nil
}

// DomainRef names a domain: what routing a report needs of it.
type DomainRef struct {
	ID, OrgID, Name string
}

// DomainsNamed returns the domains called name (lower case, no trailing
// dot) of organization orgID, or of every organization when orgID is "",
// in organization order. It reads index entries only, so it is cheap enough
// to call for every report.
func (db *DB) DomainsNamed(orgID, name string) ([]DomainRef, error) {
	var refs []DomainRef
	names := db.names.ver.Load()
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		refs, err = db.names.domainsNamed(tx, names, orgID, name)
		return err
	})
	if err != nil {
		return nil, wrap("find domains by name", err)
	}
	return refs, nil
}
