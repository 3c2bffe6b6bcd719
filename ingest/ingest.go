// Package ingest turns raw mail or files into stored aggregate and failure
// reports. The pipeline extracts the report payloads
// (aggregate.Extract), parses each as a stream, routes it to a
// registered domain, geolocates each record, drops duplicates (reporter
// org_name + report id + domain), and stores it with its summary and the
// domain's daily roll-ups. An input that yields nothing usable is
// quarantined with its raw bytes, never dropped.
//
// Every way in calls the one entry point, Pipeline.Ingest (an IngestFunc):
// an input and how it arrived (Arrival) in, what happened (Result) out.
// The ways in live beside the pipeline: ingest/smtp (the SMTP listener),
// ingest/imports (files, folders, mbox); the admin socket and quarantine
// retries call it too.
//
// Writes go through a single writer goroutine (Run) that commits the work
// of many concurrent Ingest calls in one bbolt transaction (group commit),
// so throughput comes from calling Ingest concurrently: each call returns
// once its own data is durably committed.
package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dmarcd/dmarcd/dmarc/container"
	"github.com/dmarcd/dmarcd/geo"
	"github.com/dmarcd/dmarcd/metrics"
	"github.com/dmarcd/dmarcd/store"
)

// Defaults of Config.
const (
	DefaultBatchRecords       = 20000
	DefaultBatchDelay         = 5 * time.Millisecond
	DefaultImportBatchDelay   = 20 * time.Millisecond
	DefaultQuarantineMaxBytes = 32 << 20
	// DefaultQuarantineTotalBytes caps the whole quarantine (1 GiB).
	DefaultQuarantineTotalBytes = 1 << 30
)

// Errors of Ingest, tested with errors.Is.
var (
	// ErrAmbiguous means an imported report's domain is registered by
	// several organizations and the arrival names none (Arrival.OrgID).
	ErrAmbiguous = errors.New("domain registered by several organizations")
	// ErrStopped means the pipeline's writer (Run) has ended.
	ErrStopped = errors.New("ingest: pipeline stopped")
)

// Config configures a Pipeline. Store is required; Geo, Logger and Metrics
// may be nil.
type Config struct {
	Store *store.DB
	// Geo locates source IPs; nil (or a DB without files) stores geo: null.
	Geo    *geo.DB
	Logger *slog.Logger
	// Metrics, when set, gets the pipeline's counters and commit latency
	// histogram (one Pipeline per Registry: names are registered once).
	Metrics *metrics.Registry
	// Now is the clock for receive times; nil means time.Now.
	Now    func() time.Time
	Limits container.Limits
	// BatchRecords commits when this many records are pending; a large
	// report is written in chunks of half that (chunkRecords). 0 means
	// 20000.
	BatchRecords int
	// BatchDelay is how long the writer waits for other Ingest calls still
	// parsing before it commits; 0 means 5ms. It never waits when no other
	// call is parsing.
	BatchDelay time.Duration
	// ImportBatchDelay replaces BatchDelay for a group that holds imports
	// only (SourceImport); 0 means 20ms. An import keeps many inputs in
	// flight and nobody waits on one of them, so a longer wait costs it
	// nothing and larger groups write fewer pages per report; mail and
	// HTTPS senders wait on their acknowledgement, and a group that one of
	// them joins commits within BatchDelay.
	ImportBatchDelay time.Duration
	// QuarantineMaxBytes is how many raw bytes a quarantine entry keeps;
	// 0 means 32 MiB. A larger input keeps its first bytes, and the reason
	// says so.
	QuarantineMaxBytes int64
	// QuarantineTotalBytes caps the bytes the quarantine keeps in all
	// (--quarantine-max-bytes): past nine tenths of it an input keeps only
	// its header, past it the input is refused (store.ErrQuarantineFull).
	// 0 means DefaultQuarantineTotalBytes; negative means no cap.
	QuarantineTotalBytes int64
	// Retention, when positive, is --retention: an aggregate report whose
	// period ended longer ago is not stored (the retention job would
	// delete it within the hour) but listed in Result.Expired, whichever
	// way it came (import, SMTP, IMAP; a quarantine entry retried keeps
	// its entry, with that reason). FailureRetention does the same for
	// failure reports by arrival date.
	Retention, FailureRetention time.Duration
}

