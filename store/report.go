package store

import (
	"bytes"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store/internal/days"
	"github.com/dmarcd/dmarcd/store/internal/reports"
)

// The values of aggregate reports are package reports' (how they are
// encoded and summed is pure, and lives there); the store's API names them
// here.
type (
	// Geo is API.md's "geo" object of a source; a nil field is unknown.
	Geo = reports.Geo
	// PolicyPublished is the policy the reporter saw published.
	PolicyPublished = reports.PolicyPublished
	// Report is one stored aggregate report (its metadata; records are
	// read with ReportRecords).
	Report = reports.Report
	// Reason is a policy override reason of a record.
	Reason = reports.Reason
	// DKIMAuth is one DKIM auth result of a record.
	DKIMAuth = reports.DKIMAuth
	// SPFAuth is one SPF auth result of a record.
	SPFAuth = reports.SPFAuth
	// AuthResults are the raw auth results of a record.
	AuthResults = reports.AuthResults
	// Record is one <record> of a report.
	Record = reports.Record
	// Verdict is a policy_evaluated result of a record, "" (JSON null)
	// when the report left it out.
	Verdict = reports.Verdict
)

// ReportFilter selects reports for ListReports: DateFrom keeps reports with
// date_begin >= DateFrom, DateTo those with date_end <= DateTo.
type ReportFilter struct {
	DomainID         string
	DateFrom, DateTo *time.Time
	Page             Page
	// After, when set, is a previous page's Next: the listing resumes
	// after that report, in the same order, and Page.Page is ignored.
	After []byte
}

// ListReports returns one page of the reports of organization orgID (of
// one domain when f.DomainID is set), newest date_begin first, and how many
// match in all. f.DateFrom keeps reports whose date_begin >= DateFrom,
// f.DateTo those whose date_end <= DateTo. A page past the end is empty.
// Errors: ErrNotFound when f.DomainID is not a domain of the organization,
// ErrInvalid for a page or limit below 1.
func (db *DB) ListReports(orgID string, f ReportFilter) ([]*Report, int, error) {
	p, err := db.ListReportsPage(orgID, f)
	if err != nil {
		return nil, 0, err
	}
	return p.Reports, p.Total, nil
}

// ReportPage is one page of a report listing.
type ReportPage struct {
	Reports []*Report
	// Total is how many reports pass the filter, on every page.
	Total int
	// Next resumes the listing after the page's last report (pass it as
	// ReportFilter.After); nil when nothing follows. A position, not an
	// offset: reports stored meanwhile neither repeat nor hide others.
	Next []byte
}

// ListReportsPage is ListReports with the position of the next page. An
// After that is no position is ErrInvalid.
func (db *DB) ListReportsPage(orgID string, f ReportFilter) (*ReportPage, error) {
	skip, err := f.Page.offset()
	if f.After != nil {
		skip, err = 0, f.Page.offset1()
		if err == nil && len(f.After) != reportKeyLen-idLen && (f.DomainID != "" || len(f.After) != orgPositionLen) {
			err = errorf(ErrInvalid, "invalid cursor")
		}
	}
	if err != nil {
		return nil, err
	}
	page := &ReportPage{Reports: []*Report{}}
	err = db.bolt.View(func(tx *bolt.Tx) error {
		var ids []string
		if f.DomainID == "" {
			// A whole organization: its own index (report_org_index.go).
			page.Total, ids, page.Next = scanOrgReports(tx, orgID, f, skip, f.Page.Limit)
		} else {
			domains, err := listedDomains(tx, orgID, f.DomainID)
			if err != nil {
				return err
			}
			page.Total, ids, page.Next = scanReports(tx, domains, f, skip, f.Page.Limit)
		}
		for _, id := range ids {
			rec, _, err := getReport(tx, &db.tables, id, false)
			if err != nil {
				return err
			}
			page.Reports = append(page.Reports, rec)
		}
		return nil
	})
	if err != nil {
		return nil, wrap("list reports", err)
	}
	return page, nil
}

// FindReport returns report id of organization orgID. ErrNotFound also when
// it belongs to another organization or id is malformed.
func (db *DB) FindReport(orgID, id string) (*Report, error) {
	var rec *Report
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		rec, _, err = getOrgReport(tx, &db.tables, orgID, id, false)
		if err != nil {
			return err
		}
		rec.RecordsDropped, err = recordsDropped(tx, rec)
		return err
	})
	if err != nil {
		return nil, wrap("find report", err)
	}
	return rec, nil
}

