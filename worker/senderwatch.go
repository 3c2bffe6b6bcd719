package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/dmarcd/dmarcd/alert"
	"github.com/dmarcd/dmarcd/senders"
	"github.com/dmarcd/dmarcd/store"
)

// The sender alerts: new_sender and policy_ready.
//
// They depend on reverse DNS, which resolves new sources in the
// background, and on a whole window of mail, so they are not evaluated in
// the ingest commit. This job evaluates every domain with a report stored
// in the last day, every Interval (an hour) and at start, and, when
// Resolved says that reverse DNS named new sources, the domains with a
// report in the last Interval again, at most once per MinGap: a new
// sender is named (and can be announced) minutes after its report, not an
// hour. For each domain it computes the sender groups of the current and
// look-back windows (senders.Views.SenderVolumes) and the policy advice
// over the last 30 days (as /policy-advice), asks the rules
// (alert.Rules.EvaluateSenders) with what the store remembers of the
// domain, and stores the alerts and the next state in one transaction
// (store.DB.RecordSenderCheck).

// Defaults of SenderWatch.
const (
	DefaultSenderWatchInterval = time.Hour
	DefaultSenderWatchMinGap   = 5 * time.Minute
	// senderWatchEvery is how often the job looks whether a run is due.
	senderWatchEvery = time.Minute
	// adviceDays is the advice window, /policy-advice's default.
	adviceDays = 30
	// senderWatchTimeout bounds the evaluation of one domain.
	senderWatchTimeout = 30 * time.Second
)

// SenderViews computes what the sender rules read: *senders.Views.
type SenderViews interface {
	SenderVolumes(ctx context.Context, orgID, domainID string, from, to time.Time) ([]senders.SenderVolume, error)
	PolicyAdvice(ctx context.Context, orgID, domainID string, from, to time.Time) (*senders.Advice, error)
}

// SenderWatch is the sender alerts job. Set the fields before the first
// Run; Run may not be called concurrently with itself (the Scheduler never
// does). Resolved may be called from any goroutine.
type SenderWatch struct {
	Store *store.DB
	Views SenderViews
	// Interval is how often every domain with recent reports is
	// evaluated; 0 means DefaultSenderWatchInterval.
	Interval time.Duration
	// MinGap is the least time between two runs that Resolved asks for;
	// 0 means DefaultSenderWatchMinGap.
	MinGap time.Duration
	Log    *slog.Logger // nil discards

	mu       sync.Mutex
	full     time.Time // when the last full run started
	last     time.Time // when the last run of either kind started
	resolved bool      // reverse DNS named sources since the last run
}

func (w *SenderWatch) log() *slog.Logger {
	if w.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return w.Log
}

func (w *SenderWatch) interval() time.Duration {
	if w.Interval <= 0 {
		return DefaultSenderWatchInterval
	}
	return w.Interval
}

// Job returns the job to give the Scheduler: it looks every minute
// whether a run is due, and runs at start.
func (w *SenderWatch) Job() Job {
	return Job{Name: "sender-watch", Every: senderWatchEvery, AtStart: true, Run: w.Run}
}

// Resolved tells the job that reverse DNS named new sources: the next
// look evaluates the domains with recent reports again.
func (w *SenderWatch) Resolved() {
	w.mu.Lock()
	w.resolved = true
	w.mu.Unlock()
}

