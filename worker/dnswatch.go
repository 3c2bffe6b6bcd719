package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dmarcd/dmarcd/dmarc"
	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/store"
)

// DNS change detection.
//
// Every active or inactive domain has its _dmarc TXT record looked up once
// per Interval. Pending domains are left to re-verification: they have
// nothing to watch yet. The checks are spread evenly over the interval:
// the domains, in id order, get evenly spaced phases, and each run checks
// those whose phase fell since the previous run, so 10,000 domains over 6
// hours are about 28 lookups a minute, never 10,000 at once. (Adding or
// deleting a domain shifts the phases a little: a domain may then wait up
// to one interval longer, or be checked twice.)
//
// What the check saw is kept in store.Domain.LastDNSRecord: the DMARC
// records found (v=DMARC1 first, sorted, one per line), or noRecord when
// the name has none. The first check only remembers, unless the domain is
// active and its reporting address is already gone, or the record is
// weaker (p or pct lower) than the one published when the domain was
// registered (store.Domain.RegisteredDNSRecord): policy_weakened. A change
// raises ONE alert, the most specific:
//
//   - no DMARC record any more: dns_record_missing (critical);
//   - the record no longer valid (or several): dns_record_changed (warning);
//   - the reporting address gone from rua: reporting_address_removed
//     (critical: reports stop arriving);
//   - p or pct lowered: policy_weakened (warning);
//   - anything else, a record published again included:
//     dns_record_changed (info).
//
// A domain whose current record lacks its reporting address goes from
// active to inactive (API.md); re-verification makes it active again. A
// lookup that fails (SERVFAIL, timeout: dnscheck.ErrTemporary) is not a
// change: nothing is raised or stored, and the domain is checked again
// in the next interval.

// noRecord is the LastDNSRecord of a domain whose _dmarc name had no DMARC
// record at the last check. A DMARC record starts with "v=", so it cannot
// be mistaken for one.
const noRecord = "(none)"

// Defaults of DNSWatch.
const (
	DefaultDNSCheckInterval = 6 * time.Hour
	// DefaultDNSConcurrency bounds the lookups in flight.
	DefaultDNSConcurrency = 8
	// dnsTicksPerInterval is how many runs an interval is cut into.
	dnsTicksPerInterval = 360
)

// TXTResolver looks up TXT records: *dnscheck.Resolver. Its errors wrap
// dnscheck.ErrNotFound for a name without TXT records.
type TXTResolver interface {
	LookupTXT(ctx context.Context, name string) ([]string, error)
}

// DNSWatch is the DNS change detection job. Set the fields before the
// first Run; Run may not be called concurrently with itself (the
// Scheduler never does).
type DNSWatch struct {
	Store    *store.DB
	Resolver TXTResolver
	// Interval is how often each domain is checked; 0 means
	// DefaultDNSCheckInterval.
	Interval time.Duration
	// Concurrency bounds the lookups in flight; 0 means
	// DefaultDNSConcurrency.
	Concurrency int
	Log         *slog.Logger // nil discards

	mu   sync.Mutex
	last time.Time // end of the window the previous run covered
}

func (w *DNSWatch) interval() time.Duration {
	if w.Interval <= 0 {
		return DefaultDNSCheckInterval
	}
	return w.Interval
}

func (w *DNSWatch) log() *slog.Logger {
	if w.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return w.Log
}

// Every returns how often to run the job: a 360th of the interval,
// between 100 ms and one minute.
func (w *DNSWatch) Every() time.Duration {
	return min(max(w.interval()/dnsTicksPerInterval, 100*time.Millisecond), time.Minute)
}

// Job returns the job to give the Scheduler.
func (w *DNSWatch) Job() Job {
	return Job{Name: "dns-watch", Every: w.Every(), Run: w.Run}
}

// Run checks the domains whose phase fell in the window since the previous
// run (the first run covers one Every). It returns an error only when the
// store fails; DNS failures are logged.
func (w *DNSWatch) Run(ctx context.Context, now time.Time) error {
	w.mu.Lock()
	from := w.last
	if from.IsZero() {
		from = now.Add(-w.Every())
	}
	if now.After(w.last) {
		w.last = now
	}
	w.mu.Unlock()
	if !now.After(from) {
		return nil
	}
	ids, err := w.Store.DomainIDs()
	if err != nil {
		return fmt.Errorf("worker: DNS watch: %w", err)
	}
	due := dueSlice(len(ids), w.interval(), from, now)
	return fanOut(ctx, cmpOr(w.Concurrency, DefaultDNSConcurrency), due, func(ctx context.Context, i int) error {
		return w.Check(ctx, ids[i])
	})
}

