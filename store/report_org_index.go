package store

import (
	"bytes"
	"encoding/binary"
	"errors"

	bolt "go.etcd.io/bbolt"
)

// The organization listing of aggregate reports: newest first, page 1
// with a total. It merges the date indexes of the organization's domains
// (bucketReportsByDomain), newest date_begin first and, at equal
// positions, the greater domain id first; its total without a date filter
// is one read of bucketReportCounts (org id -> how many reports the
// organization has, uint64 big-endian), and the merge stops after the
// page. A position (and cursor) of this listing is date_begin | identity
// hash | domain id (orgPositionLen bytes), so that two domains' reports
// with the same reporter, report id and date_begin stay two entries.
//
// Schema 3 to 9 kept an organization index (bucketReportsByOrg) of the
// same keys in the same order; schema 10 dropped it, a third of what a
// small report cost on disk, for a merge of a few cursors per domain.
// The counts are kept in the transactions that change the date index:
// ingest (storeDraft), retention (hideOldReports) and domain deletion (a
// cascade of DeleteDomain).

// orgPositionLen is the length of a position (and cursor) in the
// organization listing: date_begin | identity hash | domain id.
const orgPositionLen = reportKeyLen - idLen + idLen

// addOrgReportCount adds delta to the report count of an organization,
// never below zero; a count of zero is not stored.
func addOrgReportCount(tx *bolt.Tx, orgID string, delta int64) error {
	b := tx.Bucket(bucketReportCounts)
	n := int64(orgReportCount(tx, orgID)) + delta
	if n <= 0 {
		return b.Delete([]byte(orgID))
	}
	return b.Put([]byte(orgID), binary.BigEndian.AppendUint64(nil, uint64(n)))
}

// orgReportCount is how many reports the organization has.
func orgReportCount(tx *bolt.Tx, orgID string) int {
	v := tx.Bucket(bucketReportCounts).Get([]byte(orgID))
	if len(v) != 8 {
		return 0
	}
	return int(binary.BigEndian.Uint64(v))
}

// deleteDomainOrgReports takes the reports of a domain off its
// organization's count. It is a cascade of DeleteDomain and runs before
// deleteDomainReports, while the date index still lists them.
func deleteDomainOrgReports(tx *bolt.Tx, orgID, domainID string) error {
	n := countPrefix(tx.Bucket(bucketReportsByDomain), []byte(domainID))
	return addOrgReportCount(tx, orgID, -int64(n))
}

// orgPosition is the organization listing position of a date index key.
func orgPosition(k []byte) []byte {
	pos := make([]byte, 0, orgPositionLen)
	pos = append(pos, k[idLen:]...)
	return append(pos, k[:idLen]...)
}

// scanOrgReports is scanReports over a whole organization: newest first,
// the filters applied as scanReports does. The page merges the domains'
// date indexes from the cursor (or the newest) and stops after it; the
// total is the stored count without a date filter, else each domain's
// reports that pass it, counted apart (a scan of its range, no merge).
// after is an organization position (orgPositionLen bytes) or nil.
func scanOrgReports(tx *bolt.Tx, orgID string, f ReportFilter, skip, limit int) (int, []string, []byte) {
	prefixes := orgDomainPrefixes(tx, orgID)
	ids, next := mergeReports(tx, prefixes, f, skip, limit, true)
	if f.DateFrom == nil && f.DateTo == nil {
		return orgReportCount(tx, orgID), ids, next
	}
	return countReports(tx, prefixes, f), ids, next
}

// orgDomainPrefixes returns the ids of the organization's domains, as
// the date index keys start with them; they are valid in tx.
func orgDomainPrefixes(tx *bolt.Tx, orgID string) [][]byte {
	var out [][]byte
	prefix := orgPrefix(orgID)
	c := tx.Bucket(bucketDomainsByOrg).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		if len(k) >= idLen {
			out = append(out, k[len(k)-idLen:])
		}
	}
	return out
}

// seekBeforeOrgPosition returns the newest key of the domain prefix that
// lists after the position pos, nil when none does: an organization
// position, or a domain listing's (without the domain id, which then
// lists after every key of that date_begin and identity).
func seekBeforeOrgPosition(c *bolt.Cursor, prefix, pos []byte) []byte {
	bound := make([]byte, 0, reportKeyLen)
	bound = append(bound, prefix...)
	bound = append(bound, pos[:reportKeyLen-idLen]...)
	k, _ := c.Seek(bound)
	switch {
	case k == nil:
		k, _ = c.Last()
	case bytes.Equal(k, bound) && bytes.Compare(prefix, pos[reportKeyLen-idLen:]) < 0:
		// The same position in a smaller domain lists after pos.
	default:
		k, _ = c.Prev()
	}
	if k == nil || !bytes.HasPrefix(k, prefix) {
		return nil
	}
	return k
}

// dropOrgReportIndex is migration 9 -> 10: the organization index goes
// (the listing merges the domains' date indexes); the counts stay.
func dropOrgReportIndex(tx *bolt.Tx) error {
	if err := tx.DeleteBucket(bucketReportsByOrg); err != nil && !errors.Is(err, bolt.ErrBucketNotFound) {
		return err
	}
	return nil
}

// migrateOrgReportIndex is migration 2 -> 3: it counts the reports of
// each organization from the domain index, in Open's transaction (schema
// 3 to 9 also built the organization index, which 9 -> 10 drops).
// Entries of a domain that no longer exists are left out.
func migrateOrgReportIndex(tx *bolt.Tx) error {
	if err := tx.DeleteBucket(bucketReportCounts); err != nil && !errors.Is(err, bolt.ErrBucketNotFound) {
		return err
	}
	if _, err := tx.CreateBucket(bucketReportCounts); err != nil {
		return err
	}
	owners := map[string]string{}
	counts := map[string]int64{}
	err := tx.Bucket(bucketReportsByDomain).ForEach(func(k, _ []byte) error {
		if len(k) != reportKeyLen {
			return nil
		}
		dom := string(k[:idLen])
		org, ok := owners[dom]
		if !ok {
			rec, err := getDomain(tx, dom)
			if err != nil && !isKind(err, ErrNotFound) {
				return err
			}
			if err == nil {
				org = rec.OrgID
			}
			owners[dom] = org
		}
		if org != "" {
			counts[org]++
		}
		return nil
	})
	if err != nil {
		return err
	}
	for org, n := range counts {
		if err := addOrgReportCount(tx, org, n); err != nil {
			return err
		}
	}
	return nil
}