// ReportRecords calls fn for every record of report id of organization
// orgID, in report order, reading them in bounded batches (so a large
// report is streamed, never held in memory) and calling fn outside any
// transaction. An error from fn stops the scan and is returned as is.
// ErrNotFound as FindReport, also when the report is deleted mid-way.
func (db *DB) ReportRecords(orgID, id string, fn func(*Record) error) error {
	// Records are read in batches, each in its own short read transaction,
	// and fn runs outside them: fn usually writes to a client, and a read
	// transaction held open by a slow client would keep bbolt from growing
	// its file, stalling ingest. A visible report's records never change,
	// though they may move from rows to a sealed block between two batches
	// (record_seal.go): each batch finds them afresh by their index in the
	// report. If the report is deleted meanwhile, the next batch answers
	// ErrNotFound.
	bin, _ := binID(id)
	rc := recordCursor{report: bin, blocks: &db.blocks}
	batch := make([]*Record, 0, recordsPerBatch)
	for {
		batch = batch[:0]
		err := db.bolt.View(func(tx *bolt.Tx) error {
			rep, _, err := getOrgReport(tx, &db.tables, orgID, id, false)
			if err != nil {
				return err
			}
			return rc.next(tx, rep, &batch)
		})
		if err != nil {
			return wrap("report records", err)
		}
		if len(batch) == 0 {
			return nil
		}
		for _, r := range batch {
			if err := fn(r); err != nil {
				return err
			}
		}
		rc.delivered += len(batch)
		if rc.delivered >= rc.count {
			return nil
		}
	}
}

// recordCursor is where ReportRecords is in a report: the records
// delivered, and what saves work between batches.
type recordCursor struct {
	report    [16]byte
	delivered int
	count     int // the report's RecordCount
	// rowKey is the last row read and rowSealed the sealed records there
	// were then: while both hold, the next row follows rowKey.
	rowKey    []byte
	rowSealed int
	// blocks are the DB's decompressed blocks.
	blocks *blockCache
}

// next appends up to recordsPerBatch records after those delivered.
func (rc *recordCursor) next(tx *bolt.Tx, rep *Report, batch *[]*Record) error {
	rc.count = rep.RecordCount
	runs, err := sealedRuns(tx.Bucket(bucketRecordBlocks), rep.DomainID, days.Of(rep.DateBegin), rc.report)
	if err != nil {
		return err
	}
	add := func(r *Record) error {
		*batch = append(*batch, r)
		return nil
	}
	if rc.delivered < runs.total {
		for _, run := range runs.runs {
			first, count := int(run.entry.first), int(run.entry.count)
			if rc.delivered < first || rc.delivered >= first+count {
				continue
			}
			v := tx.Bucket(bucketRecordBlocks).Get(run.key)
			d, err := rc.blocks.get(run.key, v)
			if err != nil || run.index >= len(d.runs) {
				return fmt.Errorf("record block %x: %w", run.key, errors.Join(err, errCorrupt))
			}
			recs := d.runs[run.index][rc.delivered-first:]
			for i := range recs[:min(len(recs), recordsPerBatch)] {
				r := recs[i] // a copy: the cached block's records are shared
				*batch = append(*batch, &r)
			}
			return nil
		}
		return fmt.Errorf("record blocks of report %x: no run holds record %d: %w", rc.report, rc.delivered, errCorrupt)
	}
	// The rows: skip those delivered, unless the last one read is still
	// where it was.
	c := tx.Bucket(bucketRecords).Cursor()
	prefix := rc.report[:]
	var k, v []byte
	skip := 0
	if rc.rowKey != nil && rc.rowSealed == runs.total {
		if k, v = c.Seek(rc.rowKey); bytes.Equal(k, rc.rowKey) {
			k, v = c.Next()
		}
	} else {
		skip = rc.delivered - runs.total
		for k, v = c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && skip > 0; k, v = c.Next() {
			m, err := rowRecords(v)
			if err != nil {
				return fmt.Errorf("record row %x: %w", k, err)
			}
			if m > skip {
				break
			}
			skip -= m
		}
	}
	for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if len(v) == 0 || v[0] != codecVersion {
			return fmt.Errorf("record row %x: %w", k, errCorrupt)
		}
		from, err := skipRecords(v[1:], skip)
		if err != nil {
			return fmt.Errorf("record row %x: %w", k, err)
		}
		skip = 0
		if err := reports.DecodeRecords(from, add); err != nil {
			return fmt.Errorf("record row %x: %w", k, err)
		}
		rc.rowKey = append(rc.rowKey[:0], k...)
		rc.rowSealed = runs.total
		if len(*batch) >= recordsPerBatch {
			break
		}
	}
	return nil
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

