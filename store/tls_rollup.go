package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store/internal/days"
	"github.com/dmarcd/dmarcd/store/internal/reports"
)

// tlsRollupKey is domain id | UTC day number (big-endian).
func tlsRollupKey(domainID string, day uint32) []byte {
	k := make([]byte, 0, idLen+4)
	k = append(k, domainID...)
	return binary.BigEndian.AppendUint32(k, day)
}

// tlsDays holds the roll-ups a transaction changes, written once at its end.
type tlsDays map[string]*reports.TLSDay

// get loads the roll-up of key, from the transaction the first time.
func (ds tlsDays) get(tx *bolt.Tx, key []byte) (*reports.TLSDay, error) {
	if d, ok := ds[string(key)]; ok {
		return d, nil
	}
	d := &reports.TLSDay{}
	if raw := tx.Bucket(bucketTLSRollups).Get(key); raw != nil {
		if err := json.Unmarshal(raw, d); err != nil {
			return nil, fmt.Errorf("decode TLS roll-up %x: %w", key, err)
		}
	}
	ds[string(key)] = d
	return d, nil
}

// add counts report r into its day's roll-up, sign 1 to add, -1 to take
// it out again (retention).
func (ds tlsDays) add(tx *bolt.Tx, r *TLSReportDetail, sign int64) error {
	d, err := ds.get(tx, tlsRollupKey(r.DomainID, days.Of(r.DateBegin)))
	if err != nil {
		return err
	}
	d.Add(r, sign)
	return nil
}

// put writes every changed roll-up, deleting those left with no report.
func (ds tlsDays) put(tx *bolt.Tx) error {
	b := tx.Bucket(bucketTLSRollups)
	for k, d := range ds {
		if d.Reports <= 0 {
			if err := b.Delete([]byte(k)); err != nil {
				return err
			}
			continue
		}
		raw, err := json.Marshal(d)
		if err != nil {
			return err
		}
		if err := b.Put([]byte(k), raw); err != nil {
			return err
		}
	}
	return nil
}

// TLSStatistics returns the TLS statistics of domain domainID of
// organization orgID over the UTC days from from to to (both included, at
// most 366), read from the roll-ups only. Errors: ErrNotFound for a domain
// of another organization, ErrRangeReversed or ErrRangeTooLong as
// DomainStatistics.
func (db *DB) TLSStatistics(orgID, domainID string, from, to time.Time) (*TLSStatistics, error) {
	fromDay, toDay, err := statsDays(from, to)
	if err != nil {
		return nil, err
	}
	rolls := map[uint32]*reports.TLSDay{}
	err = db.bolt.View(func(tx *bolt.Tx) error {
		if _, err := getOrgDomain(tx, orgID, domainID); err != nil {
			return err
		}
		c := tx.Bucket(bucketTLSRollups).Cursor()
		end := tlsRollupKey(domainID, toDay)
		for k, v := c.Seek(tlsRollupKey(domainID, fromDay)); k != nil && string(k) <= string(end); k, v = c.Next() {
			if len(k) != idLen+4 {
				continue
			}
			d := &reports.TLSDay{}
			if err := json.Unmarshal(v, d); err != nil {
				return fmt.Errorf("decode TLS roll-up %x: %w", k, err)
			}
			rolls[binary.BigEndian.Uint32(k[idLen:])] = d
		}
		return nil
	})
	if err != nil {
		return nil, wrap("TLS statistics", err)
	}
	return reports.TLSStatisticsOf(domainID, fromDay, toDay, rolls), nil
}

// TLS statistics are package reports' values.
type (
	// TLSStatistics are a domain's TLS sessions over a range of UTC days.
	TLSStatistics = reports.TLSStatistics
	// TLSDayStats are one UTC day's sessions.
	TLSDayStats = reports.TLSDayStats
	// TLSResultStats are the failed sessions of one result type.
	TLSResultStats = reports.TLSResultStats
	// TLSPolicyStats are the sessions under one policy type.
	TLSPolicyStats = reports.TLSPolicyStats
	// TLSMXStats are the failed sessions with one receiving MX host.
	TLSMXStats = reports.TLSMXStats
	// TLSIPStats are the failed sessions from one sending IP.
	TLSIPStats = reports.TLSIPStats
)
