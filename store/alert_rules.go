package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/alert"
	"github.com/dmarcd/dmarcd/store/internal/days"
)

// Running the alert rules. Package alert decides (thresholds, evaluation,
// texts); this file runs its report and failure report rules inside the
// ingest commit that stores the reports, so an alert exists exactly when
// its report does. A ruleEval is the alert.History of one commit: it reads
// the dedup entries (bucketAlertDedup) and the source index
// (alert_sources.go), and keeps both up to date as it stores what the
// rules raise and learns the sources of each report, so that a rule sees
// what the reports before it in the same commit did.

// alertSettings are a DB's rules and alert hook; the zero value means the
// default rules and no hook.
type alertSettings struct {
	rules   atomic.Pointer[alert.Rules]
	hook    atomic.Pointer[func(*Alert)]
	sources sourceCache
}

// raiseAlert inserts a and arranges for the hook to see it once tx commits.
func (db *DB) raiseAlert(tx *bolt.Tx, a *Alert) error {
	if err := insertAlert(tx, a); err != nil {
		return err
	}
	if fn := db.alerts.hook.Load(); fn != nil {
		cp := *a
		tx.OnCommit(func() { (*fn)(&cp) })
	}
	return nil
}

// alertOf is the alert to store for what a rule raised about a domain at
// now.
func alertOf(c *alert.Candidate, orgID, domainID string, now time.Time) (*Alert, error) {
	raw, err := json.Marshal(c.Details)
	if err != nil {
		return nil, fmt.Errorf("encode details of a %s alert: %w", c.Type, err)
	}
	return &Alert{Type: c.Type, Severity: c.Severity, Title: c.Title, Message: c.Message,
		OrgID: orgID, DomainID: new(domainID), Details: raw, CreatedAt: now}, nil
}

// ruleEval runs the rules for one commit; it is their alert.History.
type ruleEval struct {
	db    *DB
	tx    *bolt.Tx
	rules alert.Rules
	now   time.Time
	today uint32
	dedup *bolt.Bucket
	idx   *sourceIndex
	// counts caches RaisedCount by dedup key prefix, read once per commit
	// and counted up as alerts are raised.
	counts map[string]int
	// domains are the domains the failure rule looked up (nil: gone).
	domains map[string]*domainRecord
}

// raiseAlerts runs the rules for the reports and the failure reports just
// stored, in the commit's transaction.
func (in *Ingester) raiseAlerts(tx *bolt.Tx, stored []*ReportDraft, failures []FailureRef, now time.Time) error {
	rules := in.db.AlertRules()
	if rules.Disabled || len(stored) == 0 && len(failures) == 0 {
		return nil
	}
	e := &ruleEval{db: in.db, tx: tx, rules: rules, now: now, today: days.Of(now),
		dedup: tx.Bucket(bucketAlertDedup), idx: newSourceIndex(in.db, tx),
		counts: map[string]int{}}
	for _, d := range stored {
		if err := e.report(d); err != nil {
			return fmt.Errorf("alert rules for report %s: %w", d.rep.ID, err)
		}
	}
	if err := e.idx.flush(tx); err != nil {
		return fmt.Errorf("alert rules: source index: %w", err)
	}
	for i := range failures {
		if err := e.failure(&failures[i]); err != nil {
			return fmt.Errorf("alert rules for failure report %s: %w", failures[i].ID, err)
		}
	}
	return nil
}

// report evaluates the rules for a stored report, then learns its sources
// (the rules must not know them yet) and raises what the rules decided.
func (e *ruleEval) report(d *ReportDraft) error {
	var raised []alert.Candidate
	if e.rules.Fresh(d.rep.DateEnd, e.now) {
		rep := ruleReport(d)
		raised = e.rules.EvaluateReport(&rep, e, e.now)
	}
	if e.rules.KeepsSources(d.day, e.today) {
		hs := make([]uint64, 0, len(d.src))
		for i := range d.src {
			hs = append(hs, hashIP(d.src[i].IP))
		}
		e.idx.learn(d.rep.DomainID, d.day, hs)
	}
	for i := range raised {
		if err := e.raise(&raised[i], d.rep.OrgID, d.rep.DomainID); err != nil {
			return err
		}
	}
	return nil
}