// retentionStep bounds the entities one retention transaction deletes, so
// that the single writer is never held long and ingest goes on meanwhile.
const retentionStep = 500

// DeleteReportsBefore deletes the aggregate reports whose date_end is
// before t, and the daily roll-ups of the UTC days before t's (statistics
// of those days go with them, also the share of a report kept because it
// ends after t), and returns how many reports it deleted.
// It works in transactions of bounded size: each makes up to a few hundred
// reports invisible (metadata and index entries) and marks their records
// pending, which are then deleted a block range at a time; a crash in
// between leaves pending records that DiscardPendingReports removes at the
// next start.
func (db *DB) DeleteReportsBefore(t time.Time) (int, error) {
	cutoff := unixKey(t)
	total := 0
	for {
		var gone [][16]byte
		err := db.bolt.Update(func(tx *bolt.Tx) error {
			var err error
			gone, err = hideOldReports(tx, &db.tables, cutoff, retentionStep)
			return err
		})
		if err != nil {
			return total, wrap("delete old reports", err)
		}
		for _, bin := range gone {
			if err := db.discardPending(bin[:]); err != nil {
				return total, wrap("delete old reports", err)
			}
		}
		total += len(gone)
		if len(gone) < retentionStep {
			break
		}
	}
	// Sealed blocks of those days whose reports are all gone (a block of
	// t's day may still hold a report that ends after t).
	if _, err := db.deleteBlocksBefore(days.Of(t)+1, blockHasReport, false); err != nil {
		return total, wrap("delete old records", err)
	}
	if err := db.deleteRollupsBefore(days.Of(t)); err != nil {
		return total, wrap("delete old roll-ups", err)
	}
	if total > 0 {
		if err := db.refreshIdentities(); err != nil {
			return total, wrap("delete old reports", err)
		}
	}
	return total, nil
}

// blockHasReport reports whether a report of the block is still stored.
func blockHasReport(tx *bolt.Tx, h *blockHeader) bool {
	reps := tx.Bucket(bucketReports)
	for _, e := range h.entries {
		if reps.Get(idKey(formatUUID(e.report))) != nil {
			return true
		}
	}
	return false
}

// ReportStats is the statistics of one report.
type ReportStats struct {
	ReportID string `json:"report_id"`
	Summary
}

// ReportStatistics returns the summary stored with report id of
// organization orgID. ErrNotFound as FindReport.
func (db *DB) ReportStatistics(orgID, id string) (*ReportStats, error) {
	var st *ReportStats
	err := db.bolt.View(func(tx *bolt.Tx) error {
		rec, sum, err := getOrgReport(tx, &db.tables, orgID, id, true)
		if err != nil {
			return err
		}
		st = &ReportStats{ReportID: rec.ID, Summary: *sum}
		return nil
	})
	if err != nil {
		return nil, wrap("report statistics", err)
	}
	return st, nil
}

// DedupFilterStats is what the dedup identity filter holds (see
// identity_filter.go), for /metrics.
type DedupFilterStats struct {
	Reports int64 // identities added since it was built
	Bytes   int64 // memory of its bits
	Scans   int64 // scans of a domain's reports after a "maybe", since Open
}

// DedupFilterStats returns the filter's figures; zero before it is built
// (a read-only store builds it at its first dedup check).
func (db *DB) DedupFilterStats() DedupFilterStats {
	f := db.idents.Load()
	if f == nil {
		return DedupFilterStats{Scans: db.identScans.Load()}
	}
	return DedupFilterStats{Reports: f.keys.Len(), Bytes: f.keys.Bytes(), Scans: db.identScans.Load() + f.scans.Load()}
}

// offset1 checks the limit of a listing resumed from a cursor.
func (p Page) offset1() error {
	if p.Limit < 1 {
		return errorf(ErrInvalid, "limit must be at least 1")
	}
	return nil
}

