package store

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store/internal/days"
	"github.com/dmarcd/dmarcd/store/internal/reports"
)

// ReportStats is the statistics of one report.
type ReportStats struct {
	ReportID string `json:"report_id"`
	Summary
}

// DayStats is one UTC day of a domain's statistics.
type DayStats struct {
	Date      string `json:"date"`
	Messages  int64  `json:"messages"`
	DMARCPass int64  `json:"dmarc_pass"`
	DMARCFail int64  `json:"dmarc_fail"`
	Reports   int    `json:"reports"`
}

// DomainStats is the statistics of a domain over a range of UTC days.
type DomainStats struct {
	DomainID string    `json:"domain_id"`
	DateFrom time.Time `json:"date_from"`
	DateTo   time.Time `json:"date_to"`
	Summary
	ReportCount int           `json:"report_count"`
	ByDay       []DayStats    `json:"by_day"`
	TopSources  []SourceStats `json:"top_sources"`
}

// maxStatsDays is the longest range DomainStatistics serves.
const maxStatsDays = 366

// topSources is how many sources DomainStatistics returns.
const topSources = 20

// ReportStatistics returns the summary stored with report id of
// organization orgID. ErrNotFound as FindReport.
func (db *DB) ReportStatistics(orgID, id string) (*ReportStats, error) {
	var st *ReportStats
	err := db.bolt.View(func(tx *bolt.Tx) error {
		rec, sum, err := getOrgReport(tx, orgID, id, true)
		if err != nil {
			return err
		}
		st = &ReportStats{ReportID: rec.ID, Summary: *sum}
		return nil
	})
	if err != nil {
		return nil, wrap("report statistics", err)
	}
	return st, nil
}

// DomainStatistics returns the statistics of domain domainID of
// organization orgID over the UTC days from..to (both truncated to their
// UTC day, both included), read from the per-day roll-ups written at
// ingest. A report counts on the UTC day of its date_begin. ByDay has every
// day of the range, zeros included, oldest first; TopSources the 20 sources
// with the most messages (see MaxDaySources). Errors: ErrNotFound when the
// domain is not the organization's, ErrRangeReversed (an ErrInvalid) when
// to is before from, ErrRangeTooLong when the range is longer than 366
// days.
func (db *DB) DomainStatistics(orgID, domainID string, from, to time.Time) (*DomainStats, error) {
	fromDay, toDay, err := statsDays(from, to)
	if err != nil {
		return nil, err
	}
	st := &DomainStats{DomainID: domainID, DateFrom: days.Start(fromDay), DateTo: days.Start(toDay),
		ByDay: make([]DayStats, 0, toDay-fromDay+1), TopSources: []SourceStats{}}
	total := reports.NewDayRollup()
	err = db.bolt.View(func(tx *bolt.Tx) error {
		if _, err := getOrgDomain(tx, orgID, domainID); err != nil {
			return err
		}
		return eachRollup(tx, domainID, fromDay, toDay, func(day uint32, r *reports.DayRollup) {
			for uint32(len(st.ByDay)) < day-fromDay {
				st.ByDay = append(st.ByDay, emptyDay(fromDay+uint32(len(st.ByDay))))
			}
			messages, pass, fail := r.Sum.Totals()
			st.ByDay = append(st.ByDay, DayStats{Date: days.Date(day),
				Messages: messages, DMARCPass: pass, DMARCFail: fail, Reports: int(r.Reports)})
			total.Reports += r.Reports
			total.Sum.Merge(r.Sum)
			total.Src.Merge(r.Src)
		})
	})
	if err != nil {
		return nil, wrap("domain statistics", err)
	}
	for uint32(len(st.ByDay)) <= toDay-fromDay {
		st.ByDay = append(st.ByDay, emptyDay(fromDay+uint32(len(st.ByDay))))
	}
	st.Summary = total.Sum.Summary()
	st.ReportCount = int(total.Reports)
	if top := total.Src.Sorted(); len(top) > 0 {
		st.TopSources = top[:min(len(top), topSources)]
	}
	return st, nil
}

func emptyDay(day uint32) DayStats { return DayStats{Date: days.Date(day)} }

// eachRollup calls fn for every roll-up of the domain from fromDay to toDay.
func eachRollup(tx *bolt.Tx, domainID string, fromDay, toDay uint32, fn func(uint32, *reports.DayRollup)) error {
	return days.Scan(tx.Bucket(bucketRollups).Cursor(), []byte(domainID), 0, fromDay, toDay, func(day uint32, _, v []byte) error {
		r, err := reports.DecodeDayRollup(v)
		if err != nil {
			return fmt.Errorf("roll-up of domain %s day %d: %w", domainID, day, err)
		}
		fn(day, r)
		return nil
	})
}

// The statistics kept at ingest are package reports' values.
type (
	// AuthCount counts messages passing and failing one mechanism.
	AuthCount = reports.AuthCount
	// DMARCCount counts DMARC results.
	DMARCCount = reports.DMARCCount
	// DispositionCount counts messages by applied disposition.
	DispositionCount = reports.DispositionCount
	// CountryGroup counts messages from one country.
	CountryGroup = reports.CountryGroup
	// ASNGroup counts messages from one autonomous system.
	ASNGroup = reports.ASNGroup
	// AuthResultGroup counts messages with one combination of results.
	AuthResultGroup = reports.AuthResultGroup
	// Summary is the statistics of a set of records, computed once at
	// ingest.
	Summary = reports.Summary
	// SourceStats counts the messages of one sending IP.
	SourceStats = reports.SourceStats
)

// MaxDaySources is how many sending IPs a domain's day roll-up keeps.
const MaxDaySources = reports.MaxDaySources
