package senders

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/store"
)

// RDNSResolver is what reverse DNS asks; dnscheck.Resolver has it. Errors
// wrap dnscheck.ErrNotFound or dnscheck.ErrTemporary.
type RDNSResolver interface {
	LookupPTR(ctx context.Context, ip netip.Addr) ([]string, error)
	LookupAddrs(ctx context.Context, host string) ([]netip.Addr, error)
}

// Clock is the time the reverse DNS job runs on; tests inject a fake.
type Clock interface {
	Now() time.Time
	// Sleep waits until d has passed or ctx ends.
	Sleep(ctx context.Context, d time.Duration) error
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Defaults of RDNSConfig.
const (
	DefaultRDNSRate        = 20
	DefaultRDNSTTL         = 7 * 24 * time.Hour
	DefaultRDNSNegativeTTL = 24 * time.Hour
	DefaultRDNSRetry       = time.Minute
	DefaultRDNSInterval    = 30 * time.Second
	maxRDNSRetry           = 6 * time.Hour
	maxPTRNames            = 10
	rdnsWorkers            = 8
	rdnsBatchDays          = 64
	rdnsPutBatch           = 200
)

// RDNSConfig configures the reverse DNS job; zero fields take defaults.
type RDNSConfig struct {
	// Rate is how many IPs are looked up per second at most (--rdns-rate).
	Rate float64
	// TTL is how long a found name (confirmed or not) is kept before the
	// IP is looked up again when it sends again; NegativeTTL the same for
	// an IP without PTR record (NXDOMAIN remembered).
	TTL, NegativeTTL time.Duration
	// Retry is the wait before the first retry of a temporary failure
	// (SERVFAIL, timeout); it doubles with each failure, up to 6 hours.
	Retry time.Duration
	// Interval is how often the job looks for new source IPs.
	Interval time.Duration
	// Clock is the job's time; nil is the real clock.
	Clock Clock
	// Logger gets the job's errors; nil discards them.
	Logger *slog.Logger
	// Resolved, when set, is called after a run that looked IPs up (the
	// sender alerts then look at the new names soon).
	Resolved func()
}

// RDNSJob resolves the reverse DNS of new source IPs in the background,
// forward-confirmed, rate-limited, and keeps the answers in the store. The
// IPs come from the per-source roll-ups ingest writes (store
// PendingSourceIPs): nothing runs in the ingest path.
type RDNSJob struct {
	db  *store.DB
	dns RDNSResolver
	cfg RDNSConfig
	lim *limiter
}

// NewRDNSJob returns the job; start it with Run.
func NewRDNSJob(db *store.DB, dns RDNSResolver, cfg RDNSConfig) *RDNSJob {
	if cfg.Rate <= 0 {
		cfg.Rate = DefaultRDNSRate
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultRDNSTTL
	}
	if cfg.NegativeTTL <= 0 {
		cfg.NegativeTTL = DefaultRDNSNegativeTTL
	}
	if cfg.Retry <= 0 {
		cfg.Retry = DefaultRDNSRetry
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultRDNSInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &RDNSJob{db: db, dns: dns, cfg: cfg,
		lim: &limiter{clock: cfg.Clock, interval: time.Duration(float64(time.Second) / cfg.Rate)}}
}

// Run resolves new source IPs every Interval until ctx ends.
func (j *RDNSJob) Run(ctx context.Context) error {
	for {
		n, err := j.RunOnce(ctx)
		if err != nil && ctx.Err() == nil {
			j.cfg.Logger.Error("reverse DNS", "err", err)
		}
		if n > 0 && j.cfg.Resolved != nil {
			j.cfg.Resolved()
		}
		if err := j.cfg.Clock.Sleep(ctx, j.cfg.Interval); err != nil {
			return nil
		}
	}
}

// RunOnce handles what is queued now: the IPs of the days ingest touched
// (those without a fresh cache entry) and the temporary failures due for a
// retry. It returns how many IPs it looked up.
func (j *RDNSJob) RunOnce(ctx context.Context) (int, error) {
	total := 0
	retries, err := j.db.TemporaryRDNS(10000)
	if err != nil {
		return 0, err
	}
	var due []string
	now := j.cfg.Clock.Now()
	for _, e := range retries {
		if j.due(e, now) {
			due = append(due, e.IP)
		}
	}
	n, err := j.resolve(ctx, due, nil)
	total += n
	if err != nil {
		return total, err
	}
	for {
		p, err := j.db.PendingSourceIPs(rdnsBatchDays)
		if err != nil || len(p.IPs) == 0 {
			return total, err
		}
		cached, err := j.db.GetRDNS(p.IPs)
		if err != nil {
			return total, err
		}
		now := j.cfg.Clock.Now()
		due = due[:0]
		for _, ip := range p.IPs {
			if e, ok := cached[ip]; !ok || j.due(e, now) {
				due = append(due, ip)
			}
		}
		n, err := j.resolve(ctx, due, cached)
		total += n
		if err != nil {
			return total, err
		}
		if err := j.db.DonePendingSources(p); err != nil {
			return total, err
		}
	}
}

// due reports whether e should be looked up again at now.
func (j *RDNSJob) due(e store.RDNSEntry, now time.Time) bool {
	switch e.Status {
	case store.RDNSConfirmed, store.RDNSUnconfirmed:
		return !now.Before(e.CheckedAt.Add(j.cfg.TTL))
	case store.RDNSNotFound:
		return !now.Before(e.CheckedAt.Add(j.cfg.NegativeTTL))
	}
	wait := j.cfg.Retry
	for i := 1; i < e.Failures && wait < maxRDNSRetry; i++ {
		wait *= 2
	}
	return !now.Before(e.CheckedAt.Add(min(wait, maxRDNSRetry)))
}

// resolve looks up ips, at most Rate a second, and stores the answers.
func (j *RDNSJob) resolve(ctx context.Context, ips []string, cached map[string]store.RDNSEntry) (int, error) {
	if len(ips) == 0 {
		return 0, nil
	}
	work := make(chan string)
	var mu sync.Mutex
	var batch []store.RDNSEntry
	var putErr error
	flush := func() {
		if len(batch) > 0 && putErr == nil {
			putErr = j.db.PutRDNS(batch)
		}
		batch = batch[:0]
	}
	var wg sync.WaitGroup
	for range rdnsWorkers {
		wg.Go(func() {
			for ip := range work {
				e := j.lookup(ctx, ip)
				if ctx.Err() != nil {
					continue // a lookup cut short is no answer
				}
				if e.Status == store.RDNSTemporary {
					if old, ok := cached[ip]; ok && old.Status == store.RDNSTemporary {
						e.Failures = old.Failures + 1
					}
				}
				mu.Lock()
				batch = append(batch, e)
				if len(batch) >= rdnsPutBatch {
					flush()
				}
				mu.Unlock()
			}
		})
	}
	n := 0
	for _, ip := range ips {
		if err := j.lim.wait(ctx); err != nil {
			break
		}
		work <- ip
		n++
	}
	close(work)
	wg.Wait()
	flush()
	if putErr != nil {
		return n, putErr
	}
	return n, ctx.Err()
}

// lookup finds the forward-confirmed name of ip: a PTR name whose A or
// AAAA records hold ip.
func (j *RDNSJob) lookup(ctx context.Context, ipText string) store.RDNSEntry {
	e := store.RDNSEntry{IP: ipText, CheckedAt: j.cfg.Clock.Now().UTC(), Status: store.RDNSNotFound}
	ip, err := netip.ParseAddr(ipText)
	if err != nil {
		return e // not an IP: nothing to look up, remembered as not found
	}
	ip = ip.Unmap()
	names, err := j.dns.LookupPTR(ctx, ip)
	switch {
	case errors.Is(err, dnscheck.ErrNotFound):
		return e
	case err != nil:
		e.Status, e.Failures = store.RDNSTemporary, 1
		return e
	}
	temporary := false
	for _, name := range names[:min(len(names), maxPTRNames)] {
		addrs, err := j.dns.LookupAddrs(ctx, name)
		if err != nil {
			temporary = temporary || !errors.Is(err, dnscheck.ErrNotFound)
			continue
		}
		for _, a := range addrs {
			if a == ip {
				e.Status, e.Hostname = store.RDNSConfirmed, name
				return e
			}
		}
	}
	if temporary {
		e.Status, e.Failures = store.RDNSTemporary, 1
		return e
	}
	e.Status, e.Hostname = store.RDNSUnconfirmed, names[0]
	return e
}

// limiter hands out start times at most one per interval, no bursts.
type limiter struct {
	clock    Clock
	interval time.Duration
	mu       sync.Mutex
	next     time.Time
}

func (l *limiter) wait(ctx context.Context) error {
	l.mu.Lock()
	now := l.clock.Now()
	slot := l.next
	if slot.Before(now) {
		slot = now
	}
	l.next = slot.Add(l.interval)
	l.mu.Unlock()
	if d := slot.Sub(now); d > 0 {
		return l.clock.Sleep(ctx, d)
	}
	return ctx.Err()
}
