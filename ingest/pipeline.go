package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dmarcd/dmarcd/metrics"
	"github.com/dmarcd/dmarcd/store"
)

// work is what one Ingest call hands the writer: record chunks of a large
// report, its finished reports, or a quarantine item. done is closed once
// it is committed (or failed: err).
type work struct {
	batch   store.IngestBatch
	records int
	chunk   bool // chunks only: the job is still parsing
	bulk    bool // an import's: its group may wait ImportBatchDelay
	off     int  // index of batch.Reports in the commit's outcomes
	outs    []store.ReportOutcome
	err     error
	done    chan struct{}
}

// newWork is work of j's input.
func (j *job) newWork(b store.IngestBatch, records int, chunk bool) *work {
	return &work{batch: b, records: records, chunk: chunk, bulk: j.d.Source == SourceImport, done: make(chan struct{})}
}

// chunkRecords is how many records of a report a job hands to the writer
// at a time: half a commit group. The chunk being read, the one being
// committed and bbolt's copy of it are what a large report holds; with
// whole groups a 1M-record import peaked at 63-68 MB of RSS, with half
// groups at 56 MB, for a few percent of its speed.
func (p *Pipeline) chunkRecords() int { return max(p.cfg.BatchRecords/2, 1) }

// pendingBudget is how many records may wait for the writer (handed to it,
// not yet committed) before jobs stop starting to parse: a few commits'
// worth.
func (p *Pipeline) pendingBudget() int64 { return 4 * int64(p.cfg.BatchRecords) }

// underBudget waits until the records waiting for the writer are under the
// budget, or ctx ends.
func (p *Pipeline) underBudget(ctx context.Context) error {
	for p.pending.Load() >= p.pendingBudget() {
		p.drainMu.Lock()
		ch := p.drained
		p.drainMu.Unlock()
		if p.pending.Load() < p.pendingBudget() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("ingest: %w", ctx.Err())
		}
	}
	return nil
}

// committed releases the budget of a committed group and wakes the jobs
// waiting for it.
func (p *Pipeline) committed(batch []*work) {
	n := 0
	for _, w := range batch {
		n += w.records
	}
	p.pending.Add(-int64(n))
	p.drainMu.Lock()
	close(p.drained)
	p.drained = make(chan struct{})
	p.drainMu.Unlock()
}

// submit queues w for the writer. Errors: ErrStopped once Run has ended,
// ctx's error while the queue is full.
func (p *Pipeline) submit(ctx context.Context, w *work) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return ErrStopped
	}
	p.pending.Add(int64(w.records))
	select {
	case p.queue <- w:
		return nil
	case <-ctx.Done():
		p.pending.Add(-int64(w.records))
		return fmt.Errorf("ingest: %w", ctx.Err())
	}
}

// Run is the single writer: it takes the work of concurrent Ingest calls
// and commits it in groups, one bbolt transaction per group. After taking
// work it keeps collecting while other calls are still parsing, until
// BatchRecords records are pending or BatchDelay (ImportBatchDelay for a
// group of imports only) has passed; with nobody else parsing it commits
// at once, and work that arrives during a commit joins the next one. When ctx ends it commits what was queued and returns
// nil; Ingest calls made afterwards fail with ErrStopped. Run may be called
// only once; a second call returns an error.
func (p *Pipeline) Run(ctx context.Context) error {
	if !p.running.CompareAndSwap(false, true) {
		return errors.New("ingest: Run called twice")
	}
	stopped := make(chan struct{})
	go func() {
		<-ctx.Done()
		// Taking the lock waits for submitters already sending, whom the
		// loop below keeps serving; later ones see closed.
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		close(stopped)
	}()
	for {
		select {
		case w := <-p.queue:
			p.commit(p.gather(w, stopped))
		case <-stopped:
			for {
				select {
				case w := <-p.queue:
					p.commit(p.gather(w, stopped))
				default:
					return nil
				}
			}
		}
	}
}

