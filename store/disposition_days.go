package store

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store/internal/codec"
	"github.com/dmarcd/dmarcd/store/internal/days"
)

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
			// The head of AppendDayRollup: version, reports, then
			// appendSummary's totals up to the dispositions.
			d := codec.NewDec(v)
			if d.Byte() != codecVersion {
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