// ruleReport is what the report rules see of a draft.
func ruleReport(d *ReportDraft) alert.Report {
	r := &d.rep
	rep := alert.Report{ID: r.ID, DomainID: r.DomainID, Domain: r.Domain, Reporter: r.OrgName,
		ReporterEmail: r.OrgEmail, ExternalReportID: r.ExternalReportID, DateBegin: r.DateBegin, DateEnd: r.DateEnd,
		Messages: r.MessageCount, DMARCPass: r.DMARCPassCount, DMARCFail: r.DMARCFailCount}
	for i := range d.src {
		c := &d.src[i]
		if c.Fail > 0 {
			rep.FailingSources = append(rep.FailingSources, alert.Source{IP: c.IP, Messages: c.Messages,
				DMARCPass: c.Pass, DMARCFail: c.Fail, Origin: alert.Origin{CountryCode: c.CC, ASN: c.ASN, ASOrg: c.ASOrg}})
		}
	}
	return rep
}

// failure evaluates the failure report rule for a stored failure report.
func (e *ruleEval) failure(f *FailureRef) error {
	if !ValidID(f.DomainID) {
		return nil
	}
	dom, seen := e.domains[f.DomainID]
	if !seen {
		var err error
		dom, err = getDomain(e.tx, f.DomainID)
		if err != nil && !isKind(err, ErrNotFound) {
			return err
		}
		if e.domains == nil {
			e.domains = map[string]*domainRecord{}
		}
		e.domains[f.DomainID] = dom
	}
	if dom == nil {
		return nil
	}
	rf := alert.Failure{ID: f.ID, DomainID: dom.ID, Domain: dom.Name, SourceIP: f.SourceIP,
		ArrivalDate: f.ArrivalDate, Geo: f.Geo}
	if f.Geo != nil {
		rf.Origin = alert.Origin{CountryCode: f.Geo.CountryCode, ASN: f.Geo.ASN, ASOrg: f.Geo.ASOrg}
	}
	if c := e.rules.EvaluateFailure(&rf, e, e.now); c != nil {
		return e.raise(c, dom.OrgID, dom.ID)
	}
	return nil
}

// raise stores an alert of the domain and remembers it under its dedup
// key with its severity.
func (e *ruleEval) raise(c *alert.Candidate, orgID, domainID string) error {
	_, err := e.raiseAlert(c, orgID, domainID)
	return err
}

// raiseAlert is raise returning the alert as stored.
func (e *ruleEval) raiseAlert(c *alert.Candidate, orgID, domainID string) (*Alert, error) {
	a, err := alertOf(c, orgID, domainID, e.now)
	if err != nil {
		return nil, err
	}
	if err := e.db.raiseAlert(e.tx, a); err != nil {
		return nil, err
	}
	k := c.Dedup
	key := dedupKey(k.Day, k.DomainID, k.Type, k.Cause)
	if e.dedup.Get(key) == nil {
		prefix := string(dedupKey(k.Day, k.DomainID, k.Type, ""))
		if n, ok := e.counts[prefix]; ok {
			e.counts[prefix] = n + 1
		}
	}
	v := make([]byte, 0, 1+idLen)
	return a, e.dedup.Put(key, append(append(v, severityRank(c.Severity)), a.ID...))
}

// Raised implements alert.History.
func (e *ruleEval) Raised(k alert.DedupKey) (string, bool) {
	v := e.dedup.Get(dedupKey(k.Day, k.DomainID, k.Type, k.Cause))
	if v == nil {
		return "", false
	}
	if len(v) == 0 {
		return "", true
	}
	return severityOfRank(v[0]), true
}

