package store_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
)

// TestRangeErrors ensures every read over a range of days refuses a range
// that runs backwards with ErrRangeReversed and one over 366 days with
// ErrRangeTooLong, both of kind ErrInvalid, in words that name no
// parameter of a front end (the API says date_from and date_to, the CLI
// something else).
func TestRangeErrors(t *testing.T) {
	e := newFailEnv(t)
	day := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	reads := map[string]func(from, to time.Time) error{
		"DomainStatistics": func(from, to time.Time) error {
			_, err := e.db.DomainStatistics(e.orgA.ID, e.a1.ID, from, to)
			return err
		},
		"DomainDays": func(from, to time.Time) error {
			_, err := e.db.DomainDays(e.orgA.ID, from, to)
			return err
		},
		"DomainDispositionDays": func(from, to time.Time) error {
			_, err := e.db.DomainDispositionDays(e.orgA.ID, e.a1.ID, from, to)
			return err
		},
		"EachSourceDay": func(from, to time.Time) error {
			return e.db.EachSourceDay(e.orgA.ID, e.a1.ID, from, to, func(time.Time, *store.SourceRollup) {})
		},
		"TLSStatistics": func(from, to time.Time) error {
			_, err := e.db.TLSStatistics(e.orgA.ID, e.a1.ID, from, to)
			return err
		},
	}
	check := func(name string, err, want error) {
		t.Helper()
		if !errors.Is(err, want) || !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v, want %v", name, err, want)
			return
		}
		if msg := err.Error(); strings.Contains(msg, "date_") {
			t.Errorf("%s: %q names an API parameter", name, msg)
		}
	}
	for name, read := range reads {
		check(name+" backwards", read(day, day.AddDate(0, 0, -1)), store.ErrRangeReversed)
		check(name+" 367 days", read(day.AddDate(0, 0, -366), day), store.ErrRangeTooLong)
		if err := read(day.AddDate(0, 0, -365), day); err != nil {
			t.Errorf("%s over 366 days: %v", name, err)
		}
	}
	from, to := day, day.Add(-time.Second)
	_, err := e.db.FailureStatistics(e.orgA.ID, store.FailureStatsFilter{DateFrom: &from, DateTo: &to})
	check("FailureStatistics backwards", err, store.ErrRangeReversed)
}
