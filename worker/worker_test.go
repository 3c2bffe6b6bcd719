package worker

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestJobsRunOnTheirOwnTickers ensures each job runs at its own interval
// and that a slow job does not delay a fast one.
func TestJobsRunOnTheirOwnTickers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fast, slow atomic.Int32
		s := New(nil, nil)
		s.Add(Job{Name: "fast", Every: time.Second, Run: func(context.Context, time.Time) error {
			fast.Add(1)
			return nil
		}})
		s.Add(Job{Name: "slow", Every: time.Second, AtStart: true, Run: func(ctx context.Context, _ time.Time) error {
			slow.Add(1)
			select { // a job stuck for a minute
			case <-time.After(time.Minute):
			case <-ctx.Done():
			}
			return nil
		}})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { s.Run(ctx); close(done) }()
		time.Sleep(10*time.Second + time.Millisecond)
		synctest.Wait()
		if got := fast.Load(); got != 10 {
			t.Errorf("fast job ran %d times in 10s, want 10", got)
		}
		if got := slow.Load(); got != 1 {
			t.Errorf("slow job ran %d times while stuck, want 1", got)
		}
		cancel()
		<-done
	})
}

// TestFailingAndPanickingJobsKeepRunning ensures an error or a panic in one
// run is contained and the job runs again at its next tick.
func TestFailingAndPanickingJobsKeepRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs atomic.Int32
		s := New(nil, nil)
		s.Add(Job{Name: "flaky", Every: time.Minute, Run: func(context.Context, time.Time) error {
			if runs.Add(1)%2 == 0 {
				panic("boom")
			}
			return errors.New("failed")
		}})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { s.Run(ctx); close(done) }()
		time.Sleep(4*time.Minute + time.Millisecond)
		synctest.Wait()
		if got := runs.Load(); got != 4 {
			t.Errorf("job ran %d times in 4 minutes, want 4", got)
		}
		cancel()
		<-done
	})
}

// TestAddRejectsBadJobs ensures a job without an interval is refused.
func TestAddRejectsBadJobs(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Add accepted a job with no interval")
		}
	}()
	New(nil, nil).Add(Job{Name: "x", Run: func(context.Context, time.Time) error { return nil }})
}

// TestObserveSeesEveryRun ensures the observer gets each run of each job
// with its error, a panic counting as one.
func TestObserveSeesEveryRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		runs := map[string][]bool{} // job -> failed per run
		s := New(nil, nil)
		s.Observe(func(job string, _ time.Duration, err error) {
			mu.Lock()
			defer mu.Unlock()
			runs[job] = append(runs[job], err != nil)
		})
		s.Add(Job{Name: "ok", Every: time.Second, Run: func(context.Context, time.Time) error { return nil }})
		s.Add(Job{Name: "bad", Every: time.Second, Run: func(context.Context, time.Time) error { return errors.New("no") }})
		s.Add(Job{Name: "panic", Every: time.Second, Run: func(context.Context, time.Time) error { panic("boom") }})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { s.Run(ctx); close(done) }()
		time.Sleep(2*time.Second + time.Millisecond)
		synctest.Wait()
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for job, want := range map[string][]bool{"ok": {false, false}, "bad": {true, true}, "panic": {true, true}} {
			if !slices.Equal(runs[job], want) {
				t.Errorf("job %s: runs %v, want %v", job, runs[job], want)
			}
		}
	})
}
