package worker

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/dmarcd/dmarcd/store"
)

// DefaultSealEvery is how often the sealing job looks for closed days.
const DefaultSealEvery = 5 * time.Minute

// Seal is the job that moves the records of closed days from the form
// ingest writes into sealed blocks (store.SealRecords): a day is closed
// once it started DayAge ago and no report of it arrived within Quiet.
// A database migrated from schema 8 has all its records in the write
// form: the first runs seal them, block by block, logging their progress;
// a restart (even after a kill -9) goes on where they stopped.
type Seal struct {
	Store *store.DB
	// DayAge and Quiet: zero means store.DefaultSealDayAge and
	// store.DefaultSealQuiet.
	DayAge, Quiet time.Duration
	Log           *slog.Logger // nil discards
}

// Job returns the job to give the Scheduler: every 5 minutes, and once at
// start.
func (s *Seal) Job() Job {
	return Job{Name: "seal", Every: DefaultSealEvery, AtStart: true, Run: s.Run}
}

// progressEvery spaces the progress lines of a long sealing run.
const progressEvery = 10 * time.Second

// Run seals the closed days at now.
func (s *Seal) Run(ctx context.Context, now time.Time) error {
	log := s.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	last := time.Now()
	st, err := s.Store.SealRecords(ctx, store.SealOptions{Now: now, DayAge: s.DayAge, Quiet: s.Quiet,
		Progress: func(st store.SealStats) {
			if time.Since(last) >= progressEvery {
				last = time.Now()
				log.Info("sealing records", "blocks", st.Blocks, "records", st.Records)
			}
		}})
	if st.Blocks > 0 {
		log.Info("sealed records", "blocks", st.Blocks, "reports", st.Reports, "records", st.Records, "reports_open", st.Open)
	}
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("worker: seal records: %w", err)
	}
	return nil
}
