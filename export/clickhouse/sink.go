package clickhouse

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/dmarcd/dmarcd/internal/egress"
	"github.com/dmarcd/dmarcd/store"
)

// CursorName is the sink's cursor in the store (store.ExportCursor).
const CursorName = "clickhouse"

// Defaults of Config.
const (
	DefaultBatchRows  = 50_000
	DefaultFlushEvery = time.Second
	DefaultSettle     = time.Minute
	DefaultMinBackoff = time.Second
	DefaultMaxBackoff = 2 * time.Minute
	DefaultTimeout    = 5 * time.Minute
)

// Config configures a Sink. Zero durations and sizes take the defaults.
type Config struct {
	Store    *store.DB
	Endpoint *Endpoint
	// Resolver resolves ClickHouse's host name (the server's --dns-server);
	// nil uses the system's.
	Resolver egress.Resolver
	// Policy is the egress policy of the connections; the sink always
	// allows private addresses (ClickHouse lives on the operator's own
	// network) and keeps the rest (no proxy, no redirect, the CAs).
	Policy egress.Policy
	Log    *slog.Logger
	Now    func() time.Time

	// BatchRows is the most rows one insert carries (50,000).
	BatchRows int
	// FlushEvery is how often the sink looks for new reports (1 s).
	FlushEvery time.Duration
	// Settle is how long after its id was made a report is assumed
	// visible (1 minute): the cursor stays that far behind, and the
	// sink remembers in memory what it exported above it (see
	// store/export_cursor.go).
	Settle time.Duration
	// MinBackoff and MaxBackoff bound the wait after a failure (1 s, 2 min).
	MinBackoff, MaxBackoff time.Duration
	// Timeout bounds one request (5 min).
	Timeout time.Duration
}

// Status is what `dmarcd export status` and /metrics show.
type Status struct {
	URL    string             `json:"url"`
	Cursor store.ExportCursor `json:"cursor"`
	// CursorTime is when the newest report under the cursor was stored
	// (the time of the aggregate cursor's id); zero before the first.
	CursorTime time.Time `json:"cursor_time,omitzero"`
	// LagSeconds is the age of the oldest stored report ClickHouse has
	// not acknowledged, 0 when it has them all.
	LagSeconds float64 `json:"lag_seconds"`
	// Rows are the rows acknowledged since this server started; Cursor.Rows
	// counts since the cursor was created.
	Rows          uint64    `json:"rows"`
	Batches       uint64    `json:"batches"`
	Errors        uint64    `json:"errors"`
	LastError     string    `json:"last_error,omitempty"`
	LastErrorAt   time.Time `json:"last_error_at,omitzero"`
	LastExportAt  time.Time `json:"last_export_at,omitzero"`
	ServerVersion string    `json:"server_version,omitempty"`
}

// Sink exports the stored reports to ClickHouse. Run drives it; Status,
// Exported and Rewind are safe to call from other goroutines.
type Sink struct {
	cfg Config
	c   *client
	log *slog.Logger

	kick  chan struct{}
	ready bool // the tables exist (Pass's goroutine only)

	mu     sync.Mutex
	st     Status
	cursor store.ExportCursor
	// above holds, per kind, the reports acknowledged above the cursor.
	above map[store.ExportKind]map[string]bool
	orgs  map[string]*orgName
	doms  map[string]string
}