// Pipeline ingests reports. Its methods are safe for concurrent use; Run
// must be running for Ingest and RetryQuarantine to complete.
type Pipeline struct {
	cfg Config
	db  *store.DB
	log *slog.Logger
	ing *store.Ingester
	met *pipelineMetrics

	queue   chan *work
	slots   chan struct{} // parsing slots, one per processor
	mu      sync.RWMutex  // held for reading while submitting; closed under it
	closed  bool
	running atomic.Bool
	// parsing counts Ingest calls that may still submit work: the writer
	// waits for them (up to BatchDelay) to commit more in one transaction.
	parsing atomic.Int64
	commits atomic.Uint64
	// pending counts the records handed to the writer and not yet
	// committed; a job starts parsing only while it is under
	// pendingBudget, so many inputs in flight (an import keeps a thousand)
	// hold a bounded number of records in memory however large they are.
	pending atomic.Int64
	drainMu sync.Mutex
	drained chan struct{} // closed (and replaced) after each commit

	commitNanos atomic.Int64
}

// Source says how an input arrived.
type Source string

// Sources of input.
const (
	SourceSMTP   Source = "smtp"
	SourceImport Source = "import"
	// SourceHTTPS is a TLS report POSTed to /tlsrpt/<local part> (RFC
	// 8460 section 5.3.1): only TLS reports are taken, routed like SMTP by
	// Recipient, and an unusable input is refused (Result.Reason), not
	// quarantined: its sender is told.
	SourceHTTPS Source = "https"
	// SourceIMAP is a mail read from an organization's mailbox
	// (ingest/imap): routed like an import within Arrival.OrgID, which it
	// requires; a mail that holds no report at all is left alone
	// (Result.NotReport) instead of quarantined, since a shared mailbox
	// holds ordinary mail too.
	SourceIMAP Source = "imap"
)

// Arrival says how one input arrived: by which way, for which recipient or
// organization, under which name, when.
type Arrival struct {
	Source Source
	// Recipient is the SMTP RCPT TO address: the reports belong to the
	// domain with that reporting address, also when their policy_published
	// domain is a subdomain of it.
	Recipient string
	// OrgID restricts an import's domain lookup to one organization; ""
	// means any, but a name registered by two organizations is an error.
	OrgID string
	// Name is the file path or "from -> rcpt", for logs and quarantine.
	Name string
	// ReceivedAt is when the input arrived; zero means now.
	ReceivedAt time.Time
}

// IngestFunc stores one input: the one call every way in makes, raw mail
// or a file with how it arrived in, what happened out. Pipeline.Ingest is
// one; the admin socket client offers the same for a running server.
type IngestFunc func(ctx context.Context, r io.Reader, d Arrival) (*Result, error)

// Outcome is what happened to one report of an input.
type Outcome struct {
	Kind      Kind   `json:"kind"`      // aggregate, failure or TLS report
	ReportID  string `json:"report_id"` // the stored report; for a duplicate, the one stored before
	Domain    string `json:"domain"`
	Duplicate bool   `json:"duplicate"`
	// DifferentContent marks a duplicate (an aggregate report with the
	// identity of one stored) whose content differs from the stored one:
	// other dates, records or messages. It is not stored either.
	DifferentContent bool `json:"different_content,omitempty"`
	Records          int  `json:"records"` // records of an aggregate report; 0 for a failure report
}

// Kind tells aggregate reports from failure (forensic) reports.
type Kind string

// The kinds of report an input may hold.
const (
	KindAggregate Kind = "aggregate"
	KindFailure   Kind = "failure"
	KindTLS       Kind = "tls" // an SMTP TLS report (RFC 8460)
)

// Result is what happened to one input.
type Result struct {
	// Reports are the reports stored or found to be duplicates, in input order.
	Reports []Outcome `json:"reports"`
	// Quarantined is the quarantine entry id when nothing was usable.
	Quarantined string `json:"quarantined"`
	// Reason says why the input was quarantined (or, for SourceHTTPS,
	// refused: Quarantined is then empty and Reports too).
	Reason string `json:"reason"`
	// Expired are the reports not stored because they are older than the
	// retention window (Config.Retention, Config.FailureRetention).
	Expired []Expired `json:"expired,omitempty"`
	// RecordsSkipped counts the records of stored reports that the parser
	// skipped as unusable (an empty source IP, say).
	RecordsSkipped int `json:"records_skipped"`
	// Problems describe the parts of an input that were not stored next
	// to reports that were (a broken zip member, a report for another
	// domain); they are logged too.
	Problems []string `json:"problems"`
	// NotReport is set, for SourceIMAP only, when the input holds no report
	// at all (no report payload, no feedback part, nothing broken): nothing
	// was stored or quarantined.
	NotReport bool `json:"not_report,omitempty"`
}