// listedDomains returns the domain ids a listing covers: domainID after
// checking it is the organization's, or else every domain of the org.
func listedDomains(tx *bolt.Tx, orgID, domainID string) ([]string, error) {
	if domainID != "" {
		if _, err := getOrgDomain(tx, orgID, domainID); err != nil {
			return nil, err
		}
		return []string{domainID}, nil
	}
	var ids []string
	prefix := orgPrefix(orgID)
	c := tx.Bucket(bucketDomainsByOrg).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		ids = append(ids, idFromOrgTimeIDKey(k))
	}
	return ids, nil
}

// scanReports lists the reports of one domain (listedDomains checked it
// is the organization's): the page from the cursor, merged as the
// organization listing merges its domains, and every report that passes
// the filter counted. A position of this listing is date_begin |
// identity hash (reportKeyLen-idLen bytes).
func scanReports(tx *bolt.Tx, domains []string, f ReportFilter, skip, limit int) (int, []string, []byte) {
	prefixes := make([][]byte, len(domains))
	for i, id := range domains {
		prefixes[i] = []byte(id)
	}
	ids, next := mergeReports(tx, prefixes, f, skip, limit, false)
	return countReports(tx, prefixes, f), ids, next
}

// mergeReports merges the date indexes of the domains prefixes newest
// first (then the greater domain id) from the position f.After (or the
// newest) and returns the ids of the page that passes f and, when a
// report follows it, the position to resume after its last: an
// organization position (orgPositionLen bytes) with org, else the key
// without the domain id.
func mergeReports(tx *bolt.Tx, prefixes [][]byte, f ReportFilter, skip, limit int, org bool) ([]string, []byte) {
	var from []byte
	if f.DateFrom != nil {
		from = binary.BigEndian.AppendUint64(nil, unixKey(*f.DateFrom))
	}
	b := tx.Bucket(bucketReportsByDomain)
	its := make([]reportIter, len(prefixes))
	h := make(reportHeap, 0, len(prefixes))
	for i, prefix := range prefixes {
		it := &its[i]
		*it = reportIter{c: b.Cursor(), prefix: prefix, from: from}
		if f.After != nil {
			it.k = seekBeforeOrgPosition(it.c, prefix, f.After)
		} else {
			it.k = lastWithPrefix(it.c, prefix)
		}
		if it.valid() {
			h = append(h, it)
		}
	}
	heap.Init(&h)
	seen := 0
	var ids []string
	var last, next []byte
	for len(h) > 0 && next == nil {
		it := h[0]
		v := b.Get(it.k)
		if f.DateTo == nil || !time.Unix(int64(indexedEnd(v)), 0).After(*f.DateTo) {
			switch {
			case seen >= skip && len(ids) < limit:
				ids = append(ids, indexedID(v))
				last = it.k
			case len(ids) == limit && org:
				next = orgPosition(last)
			case len(ids) == limit:
				next = bytes.Clone(last[idLen:])
			}
			seen++
		}
		if it.k = prevWithPrefix(it.c, it.prefix); it.valid() {
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
		}
	}
	return ids, next
}

// countReports counts the reports of the domains prefixes that pass f's
// date filters: a scan of each domain's range, no merge.
func countReports(tx *bolt.Tx, prefixes [][]byte, f ReportFilter) int {
	var from []byte
	if f.DateFrom != nil {
		from = binary.BigEndian.AppendUint64(nil, unixKey(*f.DateFrom))
	}
	total := 0
	c := tx.Bucket(bucketReportsByDomain).Cursor()
	var start []byte
	for _, prefix := range prefixes {
		start = append(append(start[:0], prefix...), from...)
		for k, v := c.Seek(start); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			if len(k) == reportKeyLen && (f.DateTo == nil || !time.Unix(int64(indexedEnd(v)), 0).After(*f.DateTo)) {
				total++
			}
		}
	}
	return total
}

// reportIter walks one domain's date index backwards.
type reportIter struct {
	c      *bolt.Cursor
	prefix []byte
	from   []byte // big-endian date_begin lower bound, or nil
	k      []byte
}

// valid reports whether the iterator holds a well-formed key not older than
// the lower bound.
func (it *reportIter) valid() bool {
	if it.k == nil || len(it.k) != reportKeyLen {
		return false
	}
	return it.from == nil || bytes.Compare(it.k[len(it.prefix):len(it.prefix)+8], it.from) >= 0
}