// New returns a sink; nothing is sent before Run.
func New(cfg Config) (*Sink, error) {
	if cfg.Store == nil || cfg.Endpoint == nil {
		return nil, errors.New("clickhouse: sink without a store or an endpoint")
	}
	if cfg.Resolver == nil {
		cfg.Resolver = egress.SystemResolver{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.FlushEvery, DefaultFlushEvery)
	def(&cfg.Settle, DefaultSettle)
	def(&cfg.MinBackoff, DefaultMinBackoff)
	def(&cfg.MaxBackoff, DefaultMaxBackoff)
	def(&cfg.Timeout, DefaultTimeout)
	if cfg.BatchRows <= 0 {
		cfg.BatchRows = DefaultBatchRows
	}
	cfg.Policy.AllowPrivate = true
	s := &Sink{cfg: cfg, c: newClient(cfg.Endpoint, cfg.Resolver, cfg.Policy, cfg.Timeout),
		log:  cfg.Log.With("sink", "clickhouse", "clickhouse", cfg.Endpoint.String()),
		kick: make(chan struct{}, 1), orgs: map[string]*orgName{}, doms: map[string]string{}}
	s.st.URL = cfg.Endpoint.String()
	if err := s.load(); err != nil {
		return nil, err
	}
	return s, nil
}

// load reads the cursor from the store and forgets what was exported
// above it.
func (s *Sink) load() error {
	cur, err := s.cfg.Store.ExportCursor(CursorName)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setCursor(cur)
	s.above = map[store.ExportKind]map[string]bool{}
	for _, k := range store.ExportKinds {
		s.above[k] = map[string]bool{}
	}
	return nil
}

func (s *Sink) setCursor(c *store.ExportCursor) {
	s.cursor = *c
	s.st.Cursor = *c
	s.st.CursorTime, _ = store.IDTime(c.Aggregate)
}

// Status returns the sink's state.
func (s *Sink) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

// Exported reports whether ClickHouse acknowledged aggregate report id:
// its id is at or under the durable cursor, or it was acknowledged above
// it since this server started. It is the gate of record retention: a
// report's local records may go only once this is true.
func (s *Sink) Exported(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return id <= s.cursor.Aggregate || s.above[store.ExportAggregate][id]
}

// Rewind moves the cursor back to the reports stored since since, so that
// they are exported again (a backfill; replayed rows replace themselves),
// and wakes the sink.
func (s *Sink) Rewind(since time.Time) (*store.ExportCursor, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.cfg.Store.RewindExportCursor(CursorName, since)
	if err != nil {
		return nil, err
	}
	s.setCursor(cur)
	for _, k := range store.ExportKinds {
		s.above[k] = map[string]bool{}
	}
	s.Kick()
	return cur, nil
}

// Kick wakes the sink to look for new reports now.
func (s *Sink) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Run creates the tables, then exports until ctx ends. A failure is
// logged, kept in Status, and retried after a backoff doubling from
// MinBackoff to MaxBackoff; nothing is lost meanwhile, since what is not
// acknowledged stays ahead of the cursor. Run returns nil when ctx ends.
func (s *Sink) Run(ctx context.Context) error {
	backoff := s.cfg.MinBackoff
	for ctx.Err() == nil {
		more, err := s.Pass(ctx)
		if ctx.Err() != nil {
			return nil
		}
		wait := s.cfg.FlushEvery
		if err != nil {
			s.fail(err)
			wait = backoff
			backoff = min(backoff*2, s.cfg.MaxBackoff)
		} else {
			backoff = s.cfg.MinBackoff
			if more {
				continue
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-s.kick:
			t.Stop()
			if err != nil { // a kick does not cut a backoff short
				select {
				case <-ctx.Done():
				case <-time.After(wait):
				}
			}
		case <-t.C:
		}
	}
	return nil
}

func (s *Sink) fail(err error) {
	s.mu.Lock()
	s.st.Errors++
	s.st.LastError = err.Error()
	s.st.LastErrorAt = s.cfg.Now().UTC()
	s.mu.Unlock()
	s.log.Warn("clickhouse export failed; retrying", "err", err)
}

// scanReports is how many reports one store read returns.
const scanReports = 256

// batch is the rows of one insert per table, and the reports complete in
// it per kind.
type batch struct {
	bufs    map[string]*rowBuf
	done    map[store.ExportKind][]string
	rows    int
	flushes int
	rewound time.Time // the cursor's Rewound when the pass began
}

func newBatch() *batch {
	b := &batch{bufs: map[string]*rowBuf{}, done: map[store.ExportKind][]string{}}
	for _, t := range tables {
		b.bufs[t.name] = &rowBuf{cols: t.cols}
	}
	return b
}

func (b *batch) reset() {
	for _, w := range b.bufs {
		w.b, w.rows = w.b[:0], 0
	}
	clear(b.done)
	b.rows = 0
}

// Pass exports, once, what was stored since the cursor, in batches of at
// most BatchRows rows, and advances the cursor after each batch
// ClickHouse acknowledged; the first pass creates the tables that are
// missing. Run calls it; one goroutine at a time may. more is set when
// it stopped early with more to export (a pass sends at most 20 batches,
// so Status stays fresh).
func (s *Sink) Pass(ctx context.Context) (more bool, err error) {
	if !s.ready {
		f, err := s.c.ensureTables(ctx)
		if err != nil {
			return false, err
		}
		s.ready = true
		s.mu.Lock()
		s.st.ServerVersion = f.version
		s.mu.Unlock()
		s.log.Info("clickhouse export ready", "server_version", f.version)
	}
	now := s.cfg.Now()
	frontier := store.IDFloor(now.Add(-s.cfg.Settle))
	if p, err := s.cfg.Store.OldestPendingReport(); err != nil {
		return false, err
	} else if p != "" {
		if t, ok := store.IDTime(p); ok && store.IDFloor(t) < frontier {
			frontier = store.IDFloor(t)
		}
	}
	s.mu.Lock()
	start := s.cursor
	s.mu.Unlock()
	if err := s.measureLag(now, &start); err != nil {
		return false, err
	}
	b := newBatch()
	b.rewound = start.Rewound
	ver := uint64(now.UnixMilli())
	for _, kind := range store.ExportKinds {
		after := start.Of(kind)
		for {
			refs, err := s.cfg.Store.ReportsStoredAfter(kind, after, scanReports, s.skipper(kind))
			if err != nil {
				return false, err
			}
			for i := range refs {
				r := &refs[i]
				if err := s.add(ctx, b, r, ver, frontier); err != nil {
					return false, err
				}
				b.done[kind] = append(b.done[kind], r.ID)
				after = r.ID
				if b.rows >= s.cfg.BatchRows {
					if err := s.flush(ctx, b, frontier, false); err != nil {
						return false, err
					}
					if b.flushes >= 20 {
						return true, nil
					}
				}
			}
			if len(refs) < scanReports {
				break
			}
		}
	}
	if err := s.flush(ctx, b, frontier, true); err != nil {
		return false, err
	}
	s.mu.Lock()
	s.st.LagSeconds = 0
	s.mu.Unlock()
	return false, nil
}

// measureLag sets LagSeconds from the oldest report not acknowledged.
func (s *Sink) measureLag(now time.Time, cur *store.ExportCursor) error {
	var oldest time.Time
	for _, kind := range store.ExportKinds {
		refs, err := s.cfg.Store.ReportsStoredAfter(kind, cur.Of(kind), 1, s.skipper(kind))
		if err != nil {
			return err
		}
		if len(refs) == 1 {
			if t, ok := store.IDTime(refs[0].ID); ok && (oldest.IsZero() || t.Before(oldest)) {
				oldest = t
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.LagSeconds = 0
	if !oldest.IsZero() {
		s.st.LagSeconds = max(now.Sub(oldest).Seconds(), 0)
	}
	return nil
}

// skipper returns the test of reports already acknowledged above the
// cursor. It reads a copy: the map changes only in this goroutine (and
// in Rewind, which replaces it).
func (s *Sink) skipper(kind store.ExportKind) func(string) bool {
	s.mu.Lock()
	m := s.above[kind]
	s.mu.Unlock()
	return func(id string) bool { return m[id] }
}

// add writes report r's rows to b, flushing b when it fills while a large
// report's records are read (the report counts as exported only once all
// its rows are acknowledged, so a crash in between exports it again).
func (s *Sink) add(ctx context.Context, b *batch, r *store.StoredReport, ver uint64, frontier string) error {
	org, err := s.org(r.OrgID)
	if err != nil {
		return err
	}
	switch r.Kind {
	case store.ExportAggregate:
		b.bufs["aggregate_reports"].aggregateReport(org, r.Aggregate, ver)
		b.rows++
		recs := b.bufs["aggregate_records"]
		var i uint32
		var scratch [3][]string
		err := s.cfg.Store.ReportRecords(r.OrgID, r.ID, func(rec *store.Record) error {
			recs.aggregateRecord(org, r.Aggregate, i, rec, ver, &scratch)
			i++
			b.rows++
			if b.rows >= s.cfg.BatchRows {
				return s.flush(ctx, b, frontier, false)
			}
			return nil
		})
		if errors.Is(err, store.ErrNotFound) {
			return nil // deleted meanwhile: what was sent stays, as history
		}
		return err
	case store.ExportFailure:
		b.bufs["failure_reports"].failureReport(org, r.Failure, ver)
		b.rows++
	case store.ExportTLS:
		dom, err := s.domain(r.TLS.DomainID)
		if err != nil {
			return err
		}
		details := b.bufs["tls_failure_details"]
		before := details.rows
		b.bufs["tls_reports"].tlsReport(details, org, dom, r.TLS, ver)
		b.rows += 1 + details.rows - before
	}
	return nil
}

// org returns an organization's id and name, cached; a deleted one keeps
// its id as its name.
func (s *Sink) org(id string) (*orgName, error) {
	if o := s.orgs[id]; o != nil {
		return o, nil
	}
	o := &orgName{id: id, name: id}
	org, err := s.cfg.Store.FindOrganizationByID(id)
	switch {
	case err == nil:
		o.name = org.Name
	case !errors.Is(err, store.ErrNotFound):
		return nil, err
	}
	if len(s.orgs) > 10_000 {
		clear(s.orgs)
	}
	s.orgs[id] = o
	return o, nil
}

// domain returns a domain's name, cached; a deleted one is "".
func (s *Sink) domain(id string) (string, error) {
	if n, ok := s.doms[id]; ok {
		return n, nil
	}
	d, err := s.cfg.Store.FindDomainByID(id)
	name := ""
	switch {
	case err == nil:
		name = d.Name
	case !errors.Is(err, store.ErrNotFound):
		return "", err
	}
	if len(s.doms) > 100_000 {
		clear(s.doms)
	}
	s.doms[id] = name
	return name, nil
}

// flush inserts b's rows, table by table, then marks b's complete reports
// acknowledged and advances the cursor: per kind, to the newest
// acknowledged report below frontier with nothing unacknowledged under
// it (after a whole pass, complete, that is every acknowledged one below
// frontier). An error leaves the cursor where it was: the next pass sends
// the same rows again, which replace themselves.
func (s *Sink) flush(ctx context.Context, b *batch, frontier string, complete bool) error {
	if b.rows == 0 && len(b.done) == 0 && !complete {
		return nil
	}
	for _, t := range tables {
		w := b.bufs[t.name]
		if w.rows == 0 {
			continue
		}
		if _, err := s.c.exec(ctx, t.insert(s.cfg.Endpoint.Database), bytes.NewReader(w.b)); err != nil {
			return err
		}
	}
	b.flushes++
	rows := uint64(b.rows)
	s.mu.Lock()
	next := s.cursor
	moved := false
	if next.Rewound.Equal(b.rewound) { // else a backfill came in: its position wins
		for _, kind := range store.ExportKinds {
			above := s.above[kind]
			ids := b.done[kind]
			for _, id := range ids {
				above[id] = true
			}
			// Scanning is in id order from the cursor, so every report up
			// to the last complete one of this batch is acknowledged.
			last := "\xff"
			if !complete {
				if len(ids) == 0 {
					continue
				}
				last = ids[len(ids)-1]
			}
			var upto []string
			for id := range above {
				if id <= last && id < frontier {
					upto = append(upto, id)
				}
			}
			if len(upto) > 0 {
				sort.Strings(upto)
				next.Set(kind, upto[len(upto)-1])
				moved = true
				for _, id := range upto {
					delete(above, id)
				}
			}
		}
	}
	next.Rows += rows
	s.mu.Unlock()
	b.reset()
	if !moved && rows == 0 {
		return nil
	}
	saved, err := s.cfg.Store.SetExportCursor(CursorName, &next)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if !saved.Rewound.Equal(next.Rewound) { // a backfill came in meanwhile
		for _, k := range store.ExportKinds {
			s.above[k] = map[string]bool{}
		}
	}
	s.setCursor(saved)
	s.st.Rows += rows
	if rows > 0 {
		s.st.Batches++
		s.st.LastExportAt = s.cfg.Now().UTC()
	}
	s.mu.Unlock()
	return nil
}
