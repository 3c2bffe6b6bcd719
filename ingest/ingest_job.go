package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/dmarcd/dmarcd/dmarc/aggregate"
	"github.com/dmarcd/dmarcd/dmarc/container"
	"github.com/dmarcd/dmarcd/store"
)

// maxGeoCache bounds the per-input cache of lookups: reports repeat their
// sources, and a lookup costs about a microsecond.
const maxGeoCache = 4096

// geoCacheAfter is how many sources an input looks up before it keeps a
// cache: a small report's sources are mostly distinct, and filling a map
// for them cost a third again of their lookups.
const geoCacheAfter = 64

// job is one input going through the pipeline.
type job struct {
	ctx   context.Context
	p     *Pipeline
	d     Arrival
	in    *input
	retry *store.QuarantineEntry // the entry being retried, or nil

	route    *router
	places   []place              // one per report found usable, in input order
	drafts   []*store.ReportDraft // finished, committed together at the end
	reading  *store.ReportDraft   // the draft whose records are being read
	tls      []*store.TLSDraft    // TLS reports, committed with drafts (tls.go)
	buffered int                  // records of drafts not yet handed out
	inflight *work                // the chunk being committed, if any
	problems []string
	ambig    error // the first ErrAmbiguous
	abort    error // why the input fails as a whole
	skipped  int   // records the parser skipped
	expired  []Expired

	rec      store.Record
	geoOn    bool                   // a database is configured
	geoCache map[netip.Addr]located // made after geoCacheAfter lookups
	geoN     int                    // lookups before the cache
	geoLast  netip.Addr             // the source geo was last looked up for
	geoFound bool                   // whether that lookup had an answer
	geo      store.Geo              // the record's, which rec.Geo points to
	producer bool                   // counted in p.parsing
	slot     bool                   // holds one of p.slots
}

// place is a report's place in the result: found a duplicate before its
// records were read, or a draft whose outcome the final commit tells.
type place struct {
	out    Outcome
	draft  *store.ReportDraft
	tls    *store.TLSDraft // a TLS report, of domain
	domain string
}

func newJob(ctx context.Context, p *Pipeline, r io.Reader, d Arrival, retry *store.QuarantineEntry) *job {
	j := &job{ctx: ctx, p: p, d: d, retry: retry, in: newInput(r, p.cfg.QuarantineMaxBytes)}
	j.route = &router{db: p.db, d: d}
	j.geoOn = p.cfg.Geo.Enabled()
	return j
}

// run takes the input through the pipeline.
func (j *job) run() (*Result, error) {
	j.p.parsing.Add(1)
	j.producer = true
	defer j.doneProducing()
	if err := j.acquire(); err != nil {
		return nil, err
	}
	err := j.walk()
	if j.abort == nil {
		j.abort = j.in.failed()
	}
	if err := j.ctx.Err(); j.abort == nil && err != nil {
		j.abort = fmt.Errorf("ingest: %w", err)
	}
	if j.abort != nil {
		j.cleanup()
		return nil, j.abort
	}
	nothing := errors.Is(err, container.ErrNoReport) // no payload, nothing broken
	if err != nil {
		// The walk stopped (a broken part, a limit): what was found stays.
		j.problems = append(j.problems, reasonOf(err))
	}
	seen := len(j.problems)
	res, err := j.commitReports()
	if err != nil {
		return nil, err
	}
	if len(res.Reports) > 0 || len(j.expired) > 0 {
		res.Problems = j.problems
		res.Expired = j.expired
		return j.keepTooOld(res)
	}
	if j.ambig != nil {
		return nil, j.ambig
	}
	// No aggregate report: the mail may hold failure reports (failure.go).
	if j.d.Source != SourceHTTPS {
		if res, err := j.failures(); res != nil || err != nil {
			if err != nil {
				return res, err
			}
			return j.keepTooOld(res)
		}
	}
	if j.d.Source == SourceIMAP && nothing && len(j.problems) == seen {
		// Ordinary mail in a mailbox: neither walk found anything.
		j.doneProducing()
		return &Result{Reports: []Outcome{}, NotReport: true}, nil
	}
	return j.quarantine()
}

// keepTooOld returns res, unless the input is a quarantine entry retried
// and every report in it is older than the retention window: then nothing
// was stored and the entry stays, with that reason (and one more retry),
// rather than being removed with nothing to show for it.
func (j *job) keepTooOld(res *Result) (*Result, error) {
	if j.retry == nil || len(res.Reports) > 0 || len(res.Expired) == 0 {
		return res, nil
	}
	j.problems = []string{tooOldReason(res.Expired)}
	q, err := j.quarantine()
	if q != nil {
		q.Expired = res.Expired
	}
	return q, err
}

