// Package digest builds the daily and weekly digest of an organization:
// per domain its messages and DMARC pass rate with the change since the
// period before, its new senders, the sender groups failing most with
// what to fix, its stage on the way to p=reject with what would move it,
// and its TLS failures; then the organization's open alerts. It reads what
// the API reads (store.DB.DomainStatistics, store.DB.TLSStatistics,
// store.DB.ListAlerts, and the sender views of package senders) and says
// every figure as the web interface does (internal/numfmt). Render turns
// a Digest into a mail's subject, plain text and email-safe HTML.
package digest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/dmarcd/dmarcd/alert"
	"github.com/dmarcd/dmarcd/senders"
	"github.com/dmarcd/dmarcd/store"
)

// AdviceDays is the window of the policy advice a digest states: the 30
// UTC days ending with the period, /policy-advice's default.
const AdviceDays = 30

// Limits cap the lists of a digest, so that a large organization's still
// fits a mail: the rest is counted ("and 12 more").
type Limits struct {
	Domains    int // rows of the domains table
	Detailed   int // domains with a section of their own
	NewSenders int // per domain
	Failing    int // failing sender groups per domain
	Hints      int // hints per failing group
	TLS        int // TLS result types per domain
	Alerts     int // open alerts
}

// DefaultLimits are the caps when Builder.Limits is zero.
var DefaultLimits = Limits{Domains: 50, Detailed: 10, NewSenders: 5, Failing: 3, Hints: 2, TLS: 3, Alerts: 10}

// Builder builds digests from a store and the sender views.
type Builder struct {
	DB *store.DB
	// Views are the sender views (as the API's /senders and
	// /policy-advice); nil uses the embedded known senders and no DNS.
	Views  *senders.Views
	Limits Limits

	once sync.Once
	def  *senders.Views // without Views
}

// Digest is the digest of one organization over one period.
type Digest struct {
	OrgID        string
	Organization string
	Period       Period
	// From and To are the first and last UTC day of the period; PrevFrom
	// and PrevTo those of the period before it.
	From, To, PrevFrom, PrevTo time.Time
	GeneratedAt                time.Time
	// LookbackDays is how many days before the period a new sender did
	// not send: the days of the AdviceDays ending with the period that
	// are not the period's.
	LookbackDays int

	// Totals over every domain of the organization.
	Messages, DMARCPass, PrevMessages, PrevDMARCPass int64

	Domains     []*Domain // the table's rows, most messages first
	MoreDomains int       // domains left out of the table
	// Detailed are the domains of the table with something to say (a
	// failing sender, a new one, a TLS failure, a next step), at most
	// Limits.Detailed; MoreDetailed how many more had something.
	Detailed     []*Domain
	MoreDetailed int

	Alerts     []*Alert // open alerts, the most severe first, then newest
	OpenAlerts int      // every open alert of the organization
}

// Domain is one domain of a digest.
type Domain struct {
	ID, Name string
	// Messages and DMARCPass over the period (DomainStatistics' message
	// count and dmarc.pass); PassRate its dmarc.pass_rate.
	Messages, DMARCPass, DMARCFail int64
	PassRate                       float64
	// The same over the period before.
	PrevMessages, PrevDMARCPass int64
	PrevPassRate                float64

	NewSenders     []Sender
	MoreNewSenders int
	Failing        []Failing
	MoreFailing    int

	// Stage is the advice stage (senders.Stage...) over the AdviceDays
	// ending with the period; Reasons say why and what would move it,
	// NextRecord the record to publish next ("" for none). AdviceError
	// says why there is no advice (Stage is then "").
	Stage       string
	Reasons     []string
	NextRecord  string
	AdviceError string

	TLSSessions, TLSFailed int64
	TLSFailureRate         float64
	TLSResults             []TLSResult
	MoreTLSResults         int

	OpenAlerts int
}

// Sender is a new sender of a domain: a known service or base domain that
// sent as it in the period and not in the LookbackDays before.
type Sender struct {
	Name          string
	Type          string // senders.GroupService or senders.GroupDomain
	Messages      int64
	DMARCPassRate float64
}

// Failing is a sender group with failing mail and what to fix for it.
type Failing struct {
	Name          string
	Category      string // senders.Category...
	Messages      int64
	Failed        int64 // messages that failed DMARC
	DMARCPassRate float64
	Evidence      string   // how the group was named (senders.Group.EvidenceText)
	Hints         []string // what to fix, as /senders says it
	MoreHints     int
}

// TLSResult is one TLS failure result type with its failed sessions.
type TLSResult struct {
	Type   string
	Failed int64
}

// Alert is an open alert.
type Alert struct {
	Severity, Type, Title string
	Domain                string // "" for an alert about no domain
	CreatedAt             time.Time
}

// PassRate is the organization's DMARC pass rate over the period.
func (d *Digest) PassRate() float64 { return ratio(d.DMARCPass, d.Messages) }

// PrevPassRate is the same over the period before.
func (d *Digest) PrevPassRate() float64 { return ratio(d.PrevDMARCPass, d.PrevMessages) }

