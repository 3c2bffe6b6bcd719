package store

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Alert rules from reports (DESIGN.md), evaluated inside the ingest commit
// that stores the reports, so an alert exists exactly when its report does.
//
//   - dmarc_failure_rate, per stored aggregate report: warning when at least
//     MinFailing messages fail DMARC and they are at least
//     FailureRateWarning of the report's messages, critical at
//     FailureRateCritical (MinFailing applies to both, so that one failing
//     message of one is no alarm). At most one per domain per UTC day and
//     severity: a warning does not hold back a critical alert later that
//     day (the situation got worse), a critical one holds back a later
//     warning.
//   - new_failing_source (info): a source IP with mail failing DMARC in a
//     report, not seen in any report of the domain from NewSourceDays days
//     before the report's first day up to that day. A per-domain index
//     (alert_sources.go: the sources of each day) learns every source of
//     every stored report. The first report of a domain is its baseline
//     and raises none (every source would be "new"); at most
//     MaxNewSourceAlerts per domain per UTC day, so a spoofing wave of
//     thousands of IPs is a few alerts, not thousands; the index still
//     learns them all.
//   - forensic_report_received (info): at most one per domain per UTC clock
//     hour of the time it is raised.
//
// Reports whose date range ended more than MaxReportAge before the commit
// (an archive being imported) raise no alert; the source index still learns
// from those recent enough to matter. "Per UTC day" is the day the alert
// is raised.

// AlertRules are the settings of the rules. The zero value is not valid;
// start from DefaultAlertRules.
type AlertRules struct {
	// Disabled turns the report rules off: no alert, no source learning.
	Disabled bool
	// FailureRateWarning and FailureRateCritical are DMARC failure rates
	// (0..1] of a report that raise dmarc_failure_rate.
	FailureRateWarning, FailureRateCritical float64
	// MinFailing is the fewest failing messages a report needs to raise
	// dmarc_failure_rate.
	MinFailing int64
	// NewSourceDays is how long a source stays known after its last report.
	NewSourceDays int
	// MaxReportAge is how old a report's date_end may be for it to raise
	// alerts.
	MaxReportAge time.Duration
	// MaxNewSourceAlerts caps new_failing_source alerts per domain per day.
	MaxNewSourceAlerts int
}

// DefaultAlertRules returns the thresholds of DESIGN.md.
func DefaultAlertRules() AlertRules {
	return AlertRules{
		FailureRateWarning:  0.10,
		FailureRateCritical: 0.50,
		MinFailing:          10,
		NewSourceDays:       30,
		MaxReportAge:        7 * 24 * time.Hour,
		MaxNewSourceAlerts:  10,
	}
}

// Validate returns an ErrInvalid error naming the first bad setting.
func (r AlertRules) Validate() error {
	switch {
	case !(r.FailureRateWarning > 0 && r.FailureRateWarning <= 1):
		return errorf(ErrInvalid, "the failure rate warning threshold must be over 0 and at most 1")
	case !(r.FailureRateCritical >= r.FailureRateWarning && r.FailureRateCritical <= 1):
		return errorf(ErrInvalid, "the failure rate critical threshold must be between the warning threshold and 1")
	case r.MinFailing < 1:
		return errorf(ErrInvalid, "the minimum of failing messages must be at least 1")
	case r.NewSourceDays < 1 || r.NewSourceDays > 3650:
		return errorf(ErrInvalid, "the new source window must be 1 to 3650 days")
	case r.MaxReportAge <= 0:
		return errorf(ErrInvalid, "the report age limit must be positive")
	case r.MaxNewSourceAlerts < 1:
		return errorf(ErrInvalid, "the new source alert cap must be at least 1")
	}
	return nil
}

// alertSettings are a DB's rules and alert hook; the zero value means the
// default rules and no hook.
type alertSettings struct {
	rules   atomic.Pointer[AlertRules]
	hook    atomic.Pointer[func(*Alert)]
	sources sourceCache
}

// SetAlertRules replaces the rules used by the next commits. ErrInvalid as
// AlertRules.Validate.
func (db *DB) SetAlertRules(r AlertRules) error {
	if !r.Disabled {
		if err := r.Validate(); err != nil {
			return err
		}
	}
	db.alerts.rules.Store(&r)
	return nil
}