// fanOut calls fn for every item, at most limit at once, and returns the
// first error; after an error the calls not yet started are skipped.
func fanOut[T any](ctx context.Context, limit int, items []T, fn func(context.Context, T) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for _, it := range items {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := fn(ctx, it); err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// dueSlice returns the indexes of n items with phases i*interval/n (mod
// interval) in the window (from, to]. A window of a whole interval or more
// covers every item.
func dueSlice(n int, interval time.Duration, from, to time.Time) []int {
	span := to.Sub(from)
	if n == 0 || span <= 0 {
		return nil
	}
	all := make([]int, 0, n)
	if span >= interval {
		for i := range n {
			all = append(all, i)
		}
		return all
	}
	period := uint64(interval)
	start := uint64(from.UnixNano()%int64(interval)+int64(interval)) % period
	for i := range n {
		hi, lo := bits.Mul64(uint64(i), period)
		phase, _ := bits.Div64(hi, lo, uint64(n))
		if d := (phase + period - start) % period; d > 0 && d <= uint64(span) {
			all = append(all, i)
		}
	}
	return all
}

func cmpOr(n, def int) int {
	if n > 0 {
		return n
	}
	return def
}

// Check looks up the DMARC record of domain id and records what changed.
// A domain that is gone or pending, or a lookup that fails, is no error.
func (w *DNSWatch) Check(ctx context.Context, id string) error {
	dom, err := w.Store.FindDomainByID(id)
	if errors.Is(err, store.ErrNotFound) || err == nil && dom.Status == store.DomainPending {
		return nil
	}
	if err != nil {
		return fmt.Errorf("worker: DNS watch: %w", err)
	}
	seen, err := w.observe(ctx, dom.Name)
	if err != nil {
		w.log().Warn("DNS change check failed; no change assumed", "domain", dom.Name, "domain_id", dom.ID, "error", err)
		return nil
	}
	if seen == dom.LastDNSRecord {
		return nil
	}
	c := judge(dom, seen)
	a, err := w.Store.RecordDNSCheck(c)
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrConflict) {
		return nil // deleted, or another check got there first
	}
	if err != nil {
		return fmt.Errorf("worker: DNS watch of %s: %w", dom.Name, err)
	}
	if a != nil {
		w.log().Info("DNS change alert", "domain", dom.Name, "domain_id", dom.ID, "type", a.Type, "severity", a.Severity, "alert_id", a.ID)
	}
	return nil
}

// observe returns the state of _dmarc.<name> as LastDNSRecord keeps it.
func (w *DNSWatch) observe(ctx context.Context, name string) (string, error) {
	txts, err := w.Resolver.LookupTXT(ctx, "_dmarc."+name)
	if errors.Is(err, dnscheck.ErrNotFound) {
		return noRecord, nil
	}
	if err != nil {
		return "", err
	}
	var recs []string
	for _, t := range txts {
		if dmarc.IsDMARCRecord(t) {
			recs = append(recs, t)
		}
	}
	if len(recs) == 0 {
		return noRecord, nil
	}
	slices.Sort(recs)
	return strings.Join(recs, "\n"), nil
}

// parsed is one side of a change: the record, or why there is none.
type parsed struct {
	text    *string       // nil: no record
	rec     *dmarc.Record // nil: none or not valid
	problem string        // why rec is nil although text is not
}

func parseState(s string) parsed {
	if s == "" || s == noRecord {
		return parsed{}
	}
	p := parsed{text: &s}
	if strings.Contains(s, "\n") {
		p.problem = "more than one DMARC record is published, so receivers apply none"
		return p
	}
	rec, err := dmarc.ParseRecord(s)
	if err != nil {
		var re *dmarc.RecordError
		p.problem = err.Error()
		if errors.As(err, &re) {
			p.problem = strings.Join(re.Problems, "; ")
		}
		return p
	}
	p.rec = rec
	return p
}

func (p parsed) hasAddress(addr string) bool { return p.rec != nil && p.rec.HasReportingAddress(addr) }

// changeDetails explain a DNS alert.
type changeDetails struct {
	RecordName     string       `json:"record_name"`
	OldRecord      *string      `json:"old_record"`
	NewRecord      *string      `json:"new_record"`
	ReportingEmail string       `json:"reporting_email,omitempty"`
	OldPolicy      *policyShort `json:"old_policy,omitempty"`
	NewPolicy      *policyShort `json:"new_policy,omitempty"`
	Problem        string       `json:"problem,omitempty"`
}

type policyShort struct {
	P   string `json:"p"`
	PCT int    `json:"pct"`
}

func policyOf(r *dmarc.Record) *policyShort { return &policyShort{P: r.P, PCT: r.PCT} }

// policyRank orders p values from weakest to strongest.
func policyRank(p string) int {
	switch p {
	case "quarantine":
		return 1
	case "reject":
		return 2
	}
	return 0
}

// judge decides what the change from dom.LastDNSRecord to seen means.
func judge(dom *store.Domain, seen string) store.DNSCheck {
	c := store.DNSCheck{DomainID: dom.ID, Seen: dom.LastDNSRecord, Record: seen}
	old, cur := parseState(dom.LastDNSRecord), parseState(seen)
	first := dom.LastDNSRecord == ""
	if first && dom.RegisteredDNSRecord != "" {
		// The first look compares with what was published at registration.
		old = parseState(dom.RegisteredDNSRecord)
	}
	weakened := old.rec != nil && cur.rec != nil &&
		(policyRank(cur.rec.P) < policyRank(old.rec.P) || cur.rec.PCT < old.rec.PCT)
	lost := !cur.hasAddress(dom.ReportingEmail)
	c.Deactivate = lost
	name := "_dmarc." + dom.Name
	det := changeDetails{RecordName: name, OldRecord: old.text, NewRecord: cur.text}
	var typ, sev, title, msg string
	switch {
	case first && (!lost || dom.Status != store.DomainActive) && !weakened:
		return c // the first look only remembers, unless weaker than at registration
	case cur.text == nil:
		typ, sev = store.AlertDNSRecordMissing, store.SeverityCritical
		title = "DMARC record of " + dom.Name + " is gone"
		msg = "No DMARC record is published at " + name + " any more: receivers apply no policy and send no reports."
	case cur.rec == nil:
		typ, sev = store.AlertDNSRecordChanged, store.SeverityWarning
		det.Problem = cur.problem
		title = "DMARC record of " + dom.Name + " is no longer valid"
		msg = "The DMARC record at " + name + " changed and is not valid: " + cur.problem + "."
	case lost && (first || old.hasAddress(dom.ReportingEmail)):
		typ, sev = store.AlertReportingAddressRemoved, store.SeverityCritical
		det.ReportingEmail = dom.ReportingEmail
		title = "Reporting address removed from the DMARC record of " + dom.Name
		msg = "The rua tag at " + name + " no longer lists " + dom.ReportingEmail + ": reports stop reaching dmarcd, and the domain is now inactive until it is verified again."
	case weakened:
		typ, sev = store.AlertPolicyWeakened, store.SeverityWarning
		det.OldPolicy, det.NewPolicy = policyOf(old.rec), policyOf(cur.rec)
		title = "DMARC policy of " + dom.Name + " weakened"
		msg = fmt.Sprintf("The DMARC record at %s went from p=%s pct=%d to p=%s pct=%d.",
			name, old.rec.P, old.rec.PCT, cur.rec.P, cur.rec.PCT)
	default:
		typ, sev = store.AlertDNSRecordChanged, store.SeverityInfo
		title = "DMARC record of " + dom.Name + " changed"
		msg = "The DMARC record at " + name + " changed."
		if old.text == nil {
			msg = "A DMARC record is published again at " + name + "."
		}
	}
	raw, _ := json.Marshal(det) // plain strings and ints: cannot fail
	c.Alert = &store.Alert{Type: typ, Severity: sev, Title: title, Message: msg, Details: raw}
	return c
}