func ratio(n, total int64) float64 {
	if total <= 0 {
		return 0
	}
	return float64(n) / float64(total)
}

func (b *Builder) limits() Limits {
	if b.Limits == (Limits{}) {
		return DefaultLimits
	}
	return b.Limits
}

func (b *Builder) views() *senders.Views {
	if b.Views != nil {
		return b.Views
	}
	b.once.Do(func() { b.def = &senders.Views{DB: b.DB, Known: senders.DefaultKnownSenders()} })
	return b.def
}

// Build builds the digest of organization orgID for the last complete
// period p at now. Errors: the store's (ErrNotFound for an unknown
// organization), and ctx's.
func (b *Builder) Build(ctx context.Context, orgID string, p Period, now time.Time) (*Digest, error) {
	org, err := b.DB.FindOrganizationByID(orgID)
	if err != nil {
		return nil, err
	}
	lim := b.limits()
	d := &Digest{OrgID: org.ID, Organization: clean(org.Name), Period: p, GeneratedAt: now.UTC()}
	d.From, d.To = p.Bounds(now)
	d.LookbackDays = AdviceDays - p.days()
	d.PrevTo = d.From.AddDate(0, 0, -1)
	d.PrevFrom = d.PrevTo.AddDate(0, 0, -(p.days() - 1))
	doms, _, err := b.DB.ListDomains(org.ID, store.Page{Page: 1, Limit: math.MaxInt32})
	if err != nil {
		return nil, err
	}
	rows := make([]*Domain, 0, len(doms))
	byID := map[string]*store.Domain{}
	for _, dom := range doms {
		byID[dom.ID] = dom
		r := &Domain{ID: dom.ID, Name: clean(dom.Name)}
		if err := b.stats(r, org.ID, d); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				continue // deleted meanwhile
			}
			return nil, err
		}
		d.Messages += r.Messages
		d.DMARCPass += r.DMARCPass
		d.PrevMessages += r.PrevMessages
		d.PrevDMARCPass += r.PrevDMARCPass
		rows = append(rows, r)
	}
	slices.SortStableFunc(rows, func(a, b *Domain) int {
		return cmp.Or(cmp.Compare(b.Messages, a.Messages), cmp.Compare(a.Name, b.Name))
	})
	if len(rows) > lim.Domains {
		d.MoreDomains = len(rows) - lim.Domains
		rows = rows[:lim.Domains]
	}
	d.Domains = rows
	if err := b.allDetails(ctx, d, lim); err != nil {
		return nil, err
	}
	for _, r := range d.Domains {
		if r.noteworthy() {
			if len(d.Detailed) < lim.Detailed {
				d.Detailed = append(d.Detailed, r)
			} else {
				d.MoreDetailed++
			}
		}
	}
	if err := b.alerts(d, byID, lim); err != nil {
		return nil, err
	}
	return d, nil
}

// stats fills the figures of the period and the one before, as
// GET /domains/{id}/statistics answers them for those days.
func (b *Builder) stats(r *Domain, orgID string, d *Digest) error {
	cur, err := b.DB.DomainStatistics(orgID, r.ID, d.From, d.To)
	if err != nil {
		return err
	}
	prev, err := b.DB.DomainStatistics(orgID, r.ID, d.PrevFrom, d.PrevTo)
	if err != nil {
		return err
	}
	r.Messages, r.DMARCPass, r.DMARCFail, r.PassRate = cur.MessageCount, cur.DMARC.Pass, cur.DMARC.Fail, cur.DMARC.PassRate
	r.PrevMessages, r.PrevDMARCPass, r.PrevPassRate = prev.MessageCount, prev.DMARC.Pass, prev.DMARC.PassRate
	return nil
}