// tooOldReason says why reports were left out for their age.
func tooOldReason(xs []Expired) string {
	x := xs[0]
	what := fmt.Sprintf("%s report from %s for %s", x.Kind, x.Reporter, x.Domain)
	if len(xs) > 1 {
		what = fmt.Sprintf("%d reports", len(xs))
	}
	return fmt.Sprintf("%s older than the retention window (%s; %s): not stored, as the retention job would delete it; "+
		"a server with a longer --retention (or --failure-retention) would store it", what, x.Window, x.Date.Format("2006-01-02"))
}

// doneProducing tells the writer this job will submit nothing more that
// is worth waiting for.
func (j *job) doneProducing() {
	j.release()
	if j.producer {
		j.producer = false
		j.p.parsing.Add(-1)
	}
}

// acquire takes a parsing slot. Parsing is CPU work: with more parsers than
// processors, the single writer would get only its share of the CPU among
// them, and the writer is what every Ingest call waits for.
//
// It also waits while the records handed to the writer and not yet
// committed are over the pipeline's budget (see Pipeline.pending): what a
// job parses stays in memory until its commit.
func (j *job) acquire() error {
	if err := j.p.underBudget(j.ctx); err != nil {
		return err
	}
	select {
	case j.p.slots <- struct{}{}:
		j.slot = true
		return nil
	case <-j.ctx.Done():
		return fmt.Errorf("ingest: %w", j.ctx.Err())
	}
}

func (j *job) release() {
	if j.slot {
		j.slot = false
		<-j.p.slots
	}
}

// payload handles one report payload found in the input. It returns an
// error only to stop the walk: when the input as a whole fails.
func (j *job) payload(pl container.Payload) error {
	if err := j.ctx.Err(); err != nil {
		return j.fail(fmt.Errorf("ingest: %w", err))
	}
	ar, err := aggregate.NewReader(pl.Body, j.p.cfg.Limits)
	if err != nil {
		return j.problem(pl.Name, err)
	}
	defer ar.Release()
	h := ar.Header()
	// Routing and the dedup check share one read transaction: a small
	// report pays for its transactions as much as for its records.
	var (
		dom      store.DomainRef
		why      string
		rerr     error
		draft    *store.ReportDraft
		draftErr error
		expired  bool
		dup      *store.Report
	)
	if j.route.byRecipient() {
		// Read (once per input) before the lookup's transaction: a read
		// transaction must not open another one (bbolt's remap lock).
		if _, err := j.route.recipientDomain(); err != nil {
			return j.fail(err)
		}
	}
	err = j.p.db.Lookup(func(l *store.Lookup) error {
		j.route.look = l
		defer func() { j.route.look = nil }()
		dom, why, rerr = j.route.domain(h)
		if rerr != nil || dom.ID == "" {
			return nil
		}
		if ret := j.p.cfg.Retention; ret > 0 && !h.DateEnd.IsZero() && h.DateEnd.Before(j.p.cfg.Now().Add(-ret)) {
			expired = true
			return nil
		}
		if draft, draftErr = j.p.db.NewReportDraft(reportOf(h, dom, j.d)); draftErr != nil {
			return nil
		}
		var err error
		dup, err = l.FindDuplicate(draft)
		return err
	})
	if err != nil {
		return j.fail(err)
	}
	if rerr == nil && dom.ID == "" && why == "" {
		// No domain: ask again for the reason, outside the transaction.
		dom, why, rerr = j.route.domain(h)
	}
	switch {
	case errors.Is(rerr, ErrAmbiguous):
		if j.ambig == nil {
			j.ambig = rerr
		}
		j.problems = append(j.problems, reasonOf(rerr))
		return nil
	case rerr != nil:
		return j.fail(rerr)
	case dom.ID == "":
		j.problems = append(j.problems, why)
		return nil
	case expired:
		// Retention would delete it within the hour: not stored, named.
		j.expired = append(j.expired, Expired{Kind: KindAggregate, Reporter: h.OrgName, ReportID: h.ReportID,
			Domain: dom.Name, Date: h.DateEnd.UTC(), Window: Window(j.p.cfg.Retention)})
		return nil
	case draftErr != nil:
		return j.problem(pl.Name, draftErr)
	}
	if dup != nil {
		// Its records are counted, not stored: whether it is the stored
		// report again or another one under the same identity.
		out := Outcome{Kind: KindAggregate, ReportID: dup.ID, Domain: dup.Domain, Duplicate: true, Records: dup.RecordCount}
		out.DifferentContent = !j.sameAsStored(ar, draft.Report(), dup)
		j.places = append(j.places, place{out: out})
		return nil
	}
	return j.records(pl.Name, ar, draft)
}