// gather collects the group committed with first.
func (p *Pipeline) gather(first *work, stopped <-chan struct{}) []*work {
	batch := []*work{first}
	records := first.records
	parsingInBatch := 0
	if first.chunk {
		parsingInBatch++
	}
	// A group of imports only waits longer; one that a sender waiting on
	// its acknowledgement joins commits within BatchDelay of that.
	bulk := first.bulk
	var timer *time.Timer
	var deadline time.Time
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for records < p.cfg.BatchRecords {
		var w *work
		select {
		case w = <-p.queue:
		default:
		}
		if w == nil {
			// Wait only for calls that are parsing and not in this group.
			if p.parsing.Load() <= int64(parsingInBatch) {
				break
			}
			if timer == nil {
				delay := p.cfg.BatchDelay
				if bulk {
					delay = p.cfg.ImportBatchDelay
				}
				deadline, timer = time.Now().Add(delay), time.NewTimer(delay)
			}
			select {
			case w = <-p.queue:
			case <-timer.C:
				return batch
			case <-stopped:
				return batch
			}
		}
		batch = append(batch, w)
		records += w.records
		if w.chunk {
			parsingInBatch++
		}
		if bulk && !w.bulk {
			bulk = false
			if timer != nil && time.Until(deadline) > p.cfg.BatchDelay {
				timer.Reset(p.cfg.BatchDelay)
			}
		}
	}
	return batch
}

// commit writes a group in one transaction. When that fails and the group
// has several members, each is committed alone, so that one bad input
// cannot fail the others.
func (p *Pipeline) commit(batch []*work) {
	defer p.committed(batch)
	err := p.commitGroup(batch)
	if err != nil && len(batch) > 1 {
		for _, w := range batch {
			w.err = p.commitGroup([]*work{w})
			close(w.done)
		}
		return
	}
	for _, w := range batch {
		w.err = err
		close(w.done)
	}
}

func (p *Pipeline) commitGroup(batch []*work) error {
	var b store.IngestBatch
	for _, w := range batch {
		b.Chunks = append(b.Chunks, w.batch.Chunks...)
		w.off = len(b.Reports)
		b.Reports = append(b.Reports, w.batch.Reports...)
		b.Quarantine = append(b.Quarantine, w.batch.Quarantine...)
		b.Failures = append(b.Failures, w.batch.Failures...)
		b.TLS = append(b.TLS, w.batch.TLS...)
	}
	start := time.Now()
	outs, err := p.ing.Commit(&b)
	took := time.Since(start)
	p.met.commit(took)
	p.commits.Add(1)
	p.commitNanos.Add(int64(took))
	if err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	for _, w := range batch {
		w.outs = outs[w.off : w.off+len(w.batch.Reports)]
	}
	return nil
}

// Stats are counters of the pipeline's writer since New.
type Stats struct {
	Commits    uint64        // transactions committed (or attempted)
	CommitTime time.Duration // spent in them, fsync included
}

// Stats returns the writer's counters, for benchmarks and tests.
func (p *Pipeline) Stats() Stats {
	return Stats{Commits: p.commits.Load(), CommitTime: time.Duration(p.commitNanos.Load())}
}

// pipelineMetrics are the pipeline's series; a nil value records nothing.
type pipelineMetrics struct {
	reports *metrics.CounterVec
	records *metrics.Counter
	latency *metrics.Histogram
}

func newPipelineMetrics(r *metrics.Registry) *pipelineMetrics {
	if r == nil {
		return nil
	}
	return &pipelineMetrics{
		reports: r.Counter("dmarcd_reports_ingested_total",
			"Reports ingested, by source, kind (aggregate, failure, tls; empty for quarantined or refused inputs) and outcome (stored, duplicate, quarantined, refused).",
			"source", "kind", "outcome"),
		records: r.Counter("dmarcd_records_ingested_total", "Records of stored aggregate reports.").With(),
		latency: r.Histogram("dmarcd_ingest_commit_seconds", "Time to commit one group of ingested work.",
			metrics.DefaultLatencyBuckets).With(),
	}
}

func (m *pipelineMetrics) report(src Source, kind Kind, outcome string, records int) {
	if m == nil {
		return
	}
	m.reports.With(string(src), string(kind), outcome).Inc()
	if records > 0 {
		m.records.Add(uint64(records))
	}
}

func (m *pipelineMetrics) commit(d time.Duration) {
	if m != nil {
		m.latency.Observe(d.Seconds())
	}
}