// RaisedCount implements alert.History.
func (e *ruleEval) RaisedCount(day uint32, domainID, typ string) int {
	prefix := dedupKey(day, domainID, typ, "")
	n, ok := e.counts[string(prefix)]
	if !ok {
		n = countPrefix(e.dedup, prefix)
		e.counts[string(prefix)] = n
	}
	return n
}

// HasSources implements alert.History.
func (e *ruleEval) HasSources(domainID string) bool { return e.idx.hasHistory(domainID) }

// SeenSource implements alert.History.
func (e *ruleEval) SeenSource(domainID, ip string, from, to uint32) bool {
	return seenIn(e.idx.window(domainID, from, to), hashIP(ip))
}

// dedupKey is UTC day (big-endian) | domain id | type | 0 | cause: the
// entries of a day are one range, so old ones go in one sweep.
func dedupKey(day uint32, domainID, typ, cause string) []byte {
	k := make([]byte, 0, 4+idLen+len(typ)+1+len(cause))
	k = binary.BigEndian.AppendUint32(k, day)
	k = append(append(k, domainID...), typ...)
	return append(append(k, 0), cause...)
}

// raiseMailboxAlert runs the mailbox rule (mailbox_failing) for rec after
// a failed poll at at, in the transaction that records the poll, and
// marks the run of failures alerted when it raises the alert. The alert
// names no domain.
func (db *DB) raiseMailboxAlert(tx *bolt.Tx, rec *mailboxRecord, at time.Time) error {
	m := alert.Mailbox{ID: rec.ID, Host: rec.Host, Username: rec.Username, Folder: rec.Folder,
		FailingSince: *rec.FailStart, Alerted: rec.FailAlerted}
	if rec.LastError != nil {
		m.LastError = *rec.LastError
	}
	c := db.AlertRules().EvaluateMailbox(&m, at)
	if c == nil {
		return nil
	}
	a, err := alertOf(c, rec.OrgID, "", db.now())
	if err != nil {
		return err
	}
	a.DomainID = nil
	if err := db.raiseAlert(tx, a); err != nil {
		return fmt.Errorf("mailbox_failing alert of mailbox %s: %w", rec.ID, err)
	}
	rec.FailAlerted = true
	return nil
}

// raiseTLSAlerts runs the TLS rule (tls_failure_rate) for the TLS reports
// just stored, in the transaction that stores them, so an alert exists
// exactly when its report does.
func (db *DB) raiseTLSAlerts(tx *bolt.Tx, stored []*TLSReportDetail) error {
	rules := db.AlertRules()
	if rules.Disabled || len(stored) == 0 {
		return nil
	}
	now := db.now()
	e := &ruleEval{db: db, tx: tx, rules: rules, now: now, today: days.Of(now),
		dedup: tx.Bucket(bucketAlertDedup), counts: map[string]int{}}
	names := map[string]string{}
	for _, d := range stored {
		r := d.TLSReport
		name, ok := names[r.DomainID]
		if !ok {
			dom, err := getDomain(tx, r.DomainID)
			if err != nil {
				return err
			}
			name = dom.Name
			names[r.DomainID] = name
		}
		rep := alert.TLSReport{ID: r.ID, DomainID: r.DomainID, Domain: name, Reporter: r.OrganizationName,
			ReportID: r.ReportID, DateBegin: r.DateBegin, DateEnd: r.DateEnd,
			Successful: r.SuccessfulSessions, Failed: r.FailedSessions, ResultTypes: map[string]int64{}}
		for _, p := range d.Policies {
			for _, f := range p.FailureDetails {
				rep.ResultTypes[f.ResultType] += f.FailedSessions
			}
		}
		if c := rules.EvaluateTLS(&rep, e, now); c != nil {
			if err := e.raise(c, r.OrgID, r.DomainID); err != nil {
				return fmt.Errorf("alert rules for TLS report %s: %w", r.ID, err)
			}
		}
	}
	return nil
}