// allDetails fills the details of the table's domains, as many at once
// as there are CPUs: each reads the store on its own.
func (b *Builder) allDetails(ctx context.Context, d *Digest, lim Limits) error {
	next := make(chan *Domain)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(d.Domains)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range next {
				// A domain deleted meanwhile keeps its figures, without details.
				if err := b.details(ctx, r, d, lim); err != nil && !errors.Is(err, store.ErrNotFound) {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for _, r := range d.Domains {
		if ctx.Err() != nil || len(errs) > 0 {
			break
		}
		next <- r
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	return ctx.Err()
}

// details fills a domain's senders, advice, TLS failures and alert count.
func (b *Builder) details(ctx context.Context, r *Domain, d *Digest, lim Limits) error {
	pv, err := b.views().Period(ctx, d.OrgID, r.ID, senders.Window{From: d.From, To: d.To},
		senders.Window{From: d.To.AddDate(0, 0, -(AdviceDays - 1)), To: d.To})
	if err != nil {
		return err
	}
	failing(r, pv.Groups, lim)
	newSenders(r, pv.Groups, pv.Before, lim)
	if pv.Advice == nil {
		r.AdviceError = clean(pv.AdviceError)
	} else {
		r.Stage, r.Reasons = pv.Advice.Stage, cleanAll(pv.Advice.Reasons)
		if pv.Advice.NextRecord != nil {
			r.NextRecord = clean(*pv.Advice.NextRecord)
		}
	}
	tls, err := b.DB.TLSStatistics(d.OrgID, r.ID, d.From, d.To)
	if err != nil {
		return err
	}
	r.TLSSessions = tls.SuccessfulSessions + tls.FailedSessions
	r.TLSFailed, r.TLSFailureRate = tls.FailedSessions, tls.FailureRate
	for i, t := range tls.ByResultType {
		if i == lim.TLS {
			r.MoreTLSResults = len(tls.ByResultType) - lim.TLS
			break
		}
		r.TLSResults = append(r.TLSResults, TLSResult{Type: clean(t.ResultType), Failed: t.FailedSessions})
	}
	for _, st := range []string{store.AlertPending, store.AlertSent} {
		_, n, err := b.DB.ListAlerts(d.OrgID, store.AlertFilter{Status: st, DomainID: r.ID, Page: store.Page{Page: 1, Limit: 1}})
		if err != nil {
			return err
		}
		r.OpenAlerts += n
	}
	return nil
}

// failing keeps the groups with failing mail, most failed messages
// first, with their evidence and hints.
func failing(r *Domain, groups []*senders.Group, lim Limits) {
	var out []Failing
	for _, g := range groups {
		if g.Status == "passing" {
			continue
		}
		failed := g.Messages - int64(math.Round(float64(g.Messages)*g.DMARCPassRate))
		if failed <= 0 {
			continue
		}
		f := Failing{Name: clean(g.Name), Category: g.Category, Messages: g.Messages, Failed: failed,
			DMARCPassRate: g.DMARCPassRate, Evidence: clean(g.EvidenceText())}
		f.Hints = cleanAll(g.Hints[:min(len(g.Hints), lim.Hints)])
		f.MoreHints = len(g.Hints) - len(f.Hints)
		out = append(out, f)
	}
	slices.SortStableFunc(out, func(a, b Failing) int { return cmp.Compare(b.Failed, a.Failed) })
	if len(out) > lim.Failing {
		r.MoreFailing = len(out) - lim.Failing
		out = out[:lim.Failing]
	}
	r.Failing = out
}

// newSenders keeps the period's groups that name a sender (a known
// service or a base domain, as the new_sender alert does) and did not
// send (seen) in the days of the advice window before the period.
func newSenders(r *Domain, groups []*senders.Group, seen map[string]bool, lim Limits) {
	for _, g := range groups { // most messages first, as Senders sorts
		if g.Type != senders.GroupService && g.Type != senders.GroupDomain || g.Messages <= 0 || seen[g.Key()] {
			continue
		}
		if len(r.NewSenders) == lim.NewSenders {
			r.MoreNewSenders++
			continue
		}
		r.NewSenders = append(r.NewSenders, Sender{Name: clean(g.Name), Type: g.Type, Messages: g.Messages, DMARCPassRate: g.DMARCPassRate})
	}
}

// noteworthy reports whether the domain has anything for a section of
// its own.
func (r *Domain) noteworthy() bool {
	return len(r.Failing) > 0 || len(r.NewSenders) > 0 || r.TLSFailed > 0 || r.AdviceError != "" ||
		r.NextRecord != "" || r.Stage == senders.StageFixSenders
}

// alerts fills the organization's open alerts (pending and sent), the
// most severe first, newest first within a severity.
func (b *Builder) alerts(d *Digest, byID map[string]*store.Domain, lim Limits) error {
	for _, st := range []string{store.AlertPending, store.AlertSent} {
		_, n, err := b.DB.ListAlerts(d.OrgID, store.AlertFilter{Status: st, Page: store.Page{Page: 1, Limit: 1}})
		if err != nil {
			return err
		}
		d.OpenAlerts += n
	}
	for _, sev := range []string{alert.SeverityCritical, alert.SeverityWarning, alert.SeverityInfo} {
		var all []*store.Alert
		for _, st := range []string{store.AlertPending, store.AlertSent} {
			left := lim.Alerts - len(d.Alerts)
			if left <= 0 {
				return nil
			}
			as, _, err := b.DB.ListAlerts(d.OrgID, store.AlertFilter{Severity: sev, Status: st, Page: store.Page{Page: 1, Limit: left}})
			if err != nil {
				return err
			}
			all = append(all, as...)
		}
		slices.SortStableFunc(all, func(a, b *store.Alert) int { return b.CreatedAt.Compare(a.CreatedAt) })
		for _, a := range all[:min(len(all), lim.Alerts-len(d.Alerts))] {
			out := &Alert{Severity: clean(a.Severity), Type: clean(a.Type), Title: clean(a.Title), CreatedAt: a.CreatedAt}
			if a.DomainID != nil {
				if dom := byID[*a.DomainID]; dom != nil {
					out.Domain = dom.Name
				}
			}
			d.Alerts = append(d.Alerts, out)
		}
	}
	return nil
}

// String names the digest for logs: "acme, day 2026-11-28".
func (d *Digest) String() string {
	return fmt.Sprintf("%s, %s", d.Organization, d.Period.Key(d.From))
}