// records reads the records of one report into its draft, handing out a
// chunk whenever one is full, so memory stays bounded.
func (j *job) records(name string, ar *aggregate.Reader, draft *store.ReportDraft) error {
	batch := j.p.chunkRecords()
	j.reading = draft
	for {
		r, err := ar.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			// A report cut short is not stored: its records so far are dropped.
			if err := j.drop(draft); err != nil {
				return j.fail(err)
			}
			return j.problem(name, err)
		}
		j.add(draft, r)
		if draft.Buffered() >= batch {
			if err := j.flush(draft); err != nil {
				return j.fail(err)
			}
		}
	}
	j.skipped += ar.Skipped()
	draft.Finish()
	j.reading = nil
	j.drafts = append(j.drafts, draft)
	j.places = append(j.places, place{draft: draft})
	j.buffered += draft.Buffered()
	if j.buffered < batch {
		return nil
	}
	// Many reports in one input: write their records ahead as well.
	for _, d := range j.drafts {
		if err := j.flush(d); err != nil {
			return j.fail(err)
		}
	}
	j.buffered = 0
	return nil
}

// sameAsStored reads the rest of a report whose identity is stored already
// (dup), counting its records and messages, and reports whether it is the
// stored report again. A report that cannot be read to its end is taken as
// the same: what differs cannot be told.
func (j *job) sameAsStored(ar *aggregate.Reader, rep store.Report, dup *store.Report) bool {
	if !rep.DateBegin.Equal(dup.DateBegin) || !rep.DateEnd.Equal(dup.DateEnd) {
		return false
	}
	for {
		r, err := ar.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return true
		}
		rep.RecordCount++
		rep.MessageCount += r.Count
	}
	return sameContent(&rep, dup)
}

// sameContent reports whether rep, read again, is the stored report dup
// of the same identity: the same period, records and messages. Reporters
// that send a corrected report under the same id change these.
func sameContent(rep, dup *store.Report) bool {
	return rep.DateBegin.Equal(dup.DateBegin) && rep.DateEnd.Equal(dup.DateEnd) &&
		rep.RecordCount == dup.RecordCount && rep.MessageCount == dup.MessageCount
}

// add converts a parsed record, geolocates it and adds it to the draft.
func (j *job) add(d *store.ReportDraft, r *aggregate.Record) {
	rec := &j.rec
	rec.SourceIP = r.SourceIP.String()
	rec.Count, rec.Disposition, rec.DKIM, rec.SPF = r.Count, r.Disposition, store.Verdict(r.DKIM), store.Verdict(r.SPF)
	rec.HeaderFrom = r.HeaderFrom
	rec.EnvelopeFrom, rec.EnvelopeTo = optional(&r.EnvelopeFrom), optional(&r.EnvelopeTo)
	rec.Reasons = rec.Reasons[:0]
	for i := range r.Reasons {
		rec.Reasons = append(rec.Reasons, store.Reason{Type: r.Reasons[i].Type, Comment: optional(&r.Reasons[i].Comment)})
	}
	rec.AuthResults.DKIM = rec.AuthResults.DKIM[:0]
	for i := range r.DKIMResults {
		a := &r.DKIMResults[i]
		rec.AuthResults.DKIM = append(rec.AuthResults.DKIM, store.DKIMAuth{Domain: a.Domain, Selector: optional(&a.Selector), Result: a.Result})
	}
	rec.AuthResults.SPF = rec.AuthResults.SPF[:0]
	for i := range r.SPFResults {
		a := &r.SPFResults[i]
		rec.AuthResults.SPF = append(rec.AuthResults.SPF, store.SPFAuth{Domain: a.Domain, Scope: optional(&a.Scope), Result: a.Result})
	}
	rec.Geo = j.locate(r.SourceIP)
	d.Add(rec)
}