// AlertRules returns the rules in use.
func (db *DB) AlertRules() AlertRules {
	if r := db.alerts.rules.Load(); r != nil {
		return *r
	}
	return DefaultAlertRules()
}

// OnAlert sets fn to be called with every alert created from now on, after
// the transaction that created it committed (for metrics). fn must return
// quickly and must not write to the database; nil removes it.
func (db *DB) OnAlert(fn func(*Alert)) {
	if fn == nil {
		db.alerts.hook.Store(nil)
		return
	}
	db.alerts.hook.Store(&fn)
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

// ruleEval evaluates the rules for one commit.
type ruleEval struct {
	db    *DB
	tx    *bolt.Tx
	rules AlertRules
	now   time.Time
	today uint32
	dedup *bolt.Bucket
	idx   *sourceIndex
	// newSources counts the new_failing_source alerts of each domain
	// today, read once per commit.
	newSources map[string]int
}

// raiseAlerts evaluates the rules for the reports just stored and the
// failure reports just stored, in the commit's transaction.
func (in *Ingester) raiseAlerts(tx *bolt.Tx, stored []*ReportDraft, failures []FailureRef, now time.Time) error {
	rules := in.db.AlertRules()
	if rules.Disabled || len(stored) == 0 && len(failures) == 0 {
		return nil
	}
	e := &ruleEval{db: in.db, tx: tx, rules: rules, now: now, today: dayNumber(now),
		dedup: tx.Bucket(bucketAlertDedup), idx: newSourceIndex(in.db, tx, rules.NewSourceDays),
		newSources: map[string]int{}}
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

func (e *ruleEval) report(d *ReportDraft) error {
	fresh := e.now.Sub(d.rep.DateEnd) <= e.rules.MaxReportAge
	newSources := e.learnSources(d, fresh)
	if !fresh {
		return nil
	}
	if err := e.failureRate(d); err != nil {
		return err
	}
	return e.newFailingSources(d, newSources)
}

// learnSources adds every source of the report to the source index and
// returns the failing ones not seen in the window up to the report's day
// (none for the domain's first report, or when want is false). A report
// too old for its day to fall in any window is not learnt.
func (e *ruleEval) learnSources(d *ReportDraft, want bool) []SourceStats {
	day, domain := d.day, d.rep.DomainID
	if int64(day)+int64(e.rules.NewSourceDays)+1 < int64(e.today) {
		return nil
	}
	var window []*daySet
	check := want && e.idx.hasHistory(domain)
	if check {
		window = e.idx.window(domain, day)
	}
	hs := make([]uint64, 0, len(d.src))
	var fresh []SourceStats
	for ip, c := range d.src {
		h := hashIP(ip)
		hs = append(hs, h)
		if check && c.fail > 0 && !seenIn(window, h) {
			fresh = append(fresh, SourceStats{SourceIP: ip, Messages: c.messages, DMARCPass: c.pass, DMARCFail: c.fail,
				CountryCode: c.cc, ASN: c.asn, ASOrg: c.asOrg})
		}
	}
	e.idx.learn(domain, day, hs)
	slices.SortFunc(fresh, func(x, y SourceStats) int {
		return cmp.Or(cmp.Compare(y.DMARCFail, x.DMARCFail), cmp.Compare(x.SourceIP, y.SourceIP))
	})
	return fresh
}

// failureRateDetails explain a dmarc_failure_rate alert.
type failureRateDetails struct {
	reportRef
	Messages       int64           `json:"messages"`
	DMARCPass      int64           `json:"dmarc_pass"`
	DMARCFail      int64           `json:"dmarc_fail"`
	FailureRate    float64         `json:"failure_rate"`
	Threshold      float64         `json:"threshold"`
	MinFailing     int64           `json:"min_failing"`
	FailingSources []failingSource `json:"top_failing_sources"`
}

// reportRef names the aggregate report an alert comes from.
type reportRef struct {
	ReportID         string    `json:"report_id"`
	Reporter         string    `json:"reporter"`
	ReporterEmail    string    `json:"reporter_email"`
	ExternalReportID string    `json:"external_report_id"`
	DateBegin        time.Time `json:"date_begin"`
	DateEnd          time.Time `json:"date_end"`
}

// failingSource is a source IP of a report with its failures and geo.
type failingSource struct {
	SourceIP    string  `json:"source_ip"`
	Messages    int64   `json:"messages"`
	DMARCFail   int64   `json:"dmarc_fail"`
	CountryCode *string `json:"country_code"`
	ASN         *uint32 `json:"asn"`
	ASOrg       *string `json:"as_org"`
}

// topFailingSources is how many sources a failure rate alert lists.
const topFailingSources = 5

func refOf(r *Report) reportRef {
	return reportRef{ReportID: r.ID, Reporter: r.OrgName, ReporterEmail: r.OrgEmail,
		ExternalReportID: r.ExternalReportID, DateBegin: r.DateBegin, DateEnd: r.DateEnd}
}

func sourceOf(s *SourceStats) failingSource {
	return failingSource{SourceIP: s.SourceIP, Messages: s.Messages, DMARCFail: s.DMARCFail,
		CountryCode: s.CountryCode, ASN: s.ASN, ASOrg: s.ASOrg}
}

func (e *ruleEval) failureRate(d *ReportDraft) error {
	r := &d.rep
	if r.MessageCount <= 0 || r.DMARCFailCount < e.rules.MinFailing {
		return nil
	}
	rate := float64(r.DMARCFailCount) / float64(r.MessageCount)
	sev, threshold := SeverityCritical, e.rules.FailureRateCritical
	if rate < threshold {
		sev, threshold = SeverityWarning, e.rules.FailureRateWarning
	}
	if rate < threshold {
		return nil
	}
	key := dedupKey(e.today, r.DomainID, AlertDMARCFailureRate, "")
	if v := e.dedup.Get(key); len(v) > 0 && v[0] >= severityRank(sev) {
		return nil
	}
	det := failureRateDetails{reportRef: refOf(r), Messages: r.MessageCount, DMARCPass: r.DMARCPassCount,
		DMARCFail: r.DMARCFailCount, FailureRate: round4(rate), Threshold: threshold, MinFailing: e.rules.MinFailing,
		FailingSources: []failingSource{}}
	for _, s := range d.src.sorted() {
		if s.DMARCFail > 0 && len(det.FailingSources) < topFailingSources {
			det.FailingSources = append(det.FailingSources, sourceOf(&s))
		}
	}
	a := &Alert{
		Type: AlertDMARCFailureRate, Severity: sev,
		Title: fmt.Sprintf("%s of the mail from %s failed DMARC", percent(rate), r.Domain),
		Message: fmt.Sprintf("The report of %s (%s to %s) counts %d of %d messages failing DMARC (%s), at or over the %s threshold of %s.",
			r.OrgName, r.DateBegin.Format(time.DateOnly), r.DateEnd.Format(time.DateOnly),
			r.DMARCFailCount, r.MessageCount, percent(rate), sev, percent(threshold)),
	}
	return e.raise(a, r.OrgID, r.DomainID, det, key, severityRank(sev))
}

// newSourceDetails explain a new_failing_source alert.
type newSourceDetails struct {
	failingSource
	WindowDays int       `json:"window_days"`
	Report     reportRef `json:"report"`
}

func (e *ruleEval) newFailingSources(d *ReportDraft, fresh []SourceStats) error {
	if len(fresh) == 0 {
		return nil
	}
	r := &d.rep
	raised, ok := e.newSources[r.DomainID]
	if !ok {
		raised = countPrefix(e.dedup, dedupKey(e.today, r.DomainID, AlertNewFailingSource, ""))
	}
	defer func() { e.newSources[r.DomainID] = raised }()
	for i := range fresh {
		if raised >= e.rules.MaxNewSourceAlerts {
			return nil
		}
		s := &fresh[i]
		key := dedupKey(e.today, r.DomainID, AlertNewFailingSource, s.SourceIP)
		if e.dedup.Get(key) != nil {
			continue
		}
		a := &Alert{
			Type: AlertNewFailingSource, Severity: SeverityInfo,
			Title: fmt.Sprintf("New source %s sends mail failing DMARC for %s", s.SourceIP, r.Domain),
			Message: fmt.Sprintf("%s%s sent %d messages failing DMARC in the report of %s (%s to %s) and was not seen for %s in the %d days before.",
				s.SourceIP, describeSource(s), s.DMARCFail, r.OrgName, r.DateBegin.Format(time.DateOnly),
				r.DateEnd.Format(time.DateOnly), r.Domain, e.rules.NewSourceDays),
		}
		det := newSourceDetails{failingSource: sourceOf(s), WindowDays: e.rules.NewSourceDays, Report: refOf(r)}
		if err := e.raise(a, r.OrgID, r.DomainID, det, key, severityRank(SeverityInfo)); err != nil {
			return err
		}
		raised++
	}
	return nil
}

// describeSource renders " (US, AS15169 GOOGLE)" from what geo knows.
func describeSource(s *SourceStats) string {
	var parts []string
	if s.CountryCode != nil {
		parts = append(parts, *s.CountryCode)
	}
	if s.ASN != nil {
		as := "AS" + strconv.FormatUint(uint64(*s.ASN), 10)
		if s.ASOrg != nil {
			as += " " + *s.ASOrg
		}
		parts = append(parts, as)
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// forensicDetails explain a forensic_report_received alert.
type forensicDetails struct {
	ForensicReportID string    `json:"forensic_report_id"`
	SourceIP         *string   `json:"source_ip"`
	Geo              *Geo      `json:"geo"`
	ArrivalDate      time.Time `json:"arrival_date"`
	HourStart        time.Time `json:"hour_start"`
}

func (e *ruleEval) failure(f *FailureRef) error {
	if !ValidID(f.DomainID) {
		return nil
	}
	if e.now.Sub(f.ArrivalDate) > e.rules.MaxReportAge {
		return nil // an archive being imported: old news, as for aggregate reports
	}
	hour := e.now.Truncate(time.Hour)
	key := dedupKey(e.today, f.DomainID, AlertForensicReportReceived, strconv.Itoa(hour.Hour()))
	if e.dedup.Get(key) != nil {
		return nil
	}
	dom, err := getDomain(e.tx, f.DomainID)
	if isKind(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	det := forensicDetails{ForensicReportID: f.ID, Geo: f.Geo, ArrivalDate: f.ArrivalDate.UTC().Truncate(time.Second), HourStart: hour}
	from := ""
	if f.SourceIP != "" {
		det.SourceIP = new(f.SourceIP)
		from = " about mail from " + f.SourceIP + describeGeo(f.Geo)
	}
	a := &Alert{
		Type: AlertForensicReportReceived, Severity: SeverityInfo,
		Title:   "Failure report received for " + dom.Name,
		Message: fmt.Sprintf("A failure (forensic) report%s arrived for %s; further ones this hour raise no alert.", from, dom.Name),
	}
	return e.raise(a, dom.OrgID, dom.ID, det, key, severityRank(SeverityInfo))
}

// describeGeo renders " (US, AS15169 GOOGLE)" from a record's geo.
func describeGeo(g *Geo) string {
	if g == nil {
		return ""
	}
	return describeSource(&SourceStats{CountryCode: g.CountryCode, ASN: g.ASN, ASOrg: g.ASOrg})
}

// raise stores an alert of the domain with its details and remembers it
// under the dedup key with the severity rank.
func (e *ruleEval) raise(a *Alert, orgID, domainID string, details any, key []byte, rank byte) error {
	raw, err := json.Marshal(details)
	if err != nil {
		return err
	}
	a.OrgID, a.DomainID, a.Details, a.CreatedAt = orgID, new(domainID), raw, e.now
	if err := e.db.raiseAlert(e.tx, a); err != nil {
		return err
	}
	v := make([]byte, 0, 1+idLen)
	return e.dedup.Put(key, append(append(v, rank), a.ID...))
}

// dedupKey is UTC day (big-endian) | domain id | type | 0 | cause: the
// entries of a day are one range, so old ones go in one sweep.
func dedupKey(day uint32, domainID, typ, cause string) []byte {
	k := make([]byte, 0, 4+idLen+len(typ)+1+len(cause))
	k = binary.BigEndian.AppendUint32(k, day)
	k = append(append(k, domainID...), typ...)
	return append(append(k, 0), cause...)
}

func round4(f float64) float64 { return math.Round(f*10000) / 10000 }

// percent renders a rate as "12.5%".
func percent(f float64) string {
	return strconv.FormatFloat(math.Round(f*1000)/10, 'f', -1, 64) + "%"
}
