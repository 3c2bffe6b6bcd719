package store

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store/internal/codec"
	"github.com/dmarcd/dmarcd/store/internal/days"
	"github.com/dmarcd/dmarcd/store/internal/reports"
)

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

// eachRollupTotals is eachRollup reading only the totals of each roll-up
// (version, reports, messages, DMARC pass and fail; see reports.AppendDayRollup),
// from their compact copies in bucketDayTotals, not the roll-ups: the
// overview of 1,000 domains reads 30,000 days.
func eachRollupTotals(tx *bolt.Tx, domainID string, fromDay, toDay uint32, fn func(uint32, DayStats)) error {
	return days.Scan(tx.Bucket(bucketDayTotals).Cursor(), []byte(domainID), 0, fromDay, toDay, func(day uint32, _, v []byte) error {
		d := codec.NewDec(v)
		if d.Byte() != codecVersion {
			return fmt.Errorf("roll-up of domain %s day %d: %w", domainID, day, errCorrupt)
		}
		t := DayStats{Reports: int(d.Varint()), Messages: d.Varint(), DMARCPass: d.Varint(), DMARCFail: d.Varint()}
		if !d.Ok() {
			return fmt.Errorf("roll-up of domain %s day %d: %w", domainID, day, errCorrupt)
		}
		fn(day, t)
		return nil
	})
}

// DomainDays returns, for every domain of organization orgID, its daily
// totals over the UTC days from..to (both included, oldest first, zeros
// included), read from the roll-ups in one transaction: what the web
// overview draws. Errors as DomainStatistics.
func (db *DB) DomainDays(orgID string, from, to time.Time) (map[string][]DayStats, error) {
	fromDay, toDay, err := statsDays(from, to)
	if err != nil {
		return nil, err
	}
	out := map[string][]DayStats{}
	err = db.bolt.View(func(tx *bolt.Tx) error {
		if _, err := getOrg(tx, orgID); err != nil {
			return err
		}
		return forEachOrgDomainID(tx, orgID, func(id string) error {
			byDay := make([]DayStats, toDay-fromDay+1)
			for i := range byDay {
				byDay[i] = emptyDay(fromDay + uint32(i))
			}
			out[id] = byDay
			return eachRollupTotals(tx, id, fromDay, toDay, func(day uint32, t DayStats) {
				t.Date = byDay[day-fromDay].Date
				byDay[day-fromDay] = t
			})
		})
	})
	if err != nil {
		return nil, wrap("domain days", err)
	}
	return out, nil
}

// forEachOrgDomainID calls fn with the id of every domain of orgID.
func forEachOrgDomainID(tx *bolt.Tx, orgID string, fn func(string) error) error {
	prefix := orgPrefix(orgID)
	c := tx.Bucket(bucketDomainsByOrg).Cursor()
	for k, _ := c.Seek(prefix); k != nil && len(k) >= len(prefix) && string(k[:len(prefix)]) == string(prefix); k, _ = c.Next() {
		if err := fn(idFromOrgTimeIDKey(k)); err != nil {
			return err
		}
	}
	return nil
}

// DispositionDay is what receivers did with a domain's mail on one UTC day.
type DispositionDay struct {
	Date string `json:"date"`
	DispositionCount
}

// DomainDispositionDays returns the daily dispositions of domain domainID
// of organization orgID over the UTC days from..to (both included, oldest
// first, zeros included), read from the head of each day roll-up (its
// totals, not its groups or sources): the web domain page's disposition
// chart. Errors as DomainStatistics.
func (db *DB) DomainDispositionDays(orgID, domainID string, from, to time.Time) ([]DispositionDay, error) {
	fromDay, toDay, err := statsDays(from, to)
	if err != nil {
		return nil, err
	}
	out := make([]DispositionDay, toDay-fromDay+1)
	for i := range out {
		out[i].Date = days.Date(fromDay + uint32(i))
	}
	err = db.bolt.View(func(tx *bolt.Tx) error {
		if _, err := getOrgDomain(tx, orgID, domainID); err != nil {
			return err
		}
		return days.Scan(tx.Bucket(bucketRollups).Cursor(), []byte(domainID), 0, fromDay, toDay, func(day uint32, _, v []byte) error {
			// The head of reports.AppendDayRollup: version, reports, then
			// appendSummary's totals up to the dispositions; a sealed
			// roll-up (AppendSealedDayRollup) has the same head.
			d := codec.NewDec(v)
			if ver := d.Byte(); ver != codecVersion && !reports.DayRollupSealed(v) {
				return fmt.Errorf("roll-up of domain %s day %d: %w", domainID, day, errCorrupt)
			}
			for range 8 { // reports, messages, DMARC, DKIM and SPF pass and fail
				d.Varint()
			}
			dc := DispositionCount{None: d.Varint(), Quarantine: d.Varint(), Reject: d.Varint()}
			if !d.Ok() {
				return fmt.Errorf("roll-up of domain %s day %d: %w", domainID, day, errCorrupt)
			}
			out[day-fromDay].DispositionCount = dc
			return nil
		})
	})
	if err != nil {
		return nil, wrap("disposition days", err)
	}
	return out, nil
}
