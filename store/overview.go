package store

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store/internal/codec"
	"github.com/dmarcd/dmarcd/store/internal/days"
)

// eachRollupTotals is eachRollup reading only the totals of each roll-up
// (version, reports, messages, DMARC pass and fail; see AppendDayRollup),
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