// A date index value is the report's binary id | date_end (big-endian Unix
// seconds): indexValue. Files written before schema 10 hold the id as text
// (idLen bytes); indexedID reads both. The organization index holds only
// date_end (orgIndexValue); its ids are read from the date index.
const indexValueLen = 16 + 8

// indexValue is the date index value of report id ending at end.
func indexValue(id string, end time.Time) []byte {
	bin, _ := binID(id)
	return binary.BigEndian.AppendUint64(bin[:], unixKey(end))
}

// indexedID returns the report id of an index value, "" when it holds none.
func indexedID(v []byte) string {
	switch len(v) {
	case indexValueLen:
		return formatUUID([16]byte(v[:16]))
	case idLen + 8:
		return string(v[:idLen])
	}
	return ""
}

// indexedEnd returns the date_end of a value of either index.
func indexedEnd(v []byte) uint64 {
	switch len(v) {
	case indexValueLen, idLen + 8, 8:
		return binary.BigEndian.Uint64(v[len(v)-8:])
	}
	return 0
}

// reportHeap orders iterators by the position of their key (date_begin,
// identity hash), then by domain id, largest first.
type reportHeap []*reportIter

func (h reportHeap) Len() int { return len(h) }

func (h reportHeap) Less(i, j int) bool {
	if c := bytes.Compare(h[i].k[len(h[i].prefix):], h[j].k[len(h[j].prefix):]); c != 0 {
		return c > 0
	}
	return bytes.Compare(h[i].prefix, h[j].prefix) > 0 // the organization listing's order
}

func (h reportHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }

func (h *reportHeap) Push(x any) { *h = append(*h, x.(*reportIter)) }

func (h *reportHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// recordsPerBatch is how many records ReportRecords reads per transaction:
// a few MB at most, a handful of transactions for a 100,000-record report.
const recordsPerBatch = 4096

func errReportNotFound() error { return errorf(ErrNotFound, "report not found") }

// getReport reads report id, with its summary when withSummary is set,
// whatever form it is stored in (report_table.go), decoding tables
// through tables. ErrNotFound when absent or id malformed.
func getReport(tx *bolt.Tx, tables *tableCache, id string, withSummary bool) (*Report, *Summary, error) {
	if !ValidID(id) {
		return nil, nil, errReportNotFound()
	}
	raw, err := reportValue(tx, tables, id)
	if err != nil {
		return nil, nil, err
	}
	if raw == nil {
		return nil, nil, errReportNotFound()
	}
	return reports.DecodeReport(id, raw, withSummary)
}

// getOrgReport is getReport that also hides other organizations' reports.
func getOrgReport(tx *bolt.Tx, tables *tableCache, orgID, id string, withSummary bool) (*Report, *Summary, error) {
	rec, sum, err := getReport(tx, tables, id, withSummary)
	if err != nil {
		return nil, nil, err
	}
	if rec.OrgID != orgID {
		return nil, nil, errReportNotFound()
	}
	return rec, sum, nil
}

// deleteDomainReports removes everything ingest stored for a domain: its
// reports with their records, report tables and index entries, its
// roll-ups, and records of its reports still pending. It runs inside DeleteDomain.
func deleteDomainReports(tx *bolt.Tx, domainID string) error {
	prefix := []byte(domainID)
	idx := tx.Bucket(bucketReportsByDomain)
	var ids []string
	c := idx.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		ids = append(ids, indexedID(v))
	}
	for _, id := range ids {
		if err := tx.Bucket(bucketReports).Delete(idKey(id)); err != nil {
			return err
		}
		if bin, ok := binID(id); ok {
			if _, err := deletePrefix(tx.Bucket(bucketRecords), bin[:], -1); err != nil {
				return err
			}
		}
	}
	if err := deletePendingOf(tx, domainID); err != nil {
		return err
	}
	for _, b := range [][]byte{bucketReportsByDomain, bucketRollups, bucketDayTotals, bucketRecordBlocks, bucketReportTables} {
		if _, err := deletePrefix(tx.Bucket(b), prefix, -1); err != nil {
			return err
		}
	}
	return nil
}

