// Package worker is dmarcd's scheduler: one Run loop that drives every
// periodic job (webhook deliveries, re-verification, DNS change detection,
// retention) with its own ticker. Time is injected and every interval is a
// setting, so tests run schedules in milliseconds or under testing/synctest.
package worker

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"
)

// Job is one periodic task. Run gets the time of the tick it serves; its
// error is logged and the job runs again at its next tick.
type Job struct {
	Name  string
	Every time.Duration
	// AtStart runs the job once when the scheduler starts, before its
	// first tick.
	AtStart bool
	Run     func(ctx context.Context, now time.Time) error
}

// Scheduler runs jobs until its context ends.
type Scheduler struct {
	log     *slog.Logger
	now     func() time.Time
	jobs    []Job
	observe func(job string, took time.Duration, err error)
}

// New returns a scheduler that logs to log and reads the time from now (nil
// means time.Now).
func New(log *slog.Logger, now func() time.Time) *Scheduler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if now == nil {
		now = time.Now
	}
	return &Scheduler{log: log, now: now}
}

// Observe sets fn to be called after every run of every job with its
// duration and its error (a panic is an error), for metrics. Call it
// before Run.
func (s *Scheduler) Observe(fn func(job string, took time.Duration, err error)) { s.observe = fn }

// Add registers a job; call it before Run. It panics on a job without a
// positive interval, which is a programming error.
func (s *Scheduler) Add(j Job) {
	if j.Every <= 0 || j.Run == nil {
		panic(fmt.Sprintf("worker: job %q needs a positive interval and a Run func", j.Name))
	}
	s.jobs = append(s.jobs, j)
}

// Run runs every job on its own ticker until ctx ends, then waits for the
// runs in flight to return. Each job has its own goroutine, so a slow or
// failing job never delays another; a job never overlaps itself (a tick that
// comes while it still runs is dropped, as time.Ticker does).
func (s *Scheduler) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, j := range s.jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.loop(ctx, j)
		}()
	}
	wg.Wait()
}

func (s *Scheduler) loop(ctx context.Context, j Job) {
	t := time.NewTicker(j.Every)
	defer t.Stop()
	if j.AtStart {
		s.runOnce(ctx, j)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.runOnce(ctx, j)
		}
	}
}

// runOnce runs the job, turning a panic into a logged error so that one bad
// run does not take the process down.
func (s *Scheduler) runOnce(ctx context.Context, j Job) {
	if ctx.Err() != nil {
		return
	}
	start := s.now()
	began := time.Now()
	var err error
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("job panicked", "job", j.Name, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			err = fmt.Errorf("worker: job %s panicked: %v", j.Name, v)
		}
		if s.observe != nil {
			s.observe(j.Name, time.Since(began), err)
		}
	}()
	if err = j.Run(ctx, start); err != nil && ctx.Err() != nil {
		err = nil // cut short by shutdown, not a failure
	}
	if err != nil {
		s.log.Error("job failed", "job", j.Name, "error", err)
		return
	}
	s.log.Debug("job done", "job", j.Name, "duration", time.Since(began))
}
