package store

import (
	"time"

	bolt "go.etcd.io/bbolt"
)

// DomainDays returns, for every domain of organization orgID, its daily
// totals over the UTC days from..to (both included, oldest first, zeros
// included), read from the roll-ups in one transaction: what the web
// overview draws. Errors as DomainStatistics.
func (db *DB) DomainDays(orgID string, from, to time.Time) (map[string][]DayStats, error) {
	fromDay, toDay := dayNumber(from), dayNumber(to)
	if toDay < fromDay {
		return nil, errorf(ErrInvalid, "date_to is before date_from")
	}
	if toDay-fromDay >= maxStatsDays {
		return nil, errorf(ErrInvalid, "date range is longer than %d days", maxStatsDays)
	}
	out := map[string][]DayStats{}
	err := db.bolt.View(func(tx *bolt.Tx) error {
		if _, err := getOrg(tx, orgID); err != nil {
			return err
		}
		return forEachOrgDomainID(tx, orgID, func(id string) error {
			days := make([]DayStats, toDay-fromDay+1)
			for i := range days {
				days[i] = emptyDay(fromDay + uint32(i))
			}
			err := eachRollup(tx, id, fromDay, toDay, func(day uint32, r *dayRollup) {
				d := &days[day-fromDay]
				d.Messages, d.DMARCPass, d.DMARCFail, d.Reports = r.sum.messages, r.sum.dmarcPass, r.sum.dmarcFail, int(r.reports)
			})
			out[id] = days
			return err
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
