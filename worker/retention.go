package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/dmarcd/dmarcd/store"
)

// Retention defaults.
const (
	// DefaultRetention keeps aggregate reports and alerts 400 days.
	DefaultRetention = 400 * 24 * time.Hour
	// DefaultQuarantineRetention keeps quarantine entries 30 days.
	DefaultQuarantineRetention = 30 * 24 * time.Hour
	// DefaultRetentionEvery is how often the retention job runs.
	DefaultRetentionEvery = time.Hour
)

// Retention is the retention job. Each run deletes, in transactions of
// bounded size so that ingest goes on meanwhile:
//
//   - aggregate reports whose date_end is older than Retention, with their
//     records, and the daily roll-ups of the days before that (their
//     statistics go with them);
//   - SMTP TLS reports whose date_end is older than Retention, with their
//     share of the daily TLS roll-ups;
//   - alerts created before then, whatever their status;
//   - the records of reports that began before RecordRetention, when
//     shorter, the reports themselves kept (see RecordRetention);
//   - failure (forensic) reports that arrived before FailureRetention;
//   - quarantine entries received before QuarantineRetention;
//   - what the alert rules remember beyond their needs (dedup entries of
//     past days, sources not seen within the new-source window).
//
// A zero Retention, FailureRetention or QuarantineRetention keeps those
// forever.
type Retention struct {
	Store               *store.DB
	Retention           time.Duration
	FailureRetention    time.Duration
	QuarantineRetention time.Duration
	// RecordRetention, when shorter than Retention (or Retention is 0),
	// drops the records of reports that began longer ago than it
	// (store.DropRecordsBefore) while the reports, their summaries and
	// roll-ups stay for Retention. Zero: records go with their reports.
	RecordRetention time.Duration
	// RecordsExported, when set, gates the records' drop: a report's
	// records are kept while it answers false (a sink has not copied them
	// yet). Nil drops them at RecordRetention.
	RecordsExported func(reportID string) bool
	Log             *slog.Logger // nil discards
}

// Job returns the job to give the Scheduler: hourly, and once at start.
func (r *Retention) Job() Job {
	return Job{Name: "retention", Every: DefaultRetentionEvery, AtStart: true, Run: r.Run}
}

// Run deletes what is older than the retention periods at now. Every part
// runs even when an earlier one failed; the errors are joined.
func (r *Retention) Run(ctx context.Context, now time.Time) error {
	log := r.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var errs []error
	step := func(what string, fn func() (int, error)) {
		if ctx.Err() != nil {
			return
		}
		n, err := fn()
		if err != nil {
			errs = append(errs, fmt.Errorf("worker: retention of %s: %w", what, err))
		}
		if n > 0 {
			log.Info("retention deleted old data", "what", what, "count", n)
		}
	}
	if r.Retention > 0 {
		cutoff := now.Add(-r.Retention)
		step("aggregate reports", func() (int, error) { return r.Store.DeleteReportsBefore(cutoff) })
		step("TLS reports", func() (int, error) { return r.Store.DeleteTLSReportsBefore(cutoff) })
		step("alerts", func() (int, error) { return r.Store.DeleteAlertsBefore(cutoff) })
	}
	if r.RecordRetention > 0 && (r.Retention == 0 || r.RecordRetention < r.Retention) {
		cutoff := now.Add(-r.RecordRetention)
		step("report records", func() (int, error) { return r.Store.DropRecordsBefore(cutoff, r.RecordsExported) })
	}
	if r.FailureRetention > 0 {
		cutoff := now.Add(-r.FailureRetention)
		step("failure reports", func() (int, error) { return r.Store.DeleteFailureReportsBefore(cutoff) })
	}
	if r.QuarantineRetention > 0 {
		cutoff := now.Add(-r.QuarantineRetention)
		step("quarantine entries", func() (int, error) { return r.Store.DeleteQuarantineBefore(cutoff) })
	}
	step("alert rule state", func() (int, error) { return r.Store.PruneAlertState(now) })
	return errors.Join(errs...)
}