// differs reports whether a duplicate of the result has different content.
func (res *Result) differs() bool {
	for _, o := range res.Reports {
		if o.DifferentContent {
			return true
		}
	}
	return false
}

// Expired names a report left out for being older than the retention
// window: its kind, reporter and report id (aggregate), its domain, and
// the date that put it out (an aggregate report's date_end, a failure
// report's arrival date).
type Expired struct {
	Kind     Kind      `json:"kind"`
	Reporter string    `json:"reporter"`
	ReportID string    `json:"report_id,omitempty"`
	Domain   string    `json:"domain"`
	Date     time.Time `json:"date"`
	// Window is the retention window that left it out, as "400d".
	Window string `json:"window"`
}

// Window formats a retention window in days when it is whole days
// ("400d"), else as a Go duration.
func Window(d time.Duration) string {
	if d > 0 && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}

// New returns a pipeline writing to cfg.Store. It first deletes what is
// left of reports whose ingestion a crash interrupted (see
// store.DiscardPendingReports), so create it before anything is ingested
// and only one per database. Errors: a missing Store, a store failure.
func New(cfg Config) (*Pipeline, error) {
	if cfg.Store == nil {
		return nil, errors.New("ingest: Config.Store is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.BatchRecords <= 0 {
		cfg.BatchRecords = DefaultBatchRecords
	}
	if cfg.BatchDelay <= 0 {
		cfg.BatchDelay = DefaultBatchDelay
	}
	if cfg.ImportBatchDelay <= 0 {
		cfg.ImportBatchDelay = DefaultImportBatchDelay
	}
	if cfg.Retention < 0 || cfg.FailureRetention < 0 {
		return nil, errors.New("ingest: retention must not be negative")
	}
	if cfg.QuarantineMaxBytes <= 0 {
		cfg.QuarantineMaxBytes = DefaultQuarantineMaxBytes
	}
	switch {
	case cfg.QuarantineTotalBytes == 0:
		cfg.QuarantineTotalBytes = DefaultQuarantineTotalBytes
	case cfg.QuarantineTotalBytes < 0:
		cfg.QuarantineTotalBytes = 0
	}
	n, err := cfg.Store.DiscardPendingReports()
	if err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	if n > 0 {
		cfg.Logger.Warn("deleted reports left half-written by an interrupted ingest", "reports", n)
	}
	return &Pipeline{
		cfg:     cfg,
		db:      cfg.Store,
		log:     cfg.Logger,
		ing:     cfg.Store.NewIngester(),
		met:     newPipelineMetrics(cfg.Metrics),
		queue:   make(chan *work, 64),
		drained: make(chan struct{}),
		slots:   make(chan struct{}, runtime.GOMAXPROCS(0)),
	}, nil
}

// Ingest reads one input (raw mail or any file: XML, JSON, gzip, zip,
// mail) and stores the aggregate, TLS and failure reports it holds. It returns only after everything
// is durably committed: each report stored or found a duplicate, or, when
// nothing was usable, the input quarantined (Result.Quarantined).
//
// A non-nil error means nothing was stored and nothing quarantined: r
// failed, ctx ended, the store failed, the pipeline stopped (ErrStopped),
// or an imported report's domain is registered by several organizations
// and the input had nothing else usable (ErrAmbiguous). SMTP answers 451
// then; import reports the failure.
func (p *Pipeline) Ingest(ctx context.Context, r io.Reader, d Arrival) (*Result, error) {
	return p.ingest(ctx, r, d, nil)
}

func (p *Pipeline) ingest(ctx context.Context, r io.Reader, d Arrival, retry *store.QuarantineEntry) (*Result, error) {
	if d.Source != SourceSMTP && d.Source != SourceImport && d.Source != SourceHTTPS && d.Source != SourceIMAP {
		return nil, fmt.Errorf("ingest: unknown source %q", d.Source)
	}
	if d.Source == SourceIMAP && d.OrgID == "" {
		return nil, errors.New("ingest: a mailbox's mail needs its organization (Arrival.OrgID)")
	}
	if d.OrgID != "" && !store.ValidID(d.OrgID) {
		return nil, fmt.Errorf("ingest: malformed organization id %q", d.OrgID)
	}
	if d.ReceivedAt.IsZero() {
		d.ReceivedAt = p.cfg.Now()
	}
	d.ReceivedAt = d.ReceivedAt.UTC().Truncate(time.Second)
	j := newJob(ctx, p, r, d, retry)
	res, err := j.run()
	if res != nil {
		res.RecordsSkipped = j.skipped
	}
	p.logResult(ctx, d, j, res, err)
	return res, err
}

type batchLogKey struct{}

// WithBatchLog marks ctx as the context of one input of a batch whose
// caller logs one line for the whole batch (an import on the admin
// socket): the pipeline then writes its line per input at debug level
// instead of info. Failures are still logged at warn.
func WithBatchLog(ctx context.Context) context.Context {
	return context.WithValue(ctx, batchLogKey{}, true)
}

// Retention returns the retention windows the pipeline applies to what it
// stores (Config.Retention, Config.FailureRetention; 0 keeps all).
func (p *Pipeline) Retention() (aggregate, failure time.Duration) {
	return p.cfg.Retention, p.cfg.FailureRetention
}

// KnownRecipient reports whether addr is the reporting address of some
// domain (case-insensitive): the SMTP listener's RCPT TO check.
func (p *Pipeline) KnownRecipient(addr string) bool {
	_, err := p.db.FindDomainByReportingEmail(addr)
	return err == nil
}

// RetryQuarantine ingests the bytes kept in quarantine entry id again, as
// they first arrived (same source, recipient, organization and receive
// time). When a report is stored (or found already stored) the entry is
// deleted; when the input is still unusable the entry stays, with the new
// reason and one more retry, and Result.Quarantined is its id. Errors:
// store.ErrNotFound for an unknown entry, and those of Ingest.
func (p *Pipeline) RetryQuarantine(ctx context.Context, id string) (*Result, error) {
	entry, raw, err := p.db.FindQuarantine(id)
	if err != nil {
		return nil, fmt.Errorf("ingest: retry quarantine: %w", err)
	}
	d := Arrival{Source: Source(entry.Source), Recipient: entry.Recipient, OrgID: entry.OrgID,
		Name: entry.Name, ReceivedAt: entry.ReceivedAt}
	res, err := p.ingest(ctx, bytes.NewReader(raw), d, entry)
	if err != nil {
		return nil, err
	}
	if res.Quarantined == "" {
		if err := p.db.DeleteQuarantine(id); err != nil && !errors.Is(err, store.ErrNotFound) {
			return res, fmt.Errorf("ingest: retry quarantine: reports stored, entry not deleted: %w", err)
		}
	}
	return res, nil
}

// logResult writes the one line per input: source, name, counts, outcome;
// never report contents.
func (p *Pipeline) logResult(ctx context.Context, d Arrival, j *job, res *Result, err error) {
	level := slog.LevelInfo
	if ctx.Value(batchLogKey{}) != nil && err == nil && res.Quarantined == "" && len(res.Problems) == 0 && !res.differs() {
		// The batch's caller logs the line; a quarantine or a problem
		// stays at info.
		level = slog.LevelDebug
	}
	if err != nil {
		level = slog.LevelWarn
	}
	if !p.log.Enabled(ctx, level) {
		// Nothing to build: the attributes cost a few allocations an input.
		return
	}
	attrs := []any{"source", string(d.Source), "name", d.Name}
	if err != nil {
		p.log.Warn("ingest failed", append(attrs, "error", err)...)
		return
	}
	outcome, reports, records := "stored", 0, 0
	dups, differ := 0, 0
	for _, o := range res.Reports {
		reports++
		switch {
		case o.DifferentContent:
			dups++
			differ++
		case o.Duplicate:
			dups++
		default:
			records += o.Records
		}
	}
	switch {
	case res.Quarantined != "":
		outcome = "quarantined"
		attrs = append(attrs, "quarantine_id", res.Quarantined, "reason", res.Reason)
	case res.NotReport:
		outcome = "not_report"
	case differ > 0 && dups == reports:
		outcome = "duplicate with different content"
	case dups == reports:
		outcome = "duplicate"
	}
	attrs = append(attrs, "reports", reports, "duplicates", dups, "records", records, "outcome", outcome)
	if differ > 0 {
		// Not stored: the copy stored first is kept. Someone may want to
		// know that the reporter sent something else under that id.
		attrs = append(attrs, "different_content", differ)
	}
	if len(res.Problems) > 0 {
		attrs = append(attrs, "problems", res.Problems)
	}
	if j.skipped > 0 {
		attrs = append(attrs, "records_skipped", j.skipped)
	}
	p.log.Log(ctx, level, "ingested", attrs...)
}