// optional maps the parser's "" (absent or empty) to nil (JSON null). The
// pointer is only read while the record is encoded.
func optional(s *string) *string {
	if *s == "" {
		return nil
	}
	return s
}

// located is a cached lookup: found is false when the database had no
// answer (the record then has no geo object at all).
type located struct {
	geo   store.Geo
	found bool
}

// locate returns the geolocation of ip, nil without a database or an
// answer. The value is the job's, valid until the next call. A source
// repeated by the next record is not looked up again; past geoCacheAfter
// lookups, a cache of values (not one allocation per source) answers the
// sources seen before.
func (j *job) locate(ip netip.Addr) *store.Geo {
	if !j.geoOn {
		return nil
	}
	if ip == j.geoLast && j.geoN > 0 {
		return j.found()
	}
	j.geoLast = ip
	if j.geoCache == nil && j.geoN < geoCacheAfter {
		j.geoN++
		j.geoFound = j.lookup(ip, &j.geo)
		return j.found()
	}
	if j.geoCache == nil {
		j.geoCache = make(map[netip.Addr]located, 4*geoCacheAfter)
	}
	l, ok := j.geoCache[ip]
	if !ok {
		if len(j.geoCache) >= maxGeoCache {
			clear(j.geoCache)
		}
		l.found = j.lookup(ip, &l.geo)
		j.geoCache[ip] = l
	}
	j.geo, j.geoFound = l.geo, l.found
	return j.found()
}

// lookup fills g with the database's answer for ip, and tells whether it
// had one.
func (j *job) lookup(ip netip.Addr, g *store.Geo) bool {
	info := j.p.cfg.Geo.Lookup(ip)
	if info == nil {
		*g = store.Geo{}
		return false
	}
	*g = store.Geo{CountryCode: info.CountryCode, CountryName: info.CountryName,
		City: info.City, Latitude: info.Latitude, Longitude: info.Longitude, ASN: info.ASN, ASOrg: info.ASOrg}
	return true
}

func (j *job) found() *store.Geo {
	if !j.geoFound {
		return nil
	}
	return &j.geo
}

// flush hands the draft's buffered records to the writer. It first waits
// for the previous chunk, so at most one chunk per input is in flight,
// and only then takes the chunk: TakeChunk gives the draft a new buffer
// the size of the chunk, which taken before the wait made three chunks'
// bytes at once (the one committed, the one waiting, the new buffer) and
// 1.2 MB more live heap in a large report's import (issue 25).
func (j *job) flush(d *store.ReportDraft) error {
	if d.Buffered() == 0 {
		return nil
	}
	if err := j.waitInflight(); err != nil {
		return err
	}
	c := d.TakeChunk()
	if c == nil {
		return nil
	}
	w := j.newWork(store.IngestBatch{Chunks: []*store.RecordChunk{c}}, c.Len(), true)
	if err := j.p.submit(j.ctx, w); err != nil {
		return err
	}
	j.inflight = w
	return nil
}

func (j *job) waitInflight() error {
	if j.inflight == nil {
		return nil
	}
	w := j.inflight
	j.inflight = nil
	held := j.slot
	j.release()
	<-w.done
	if held {
		if err := j.acquire(); err != nil {
			return err
		}
	}
	return w.err
}

// commitReports makes the finished drafts visible in one commit and fills
// the result in input order.
func (j *job) commitReports() (*Result, error) {
	if err := j.waitInflight(); err != nil {
		j.cleanup()
		return nil, err
	}
	var outs []store.ReportOutcome
	if len(j.drafts) > 0 || len(j.tls) > 0 {
		w := j.newWork(store.IngestBatch{Reports: j.drafts, TLS: j.tls}, j.buffered+len(j.tls), false)
		j.doneProducing()
		if err := j.p.submit(j.ctx, w); err != nil {
			j.cleanup()
			return nil, err
		}
		<-w.done
		if w.err != nil {
			j.cleanup()
			return nil, w.err
		}
		outs = w.outs
	}
	res := &Result{Reports: []Outcome{}}
	k := 0
	for _, s := range j.places {
		if s.tls != nil {
			j.tlsOutcome(res, s)
			continue
		}
		if s.draft == nil {
			res.Reports = append(res.Reports, s.out)
			j.p.met.report(j.d.Source, KindAggregate, "duplicate", 0)
			continue
		}
		o := outs[k]
		k++
		if !o.Stored {
			j.giveUp(s.draft)
		}
		rep := s.draft.Report()
		switch {
		case o.Stored:
			res.Reports = append(res.Reports, Outcome{Kind: KindAggregate, ReportID: rep.ID, Domain: rep.Domain, Records: s.draft.Records()})
			j.p.met.report(j.d.Source, KindAggregate, "stored", s.draft.Records())
		case o.Duplicate != nil:
			res.Reports = append(res.Reports, Outcome{Kind: KindAggregate, ReportID: o.Duplicate.ID, Domain: o.Duplicate.Domain,
				Duplicate: true, Records: o.Duplicate.RecordCount, DifferentContent: !sameContent(&rep, o.Duplicate)})
			j.p.met.report(j.d.Source, KindAggregate, "duplicate", 0)
		default:
			j.problems = append(j.problems, fmt.Sprintf("domain %s was deleted before its report was stored", rep.Domain))
		}
	}
	return res, nil
}

