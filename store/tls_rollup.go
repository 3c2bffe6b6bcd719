package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

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