// Run evaluates the domains that are due at now: every domain with a
// report stored in the last day when Interval has passed since the last
// full run (or none ran yet), else, when Resolved was called and MinGap
// has passed, those with a report stored in the last Interval. It returns
// an error only when the store fails; a domain that cannot be evaluated
// (deleted meanwhile, a view cut short) is logged and skipped.
func (w *SenderWatch) Run(ctx context.Context, now time.Time) error {
	w.mu.Lock()
	since := time.Time{}
	switch {
	case w.full.IsZero() || !now.Before(w.full.Add(w.interval())):
		w.full, since = now, now.Add(-24*time.Hour)
	case w.resolved && !now.Before(w.last.Add(cmpOrDuration(w.MinGap, DefaultSenderWatchMinGap))):
		since = now.Add(-w.interval())
	default:
		w.mu.Unlock()
		return nil
	}
	w.last, w.resolved = now, false
	w.mu.Unlock()
	doms, err := w.Store.AllDomains()
	if err != nil {
		return fmt.Errorf("worker: sender watch: %w", err)
	}
	for _, d := range doms {
		if ctx.Err() != nil {
			return nil
		}
		if d.LastReportAt == nil || d.LastReportAt.Before(since) {
			continue
		}
		if err := w.Check(ctx, d, now); err != nil {
			return err
		}
	}
	return nil
}

func cmpOrDuration(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Check evaluates the sender rules for domain d at now and stores what
// they decide. Only a store failure is an error.
func (w *SenderWatch) Check(ctx context.Context, d *store.Domain, now time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, senderWatchTimeout)
	defer cancel()
	rules := w.Store.AlertRules()
	old, err := w.Store.SenderAlertState(d.ID)
	if err != nil {
		return fmt.Errorf("worker: sender watch: %w", err)
	}
	watch, err := w.observe(ctx, rules, d, now)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) || ctx.Err() != nil {
			return nil // deleted meanwhile, or shutting down
		}
		w.log().Warn("sender alerts: domain not evaluated", "domain", d.Name, "domain_id", d.ID, "error", err)
		return nil
	}
	cands, next := rules.EvaluateSenders(watch, old, now)
	as, err := w.Store.RecordSenderCheck(store.SenderCheck{DomainID: d.ID, Seen: old, Next: next, Alerts: cands})
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrConflict) {
		return nil // deleted, or another evaluation got there first
	}
	if err != nil {
		return fmt.Errorf("worker: sender watch of %s: %w", d.Name, err)
	}
	for _, a := range as {
		w.log().Info("sender alert", "domain", d.Name, "domain_id", d.ID, "type", a.Type, "alert_id", a.ID)
	}
	return nil
}

// observe computes what the rules see of d at now.
func (w *SenderWatch) observe(ctx context.Context, rules alert.Rules, d *store.Domain, now time.Time) (*alert.SenderWatch, error) {
	watch := &alert.SenderWatch{DomainID: d.ID, Domain: d.Name}
	first, ok, err := w.Store.FirstSourceDay(d.ID)
	if err != nil {
		return nil, err
	}
	if ok {
		watch.FirstReport = first
	}
	adv, err := w.Views.PolicyAdvice(ctx, d.OrgID, d.ID, now.UTC().Truncate(24*time.Hour).AddDate(0, 0, -(adviceDays-1)), now)
	if err != nil {
		return nil, err
	}
	watch.Advice = alert.SenderAdvice{Stage: adv.Stage, Reasons: adv.Reasons}
	if adv.NextRecord != nil {
		watch.Advice.NextRecord = *adv.NextRecord
	}
	curFrom, curTo, beforeFrom, beforeTo := rules.SenderWindows(now)
	cur, err := w.Views.SenderVolumes(ctx, d.OrgID, d.ID, curFrom, curTo)
	if err != nil {
		return nil, err
	}
	for _, g := range cur {
		watch.Current = append(watch.Current, alert.SenderGroup{Key: g.Key, Name: g.Name, Type: g.Type,
			Messages: g.Messages, DMARCPassRate: g.DMARCPassRate, Hints: g.Hints})
	}
	watch.Before = map[string]bool{}
	if !ok || len(cur) == 0 {
		return watch, nil // nothing can be new: spare the look-back window
	}
	before, err := w.Views.SenderVolumes(ctx, d.OrgID, d.ID, beforeFrom, beforeTo)
	if err != nil {
		return nil, err
	}
	for _, g := range before {
		watch.Before[g.Key] = true
	}
	return watch, nil
}