// quarantine keeps the input's bytes with the reasons nothing was usable.
func (j *job) quarantine() (*Result, error) {
	if j.d.Source == SourceHTTPS {
		// Refused, not kept: the sender is told why (see SourceHTTPS).
		reason := strings.Join(j.problems, "; ")
		j.doneProducing()
		j.p.met.report(j.d.Source, "", "refused", 0)
		return &Result{Reports: []Outcome{}, Reason: reason}, nil
	}
	raw, size, err := j.in.raw()
	if err != nil {
		return nil, err
	}
	reason := strings.Join(j.problems, "; ")
	if reason == "" {
		reason = "no DMARC aggregate report found"
	}
	if size > int64(len(raw)) {
		reason += fmt.Sprintf(" (only the first %d of %d bytes are kept)", len(raw), size)
	}
	item := &store.QuarantineItem{
		Entry: store.QuarantineEntry{ReceivedAt: j.d.ReceivedAt, Source: string(j.d.Source), Name: j.d.Name,
			Reason: reason, Size: size, OrgID: j.route.orgID(), Recipient: j.d.Recipient},
		Raw:      raw,
		MaxTotal: j.p.cfg.QuarantineTotalBytes,
	}
	if j.retry != nil {
		item.Entry.ID = j.retry.ID
	}
	j.doneProducing()
	w := j.newWork(store.IngestBatch{Quarantine: []*store.QuarantineItem{item}}, 0, false)
	if err := j.p.submit(j.ctx, w); err != nil {
		return nil, err
	}
	<-w.done
	if w.err != nil {
		return nil, w.err
	}
	j.p.met.report(j.d.Source, "", "quarantined", 0)
	return &Result{Reports: []Outcome{}, Quarantined: item.Entry.ID, Reason: item.Entry.Reason}, nil
}

// problem records why a payload was not stored, unless the input itself
// failed (then the walk stops).
func (j *job) problem(name string, err error) error {
	if src := j.in.failed(); src != nil {
		return j.fail(src)
	}
	if name != "" {
		j.problems = append(j.problems, name+": "+reasonOf(err))
	} else {
		j.problems = append(j.problems, reasonOf(err))
	}
	return nil
}

// reasonOf is err as a person reads it in a quarantine reason, a refusal
// or the log: without the package prefix its message starts with
// ("dmarc: ", "ingest: "), which would otherwise stand after a member's
// name ("cut.xml: dmarc: report cut short") or at the start of a reason.
func reasonOf(err error) string {
	msg := err.Error()
	for _, p := range []string{"dmarc: ", "ingest: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return msg
}

// fail stops the walk: the input as a whole fails.
func (j *job) fail(err error) error {
	if j.abort == nil {
		j.abort = err
	}
	return j.abort
}

// drop forgets a draft that will not be committed, deleting the records it
// already handed out.
func (j *job) drop(d *store.ReportDraft) error {
	if err := j.waitInflight(); err != nil {
		return err
	}
	j.reading = nil
	j.giveUp(d)
	return nil
}

// cleanup deletes the records committed for reports that will not be stored.
func (j *job) cleanup() {
	_ = j.waitInflight()
	if j.reading != nil {
		j.giveUp(j.reading)
	}
	for _, d := range j.drafts {
		j.giveUp(d)
	}
}

// giveUp aborts a draft that will not be stored; a failure is logged.
func (j *job) giveUp(d *store.ReportDraft) {
	if err := d.Abort(j.p.db); err != nil {
		// Left for DiscardPendingReports at the next start.
		j.p.log.Error("deleting the records of a report not stored", "report_id", d.ID(), "error", err)
	}
}