// deletePendingOf removes the pending reports of a domain with their records.
func deletePendingOf(tx *bolt.Tx, domainID string) error {
	pending := tx.Bucket(bucketReportsPending)
	var keys [][]byte
	err := pending.ForEach(func(k, v []byte) error {
		if string(v) == domainID {
			keys = append(keys, bytes.Clone(k))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range keys {
		if _, err := deletePrefix(tx.Bucket(bucketRecords), k, -1); err != nil {
			return err
		}
		if err := pending.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// deletePrefix deletes up to max keys (all when max < 0) starting with
// prefix and returns how many it deleted. It seeks afresh after each delete:
// a bbolt cursor may skip a key when Next follows Delete.
func deletePrefix(b *bolt.Bucket, prefix []byte, max int) (int, error) {
	n := 0
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && n != max; k, _ = c.Seek(prefix) {
		if err := c.Delete(); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// hideOldReports removes the metadata and index entries of up to max
// reports whose date_end is before cutoff (Unix seconds), marks their
// records pending, and returns their binary ids. The report tables left
// without a report (report_table.go) go with them.
func hideOldReports(tx *bolt.Tx, tables *tableCache, cutoff uint64, max int) ([][16]byte, error) {
	type victim struct {
		key []byte
		id  string
	}
	var victims []victim
	byDomain := tx.Bucket(bucketReportsByDomain)
	domains := tx.Bucket(bucketDomains).Cursor()
	for dom, _ := domains.First(); dom != nil && len(victims) < max; dom, _ = domains.Next() {
		c := byDomain.Cursor()
		for k, v := c.Seek(dom); k != nil && bytes.HasPrefix(k, dom) && len(victims) < max; k, v = c.Next() {
			if len(k) != reportKeyLen {
				continue
			}
			// date_begin <= date_end: past the cutoff, no report of the
			// domain can end before it.
			if binary.BigEndian.Uint64(k[idLen:idLen+8]) >= cutoff {
				break
			}
			if indexedEnd(v) < cutoff {
				victims = append(victims, victim{key: bytes.Clone(k), id: indexedID(v)})
			}
		}
	}
	gone := make([][16]byte, 0, len(victims))
	dead := map[string]bool{} // tables that lost a report
	for _, vic := range victims {
		if err := byDomain.Delete(vic.key); err != nil {
			return nil, err
		}
		if dom, err := getDomain(tx, string(vic.key[:idLen])); err == nil {
			if err := addOrgReportCount(tx, dom.OrgID, -1); err != nil {
				return nil, err
			}
		} else if !isKind(err, ErrNotFound) {
			return nil, err
		}
		rep, _, err := getReport(tx, tables, vic.id, false)
		if isKind(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if v := tx.Bucket(bucketReports).Get(idKey(rep.ID)); isReportPointer(v) {
			if k, err := pointerTableKey(v); err == nil {
				dead[string(k)] = true
			}
		}
		if err := tx.Bucket(bucketReports).Delete(idKey(rep.ID)); err != nil {
			return nil, err
		}
		bin, _ := binID(rep.ID)
		if err := tx.Bucket(bucketReportsPending).Put(bin[:], []byte(rep.DomainID)); err != nil {
			return nil, err
		}
		gone = append(gone, bin)
	}
	if err := dropDeadTables(tx, tables, dead); err != nil {
		return nil, err
	}
	return gone, nil
}

// deleteRollupsBefore deletes every domain's roll-ups of days before day,
// in transactions of bounded size.
func (db *DB) deleteRollupsBefore(day uint32) error {
	for _, bucket := range [][]byte{bucketRollups, bucketSourceRollups, bucketDayTotals} {
		if err := db.deleteDayKeysBefore(bucket, day); err != nil {
			return err
		}
	}
	return nil
}

// deleteDayKeysBefore deletes the keys of bucket, each rollupKey(domain,
// day) or longer, of days before day.
func (db *DB) deleteDayKeysBefore(bucket []byte, day uint32) error {
	for {
		n := 0
		err := db.bolt.Update(func(tx *bolt.Tx) error {
			var old [][]byte
			rollups := tx.Bucket(bucket)
			domains := tx.Bucket(bucketDomains).Cursor()
			for dom, _ := domains.First(); dom != nil && len(old) < retentionStep; dom, _ = domains.Next() {
				end := rollupKey(string(dom), day)
				c := rollups.Cursor()
				for k, _ := c.Seek(dom); k != nil && bytes.Compare(k, end) < 0 && len(old) < retentionStep; k, _ = c.Next() {
					old = append(old, bytes.Clone(k))
				}
			}
			for _, k := range old {
				if err := rollups.Delete(k); err != nil {
					return err
				}
			}
			n = len(old)
			return nil
		})
		if err != nil || n < retentionStep {
			return err
		}
	}
}
