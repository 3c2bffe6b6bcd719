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

// FailureDomainCount counts the failure reports of one domain.
type FailureDomainCount struct {
	DomainID string `json:"domain_id"`
	Domain   string `json:"domain"`
	Count    int64  `json:"count"`
}

// FailureDayCount counts the failure reports that arrived on one UTC day.
type FailureDayCount struct {
	Date  string `json:"date"`
	Count int64  `json:"count"`
}

// FailureSummary is API.md's forensic summary: the last FailureSummaryDays
// UTC days, today included, up to now.
type FailureSummary struct {
	WindowStart   time.Time            `json:"window_start"`
	WindowEnd     time.Time            `json:"window_end"`
	Total         int64                `json:"total"`
	ByAuthFailure FailureCheckCounts   `json:"by_auth_failure"`
	ByDomain      []FailureDomainCount `json:"by_domain"`
	TopSourceIPs  []FailureSourceCount `json:"top_source_ips"`
	ByDay         []FailureDayCount    `json:"by_day"`
}

// FailureStats is API.md's forensic statistics.
type FailureStats struct {
	Total         int64                 `json:"total"`
	ByAuthFailure FailureCheckCounts    `json:"by_auth_failure"`
	ByCountry     []FailureCountryCount `json:"by_country"`
	ByASN         []FailureASNCount     `json:"by_asn"`
	ByDomain      []FailureDomainCount  `json:"by_domain"`
	TopSourceIPs  []FailureSourceCount  `json:"top_source_ips"`
}

// FailureStatsFilter narrows FailureStatistics: one domain, and arrival
// dates from DateFrom to DateTo (both included, to the second).
type FailureStatsFilter struct {
	DomainID         string
	DateFrom, DateTo *time.Time
}

const (
	// FailureSummaryDays is the window of FailureSummary, in UTC days.
	FailureSummaryDays = 7
	// FailureTopSources is how many source IPs the summary and statistics
	// list.
	FailureTopSources = 10
)

// FailureSummary returns the failure reports of organization orgID that
// arrived in the last 7 UTC days (today, up to now, and the 6 days before),
// from the day roll-ups: its cost does not grow with the number of reports.
// ByDay has 7 entries, oldest first, zeros included; ByDomain is ordered by
// count, most first; TopSourceIPs has the 10 IPs with the most reports.
func (db *DB) FailureSummary(orgID string, now time.Time) (*FailureSummary, error) {
	now = now.UTC().Truncate(time.Second)
	today := days.Of(now)
	first := today - min(today, FailureSummaryDays-1)
	s := &FailureSummary{WindowStart: days.Start(first), WindowEnd: now, ByDay: make([]FailureDayCount, 0, FailureSummaryDays)}
	for d := first; d <= today; d++ {
		s.ByDay = append(s.ByDay, FailureDayCount{Date: days.Date(d)})
	}
	acc := reports.NewFailSummaryAcc()
	err := db.bolt.View(func(tx *bolt.Tx) error {
		err := eachRawFailureDay(tx, orgID, first, today, func(day uint32, domainID string, raw []byte) error {
			n, err := acc.Add(raw, domainID)
			s.ByDay[day-first].Count += n
			return err
		})
		if err != nil {
			return err
		}
		s.ByDomain, err = domainCounts(tx, acc.Domains())
		return err
	})
	if err != nil {
		return nil, wrap("failure summary", err)
	}
	s.Total, s.TopSourceIPs = acc.Total(), acc.Top(FailureTopSources)
	s.ByAuthFailure = acc.ByAuthFailure()
	return s, nil
}

// FailureStatistics returns the statistics of the failure reports of
// organization orgID, all time unless f narrows them. Whole UTC days come
// from the day roll-ups; the reports of a day that the date range cuts are
// read one by one. Errors: ErrNotFound when f.DomainID is not a domain of
// the organization, ErrRangeReversed (an ErrInvalid) when f.DateTo is
// before f.DateFrom.
func (db *DB) FailureStatistics(orgID string, f FailureStatsFilter) (*FailureStats, error) {
	if f.DateFrom != nil && f.DateTo != nil && f.DateTo.Before(*f.DateFrom) {
		return nil, ErrRangeReversed
	}
	all := reports.NewFailureDay()
	perDomain := map[string]int64{}
	var st *FailureStats
	err := db.bolt.View(func(tx *bolt.Tx) error {
		if f.DomainID != "" {
			if _, err := getOrgDomain(tx, orgID, f.DomainID); err != nil {
				return err
			}
		}
		add := func(domainID string, day *reports.FailureDay) {
			if f.DomainID == "" || f.DomainID == domainID {
				perDomain[domainID] += day.Total()
				all.Merge(day)
			}
		}
		if err := statsRangeDays(tx, orgID, f, add); err != nil {
			return err
		}
		byDomain, err := domainCounts(tx, perDomain)
		if err != nil {
			return err
		}
		st = &FailureStats{Total: all.Total(), ByAuthFailure: all.ByAuthFailure(), ByCountry: all.ByCountry(),
			ByASN: all.ByASN(), ByDomain: byDomain, TopSourceIPs: all.Top(FailureTopSources)}
		return nil
	})
	if err != nil {
		return nil, wrap("failure statistics", err)
	}
	return st, nil
}

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

// The counts of failure report statistics are package reports' values.
type (
	// FailureCheckCounts counts failure reports per failed check.
	FailureCheckCounts = reports.FailureCheckCounts
	// FailureSourceCount counts the failure reports about one source IP.
	FailureSourceCount = reports.FailureSourceCount
	// FailureCountryCount counts the failure reports from one country.
	FailureCountryCount = reports.FailureCountryCount
	// FailureASNCount counts the failure reports from one autonomous
	// system.
	FailureASNCount = reports.FailureASNCount
)
