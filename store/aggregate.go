package store

import (
	"bytes"
	"container/heap"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Geo mirrors geo.Info so that store imports only bbolt; its JSON is API.md's
// "geo" object. A nil field is unknown.
type Geo struct {
	CountryCode *string  `json:"country_code"`
	CountryName *string  `json:"country_name"`
	City        *string  `json:"city"`
	Latitude    *float64 `json:"latitude"`
	Longitude   *float64 `json:"longitude"`
	ASN         *uint32  `json:"asn"`
	ASOrg       *string  `json:"as_org"`
}

// PolicyPublished is the policy the reporter saw published.
type PolicyPublished struct {
	Domain string  `json:"domain"`
	P      string  `json:"p"`
	SP     *string `json:"sp"`
	NP     *string `json:"np"`
	PCT    int     `json:"pct"`
	ADKIM  string  `json:"adkim"`
	ASPF   string  `json:"aspf"`
}

// Report is one stored aggregate report (its metadata; records are read with
// ReportRecords).
type Report struct {
	ID               string          `json:"id"`
	DomainID         string          `json:"domain_id"`
	Domain           string          `json:"domain"`
	OrgID            string          `json:"-"`
	OrgName          string          `json:"org_name"`
	OrgEmail         string          `json:"org_email"`
	ExternalReportID string          `json:"external_report_id"`
	DateBegin        time.Time       `json:"date_begin"`
	DateEnd          time.Time       `json:"date_end"`
	ReceivedAt       time.Time       `json:"received_at"`
	PolicyPublished  PolicyPublished `json:"policy_published"`
	MessageCount     int64           `json:"message_count"`
	DMARCPassCount   int64           `json:"dmarc_pass_count"`
	DMARCFailCount   int64           `json:"dmarc_fail_count"`
	RecordCount      int             `json:"record_count"`
}

// Reason is a policy override reason of a record.
type Reason struct {
	Type    string  `json:"type"`
	Comment *string `json:"comment"`
}

// DKIMAuth is one DKIM auth result of a record.
type DKIMAuth struct {
	Domain   string  `json:"domain"`
	Selector *string `json:"selector"`
	Result   string  `json:"result"`
}

// SPFAuth is one SPF auth result of a record.
type SPFAuth struct {
	Domain string  `json:"domain"`
	Scope  *string `json:"scope"`
	Result string  `json:"result"`
}

// AuthResults are the raw auth results of a record.
type AuthResults struct {
	DKIM []DKIMAuth `json:"dkim"`
	SPF  []SPFAuth  `json:"spf"`
}

// Record is one <record> of a report. DMARC is "pass" when DKIM or SPF
// passed, else "fail". DKIM and SPF are "" (JSON null) when the report
// left them out; when it left both out (a legacy report), DMARC is derived
// from AuthResults and DMARCDerived says so (aggregate_verdict.go). Geo is
// nil when no geo database was configured.
type Record struct {
	SourceIP     string      `json:"source_ip"`
	Count        int64       `json:"count"`
	Disposition  string      `json:"disposition"`
	DKIM         Verdict     `json:"dkim"`
	SPF          Verdict     `json:"spf"`
	DMARC        string      `json:"dmarc"`
	DMARCDerived bool        `json:"dmarc_derived"`
	HeaderFrom   string      `json:"header_from"`
	EnvelopeFrom *string     `json:"envelope_from"`
	EnvelopeTo   *string     `json:"envelope_to"`
	Reasons      []Reason    `json:"reasons"`
	AuthResults  AuthResults `json:"auth_results"`
	Geo          *Geo        `json:"geo"`
}

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

func errReportNotFound() error { return errorf(ErrNotFound, "report not found") }

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
			rec, _, err := getReport(tx, id, false)
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

// scanReports walks the date index of the domains newest first, merging
// their ranges, and returns the number of reports that pass the filter and
// the ids of those on the page.
func scanReports(tx *bolt.Tx, domains []string, f ReportFilter, skip, limit int) (int, []string, []byte) {
	var from []byte
	if f.DateFrom != nil {
		from = binary.BigEndian.AppendUint64(nil, unixKey(*f.DateFrom))
	}
	h := make(reportHeap, 0, len(domains))
	b := tx.Bucket(bucketReportsByDomain)
	for _, id := range domains {
		it := &reportIter{c: b.Cursor(), prefix: []byte(id), from: from}
		if it.k = lastWithPrefix(it.c, it.prefix); it.valid() {
			h = append(h, it)
		}
	}
	heap.Init(&h)
	total, seen := 0, 0
	var ids []string
	var last, next []byte
	for len(h) > 0 {
		it := h[0]
		v := b.Get(it.k)
		if f.DateTo == nil || !time.Unix(int64(indexedEnd(v)), 0).After(*f.DateTo) {
			// The position of a report is its key without the domain id:
			// date_begin | identity hash, the order of the merge.
			pos := it.k[len(it.prefix):]
			if f.After == nil || bytes.Compare(pos, f.After) < 0 {
				switch {
				case seen >= skip && len(ids) < limit:
					ids = append(ids, indexedID(v))
					last = pos
				case len(ids) == limit && next == nil:
					next = bytes.Clone(last)
				}
				seen++
			}
			total++
		}
		if it.k = prevWithPrefix(it.c, it.prefix); it.valid() {
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
		}
	}
	return total, ids, next
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

// indexedID returns the report id of an index value (report id | date_end).
func indexedID(v []byte) string {
	if len(v) < idLen {
		return ""
	}
	return string(v[:idLen])
}

// indexedEnd returns the date_end of an index value.
func indexedEnd(v []byte) uint64 {
	if len(v) != idLen+8 {
		return 0
	}
	return binary.BigEndian.Uint64(v[idLen:])
}

// reportHeap orders iterators by (date_begin, id) of their key, largest first.
type reportHeap []*reportIter

func (h reportHeap) Len() int { return len(h) }
func (h reportHeap) Less(i, j int) bool {
	return bytes.Compare(h[i].k[len(h[i].prefix):], h[j].k[len(h[j].prefix):]) > 0
}
func (h reportHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *reportHeap) Push(x any)   { *h = append(*h, x.(*reportIter)) }
func (h *reportHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// FindReport returns report id of organization orgID. ErrNotFound also when
// it belongs to another organization or id is malformed.
func (db *DB) FindReport(orgID, id string) (*Report, error) {
	var rec *Report
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		rec, _, err = getOrgReport(tx, orgID, id, false)
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
	// its file, stalling ingest. A visible report never changes, so the
	// batches are consistent; if it is deleted meanwhile, the next batch
	// answers ErrNotFound.
	bin, _ := binID(id)
	after := []byte(nil) // key of the last block read; nil before the first
	batch := make([]*Record, 0, recordsPerBatch)
	for {
		batch = batch[:0]
		err := db.bolt.View(func(tx *bolt.Tx) error {
			if _, _, err := getOrgReport(tx, orgID, id, false); err != nil {
				return err
			}
			c := tx.Bucket(bucketRecords).Cursor()
			k, v := c.Seek(bin[:])
			if after != nil {
				if k, v = c.Seek(after); bytes.Equal(k, after) {
					k, v = c.Next()
				}
			}
			for ; k != nil && bytes.HasPrefix(k, bin[:]); k, v = c.Next() {
				if err := decodeBlock(v, func(r *Record) error {
					batch = append(batch, r)
					return nil
				}); err != nil {
					return fmt.Errorf("record block %x: %w", k, err)
				}
				after = append(after[:0], k...)
				if len(batch) >= recordsPerBatch {
					break
				}
			}
			return nil
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
		if len(batch) < recordsPerBatch {
			return nil
		}
	}
}

// recordsPerBatch is how many records ReportRecords reads per transaction:
// a few MB at most, a handful of transactions for a 100,000-record report.
const recordsPerBatch = 4096

// getReport reads report id, with its summary when withSummary is set.
// ErrNotFound when absent or id malformed.
func getReport(tx *bolt.Tx, id string, withSummary bool) (*Report, *Summary, error) {
	if !ValidID(id) {
		return nil, nil, errReportNotFound()
	}
	raw := tx.Bucket(bucketReports).Get(idKey(id))
	if raw == nil {
		return nil, nil, errReportNotFound()
	}
	return decodeReport(id, raw, withSummary)
}

// getOrgReport is getReport that also hides other organizations' reports.
func getOrgReport(tx *bolt.Tx, orgID, id string, withSummary bool) (*Report, *Summary, error) {
	rec, sum, err := getReport(tx, id, withSummary)
	if err != nil {
		return nil, nil, err
	}
	if rec.OrgID != orgID {
		return nil, nil, errReportNotFound()
	}
	return rec, sum, nil
}

// appendReport encodes a report and its summary (the id is the key).
func appendReport(e enc, r *Report, s *Summary) enc {
	e = append(e, codecVersion)
	e = e.str(r.DomainID).str(r.Domain).str(r.OrgID).str(r.OrgName).str(r.OrgEmail).str(r.ExternalReportID)
	e = e.time(r.DateBegin).time(r.DateEnd).time(r.ReceivedAt)
	p := &r.PolicyPublished
	e = e.str(p.Domain).sym(p.P).opt(p.SP).opt(p.NP).varint(int64(p.PCT)).sym(p.ADKIM).sym(p.ASPF)
	e = e.varint(r.MessageCount).varint(r.DMARCPassCount).varint(r.DMARCFailCount).uvarint(uint64(r.RecordCount))
	return appendSummary(e, s)
}

// decodeReport reads what appendReport wrote; the summary only when asked.
func decodeReport(id string, raw []byte, withSummary bool) (*Report, *Summary, error) {
	d := &dec{b: raw}
	if d.byte() != codecVersion {
		return nil, nil, fmt.Errorf("report %s: %w", id, errCorrupt)
	}
	r := &Report{ID: id, DomainID: d.str(), Domain: d.str(), OrgID: d.str(), OrgName: d.str(),
		OrgEmail: d.str(), ExternalReportID: d.str(), DateBegin: d.time(), DateEnd: d.time(), ReceivedAt: d.time()}
	r.PolicyPublished = PolicyPublished{Domain: d.str(), P: d.sym(), SP: d.opt(), NP: d.opt(),
		PCT: int(d.varint()), ADKIM: d.sym(), ASPF: d.sym()}
	r.MessageCount, r.DMARCPassCount, r.DMARCFailCount = d.varint(), d.varint(), d.varint()
	r.RecordCount = int(d.uvarint())
	var s *Summary
	if withSummary {
		s = new(decodeSummary(d))
		if len(d.b) != 0 {
			d.fail()
		}
	}
	if !d.ok() {
		return nil, nil, fmt.Errorf("report %s: %w", id, errCorrupt)
	}
	return r, s, nil
}

// deleteDomainReports removes everything ingest stored for a domain: its
// reports with their records and index entries, its roll-ups,
// and records of its reports still pending. It runs inside DeleteDomain.
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
	for _, b := range [][]byte{bucketReportsByDomain, bucketRollups, bucketDayTotals} {
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
