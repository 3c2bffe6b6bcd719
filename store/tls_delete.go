package store

import (
	"bytes"
	"encoding/binary"

	bolt "go.etcd.io/bbolt"
)

// expiredTLS returns the ids of up to max reports whose date_end is before
// cutoff (Unix seconds). Every such report began before cutoff, so each
// organization's range is read only up to there.
func expiredTLS(tx *bolt.Tx, cutoff uint64, max int) []string {
	var ids []string
	c := tx.Bucket(bucketTLSByOrg).Cursor()
	k, v := c.First()
	for k != nil && len(ids) < max {
		if len(k) != tlsTimeKeyLen || len(v) != idLen+8 {
			k, v = c.Next()
			continue
		}
		if tlsKeyBegin(k) < cutoff {
			if binary.BigEndian.Uint64(v[idLen:]) < cutoff {
				ids = append(ids, tlsKeyID(k))
			}
			k, v = c.Next()
			continue
		}
		next := prefixEnd(k[:idLen])
		if next == nil {
			break
		}
		k, v = c.Seek(next)
	}
	return ids
}

// deleteTLS removes report id, its index and dedup entries, and takes it
// out of its day's roll-up.
func deleteTLS(tx *bolt.Tx, id string, rolls tlsDays) error {
	d, err := getTLS(tx, id)
	if err != nil {
		return err
	}
	r := d.TLSReport
	for _, del := range []struct {
		b []byte
		k []byte
	}{
		{bucketTLSReports, idKey(id)},
		{bucketTLSByOrg, tlsTimeKey(r.OrgID, r.DateBegin, id)},
		{bucketTLSByDomain, tlsTimeKey(r.DomainID, r.DateBegin, id)},
		{bucketTLSDedup, tlsDedupKey(r.DomainID, r.OrganizationName, r.ReportID)},
	} {
		if err := tx.Bucket(del.b).Delete(del.k); err != nil {
			return err
		}
	}
	return rolls.add(tx, d, -1)
}

// deleteDomainTLS removes the TLS reports of a deleted domain with their
// roll-ups. It runs inside DeleteDomain (registered as a cascade).
func deleteDomainTLS(tx *bolt.Tx, domainID string) error {
	prefix := []byte(domainID)
	var ids []string
	c := tx.Bucket(bucketTLSByDomain).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		if len(k) == tlsTimeKeyLen {
			ids = append(ids, tlsKeyID(k))
		}
	}
	for _, id := range ids {
		d, err := getTLS(tx, id)
		if err != nil {
			return err
		}
		if err := tx.Bucket(bucketTLSReports).Delete(idKey(id)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketTLSByOrg).Delete(tlsTimeKey(d.OrgID, d.DateBegin, id)); err != nil {
			return err
		}
	}
	for _, b := range [][]byte{bucketTLSByDomain, bucketTLSDedup, bucketTLSRollups} {
		if _, err := deletePrefix(tx.Bucket(b), prefix, -1); err != nil {
			return err
		}
	}
	return nil
}
