package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"strings"
	"sync"
	"time"

	"github.com/dmarcd/dmarcd/alert"
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
// records found (v=DMARC1 first, sorted, one per line), or alert.NoRecord
// when the name has none. What a change means (which alert, whether the
// domain goes inactive) is package alert's decision
// (alert.ClassifyDNSChange); re-verification makes an inactive domain
// active again. A lookup that fails (SERVFAIL, timeout:
// dnscheck.ErrTemporary) is not a change: nothing is raised or stored,
// and the domain is checked again in the next interval.

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
	if dnscheck.UnescapeTXT(dom.LastDNSRecord) == seen {
		// Remembered in the zone-file escaping TXT text was read in
		// before issue 24: the same record, now kept as published.
		_, err := w.Store.RecordDNSCheck(store.DNSCheck{DomainID: dom.ID, Seen: dom.LastDNSRecord, Record: seen})
		if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("worker: DNS watch of %s: %w", dom.Name, err)
		}
		return nil
	}
	v := alert.ClassifyDNSChange(alert.DNSChange{Domain: dom.Name, ReportingEmail: dom.ReportingEmail,
		Active: dom.Status == store.DomainActive, Old: dom.LastDNSRecord, New: seen, Registered: dom.RegisteredDNSRecord})
	a, err := w.Store.RecordDNSCheck(store.DNSCheck{DomainID: dom.ID, Seen: dom.LastDNSRecord, Record: seen,
		Alert: v.Alert, Deactivate: v.Deactivate})
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
	recs, err := dnscheck.DMARCRecords(ctx, w.Resolver, name)
	if err != nil {
		return "", err
	}
	if len(recs) == 0 {
		return alert.NoRecord, nil
	}
	return strings.Join(recs, "\n"), nil
}
