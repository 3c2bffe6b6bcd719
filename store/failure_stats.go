package store

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store/internal/days"
	"github.com/dmarcd/dmarcd/store/internal/reports"
)

// statsRangeDays feeds add with what arrived from f.DateFrom to f.DateTo:
// roll-ups for the days wholly inside, and, for a first or last day the
// range cuts, a roll-up made from its reports in range.
func statsRangeDays(tx *bolt.Tx, orgID string, f FailureStatsFilter, add func(string, *reports.FailureDay)) error {
	firstDay, lastDay := uint32(0), uint32(1<<32-1)
	if f.DateFrom != nil {
		firstDay = days.Of(*f.DateFrom)
		if !days.Start(firstDay).Equal(f.DateFrom.UTC()) {
			// A cut first day: its reports from DateFrom to the end of the
			// day (or to DateTo when the range ends that day).
			end := days.Start(firstDay + 1).Add(-time.Second)
			if f.DateTo != nil && f.DateTo.Before(end) {
				end = *f.DateTo
			}
			if err := partialDay(tx, orgID, *f.DateFrom, end, add); err != nil {
				return err
			}
			firstDay++
		}
	}
	if f.DateTo != nil {
		to := f.DateTo.UTC()
		lastDay = days.Of(to)
		if !days.Start(lastDay + 1).Add(-time.Second).Equal(to) {
			if lastDay >= firstDay {
				if err := partialDay(tx, orgID, days.Start(lastDay), to, add); err != nil {
					return err
				}
			}
			if lastDay == 0 {
				return nil
			}
			lastDay--
		}
	}
	if firstDay > lastDay {
		return nil
	}
	return eachFailureDay(tx, orgID, firstDay, lastDay, func(_ uint32, domainID string, day *reports.FailureDay) {
		add(domainID, day)
	})
}

// partialDay counts, per domain, the reports of orgID that arrived from
// from to to (both included), reading them.
func partialDay(tx *bolt.Tx, orgID string, from, to time.Time, add func(string, *reports.FailureDay)) error {
	rolls := map[string]*reports.FailureDay{}
	lo, hi := failTimePrefix(orgID, from), failTimePrefix(orgID, to.Add(time.Second))
	c := tx.Bucket(bucketFailuresByOrg).Cursor()
	for k, _ := c.Seek(lo); k != nil && bytes.Compare(k, hi) < 0; k, _ = c.Next() {
		if len(k) != failTimeKeyLen {
			continue
		}
		id := failKeyID(k)
		raw := tx.Bucket(bucketFailures).Get(idKey(id))
		if raw == nil {
			continue
		}
		det, mask, err := reports.DecodeFailure(id, raw)
		if err != nil {
			return err
		}
		day := rolls[det.DomainID]
		if day == nil {
			day = reports.NewFailureDay()
			rolls[det.DomainID] = day
		}
		day.Add(det.FailureReport, mask, 1)
	}
	for domainID, day := range rolls {
		add(domainID, day)
	}
	return nil
}

// eachFailureDay calls fn for every roll-up of orgID from day first to
// last, in day order.
func eachFailureDay(tx *bolt.Tx, orgID string, first, last uint32, fn func(uint32, string, *reports.FailureDay)) error {
	return eachRawFailureDay(tx, orgID, first, last, func(day uint32, domainID string, raw []byte) error {
		f, err := reports.DecodeFailureDay(raw)
		if err != nil {
			return err
		}
		fn(day, domainID, f)
		return nil
	})
}

// eachRawFailureDay is eachFailureDay without the decoding: fn gets the
// stored value, valid only during the call.
func eachRawFailureDay(tx *bolt.Tx, orgID string, first, last uint32, fn func(uint32, string, []byte) error) error {
	// Keys: organization | day | domain.
	return days.Scan(tx.Bucket(bucketFailureRollups).Cursor(), orgPrefix(orgID), idLen, first, last, func(day uint32, k, v []byte) error {
		if err := fn(day, failRollupDomain(k), v); err != nil {
			return fmt.Errorf("failure roll-up %x: %w", k, err)
		}
		return nil
	})
}

// domainCounts names the domains counted, most reports first (ties by
// name). A domain deleted meanwhile has no roll-ups left, so it cannot be
// here; should one be missing, its name is "".
func domainCounts(tx *bolt.Tx, counts map[string]int64) ([]FailureDomainCount, error) {
	out := make([]FailureDomainCount, 0, len(counts))
	for id, n := range counts {
		if n <= 0 {
			continue
		}
		name := ""
		if rec, err := getDomain(tx, id); err == nil {
			name = rec.Name
		} else if !isKind(err, ErrNotFound) {
			return nil, err
		}
		out = append(out, FailureDomainCount{DomainID: id, Domain: name, Count: n})
	}
	slices.SortFunc(out, func(x, y FailureDomainCount) int {
		return cmp.Or(cmp.Compare(y.Count, x.Count), cmp.Compare(x.Domain, y.Domain), cmp.Compare(x.DomainID, y.DomainID))
	})
	return out, nil
}
