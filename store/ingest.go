package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store/internal/codec"
	"github.com/dmarcd/dmarcd/store/internal/days"
	"github.com/dmarcd/dmarcd/store/internal/reports"
)

// The ingest commit, for every kind of report: one bbolt transaction (one
// fsync) stores what package ingest prepared in many goroutines, the
// drafts of aggregate reports (report_draft.go), failure reports and TLS
// reports, with the roll-ups, the alerts the rules raise for them and the
// inputs to quarantine. Each kind's draft is checked (domain still its
// organization's, identity not stored yet) and written here; the kind's
// own files hold its reads, retention and keys.

// IngestBatch is the work of one commit: record chunks of reports still
// being parsed, finished drafts to make visible, inputs to quarantine.
type IngestBatch struct {
	Chunks     []*RecordChunk
	Reports    []*ReportDraft
	Quarantine []*QuarantineItem
	// Failures are failure reports to store (FailureDraft); each
	// draft's Outcome says what the commit did with it.
	Failures []*FailureDraft
	// TLS are TLS reports to store (TLSDraft); each draft's Outcome
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
		out, err := storeDraft(tx, idents, &in.db.tables, records, d, owners, orgAdds)
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
func storeDraft(tx *bolt.Tx, idents *identityFilter, tables *tableCache, records *bolt.Bucket, d *ReportDraft, owners map[string]string, orgAdds map[string]int64) (ReportOutcome, error) {
	owner, err := domainOwner(tx, owners, d.rep.DomainID)
	if err != nil {
		return ReportOutcome{}, err
	}
	if owner == "" || owner != d.rep.OrgID {
		return ReportOutcome{DomainGone: true}, nil
	}
	existing, exact, err := idents.storedReport(tx, tables, d.key)
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
	if !exact {
		// New to the date index (an exact key was counted when stored).
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

// storeFailures writes the failure drafts of a commit, each unless its
// domain is gone (or moved to another organization) or the same report
// (reporter, source IP, message id, arrival date) is stored for the domain
// already, and updates the day roll-ups once per day touched. It sets each
// draft's Outcome and returns the drafts stored, in order. owners caches
// domain id -> organization id ("" when gone) across the commit.
func storeFailures(tx *bolt.Tx, drafts []*FailureDraft, owners map[string]string) ([]*FailureDraft, error) {
	if len(drafts) == 0 {
		return nil, nil
	}
	var stored []*FailureDraft
	rolls := failDays{}
	for _, f := range drafts {
		f.out = FailureOutcome{}
		owner, err := domainOwner(tx, owners, f.rep.DomainID)
		if err != nil {
			return nil, err
		}
		if owner == "" || owner != f.rep.OrgID {
			f.out.DomainGone = true
			continue
		}
		dedup := failDedupKey(&f.rep)
		if id := tx.Bucket(bucketFailureDedup).Get(dedup); id != nil && tx.Bucket(bucketFailures).Get(id) != nil {
			f.out.DuplicateID = string(id)
			continue
		}
		if err := putFailure(tx, f, dedup); err != nil {
			return nil, err
		}
		day, err := rolls.get(tx, failRollupKey(f.rep.OrgID, days.Of(f.rep.ArrivalDate), f.rep.DomainID))
		if err != nil {
			return nil, err
		}
		day.Add(&f.rep, f.mask, 1)
		f.out.Stored = true
		stored = append(stored, f)
	}
	return stored, rolls.put(tx)
}

// domainOwner returns the organization of a domain, "" when it is gone.
func domainOwner(tx *bolt.Tx, owners map[string]string, domainID string) (string, error) {
	if owner, ok := owners[domainID]; ok {
		return owner, nil
	}
	dom, err := getDomain(tx, domainID)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return "", err
	}
	owner := ""
	if err == nil {
		owner = dom.OrgID
	}
	owners[domainID] = owner
	return owner, nil
}

// putFailure writes a report, its headers and its index entries.
func putFailure(tx *bolt.Tx, f *FailureDraft, dedup []byte) error {
	r := &f.rep
	idx := failIndexValue(r, f.mask)
	puts := []struct {
		bucket []byte
		k, v   []byte
	}{
		{bucketFailures, idKey(r.ID), f.val},
		{bucketFailuresByOrg, failTimeKey(r.OrgID, r.ArrivalDate, r.ID), idx},
		{bucketFailuresByDomain, failTimeKey(r.DomainID, r.ArrivalDate, r.ID), idx},
		{bucketFailureDedup, dedup, []byte(r.ID)},
	}
	if f.hdrVal != nil {
		puts = append(puts, struct {
			bucket []byte
			k, v   []byte
		}{bucketFailureHeaders, idKey(r.ID), f.hdrVal})
	}
	for _, p := range puts {
		if err := tx.Bucket(p.bucket).Put(p.k, p.v); err != nil {
			return fmt.Errorf("failure report %s: %w", r.ID, err)
		}
	}
	return nil
}

// storeTLSDrafts writes the TLS drafts of a commit, each unless its domain
// is gone or the report is stored already (also earlier in the same
// commit), updates the day roll-ups once per day touched, and returns the
// reports it stored. owners caches domain id -> organization id across
// the commit.
func storeTLSDrafts(tx *bolt.Tx, drafts []*TLSDraft, owners map[string]string) ([]*TLSReportDetail, error) {
	if len(drafts) == 0 {
		return nil, nil
	}
	var stored []*TLSReportDetail
	rolls := tlsDays{}
	dedup := tx.Bucket(bucketTLSDedup)
	// Report keys only grow (time-ordered ids), index keys nearly so (a
	// domain's reports come day after day): fill pages fully, as records
	// do, so that a commit writes fewer pages.
	for _, b := range [][]byte{bucketTLSReports, bucketTLSByOrg, bucketTLSByDomain} {
		tx.Bucket(b).FillPercent = 0.95
	}
	for _, d := range drafts {
		d.out = TLSOutcome{}
		r := d.rep.TLSReport
		owner, err := domainOwner(tx, owners, r.DomainID)
		if err != nil {
			return nil, err
		}
		if owner == "" || owner != r.OrgID {
			d.out.DomainGone = true
			continue
		}
		if id := dedup.Get(d.dkey); id != nil {
			d.out.DuplicateID = string(id)
			continue
		}
		if err := putTLS(tx, r, d.val, d.dkey); err != nil {
			return nil, err
		}
		if err := rolls.add(tx, d.rep, 1); err != nil {
			return nil, err
		}
		d.out.Stored = true
		stored = append(stored, d.rep)
	}
	return stored, rolls.put(tx)
}

// putTLS writes a new report and its index and dedup entries.
func putTLS(tx *bolt.Tx, r *TLSReport, val, dkey []byte) error {
	if err := tx.Bucket(bucketTLSReports).Put(idKey(r.ID), val); err != nil {
		return err
	}
	end := binary.BigEndian.AppendUint64(nil, unixKey(r.DateEnd))
	if err := tx.Bucket(bucketTLSByOrg).Put(tlsTimeKey(r.OrgID, r.DateBegin, r.ID), append([]byte(r.DomainID), end...)); err != nil {
		return err
	}
	if err := tx.Bucket(bucketTLSByDomain).Put(tlsTimeKey(r.DomainID, r.DateBegin, r.ID), end); err != nil {
		return err
	}
	return tx.Bucket(bucketTLSDedup).Put(dkey, []byte(r.ID))
}
