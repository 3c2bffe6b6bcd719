package store

import (
	"bytes"

	bolt "go.etcd.io/bbolt"
)

// expiredFailures returns the ids of up to max reports that arrived before
// cutoff (Unix seconds): the head of each organization's range.
func expiredFailures(tx *bolt.Tx, cutoff uint64, max int) []string {
	var ids []string
	c := tx.Bucket(bucketFailuresByOrg).Cursor()
	k, _ := c.First()
	for k != nil && len(ids) < max {
		if len(k) != failTimeKeyLen {
			k, _ = c.Next()
			continue
		}
		if failKeyArrival(k) < cutoff {
			ids = append(ids, failKeyID(k))
			k, _ = c.Next()
			continue
		}
		// The rest of this organization is newer: on to the next one.
		next := prefixEnd(k[:idLen])
		if next == nil {
			break
		}
		k, _ = c.Seek(next)
	}
	return ids
}

// deleteDomainFailures removes the failure reports of a deleted domain
// with their roll-ups. It runs inside DeleteDomain.
func deleteDomainFailures(tx *bolt.Tx, domainID string) error {
	prefix := []byte(domainID)
	var ids []string
	c := tx.Bucket(bucketFailuresByDomain).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		if len(k) == failTimeKeyLen {
			ids = append(ids, failKeyID(k))
		}
	}
	orgID := ""
	if len(ids) > 0 {
		if det, err := getFailure(tx, ids[0], false); err == nil {
			orgID = det.OrgID
		}
	}
	rolls := failDays{}
	for _, id := range ids {
		if err := deleteFailure(tx, id, rolls); err != nil {
			return err
		}
	}
	if err := rolls.put(tx); err != nil {
		return err
	}
	if _, err := deletePrefix(tx.Bucket(bucketFailuresByDomain), prefix, -1); err != nil {
		return err
	}
	if _, err := deletePrefix(tx.Bucket(bucketFailureDedup), prefix, -1); err != nil {
		return err
	}
	if orgID == "" {
		return nil
	}
	return deleteDomainFailureDays(tx, orgID, domainID)
}

// deleteDomainFailureDays removes whatever roll-ups of the domain are left
// (none, unless they had drifted from the reports).
func deleteDomainFailureDays(tx *bolt.Tx, orgID, domainID string) error {
	b := tx.Bucket(bucketFailureRollups)
	prefix := orgPrefix(orgID)
	var keys [][]byte
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		if len(k) == failRollupKeyLen && failRollupDomain(k) == domainID {
			keys = append(keys, bytes.Clone(k))
		}
	}
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}
