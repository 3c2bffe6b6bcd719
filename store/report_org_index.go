package store

import (
	"bytes"
	"encoding/binary"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The organization-level date index of aggregate reports, so that the
// listing of a whole organization (newest first, page 1 with a total) is one
// backwards range scan instead of a merge of every domain's index, and its
// total is one read instead of a count of every report.
//
// bucketReportsByOrg: orgReportKey(org id, domain index key) -> date_end
// (big-endian Unix seconds; before schema 10 the whole value of the domain
// index, report id | date_end): the report id is read from the domain
// index for the reports of a page, so the entry does not carry it twice. The key is org id | date_begin |
// identity hash | domain id: the domain index key's position first, so both
// indexes list in the same order, and the domain id last, so that two
// domains' reports with the same reporter, report id and date_begin stay two
// entries. bucketReportCounts: org id -> how many entries the organization
// has in bucketReportsByOrg (uint64, big-endian).
//
// Both are kept in the transactions that change the domain index: ingest
// (storeDraft), retention (hideOldReports) and domain deletion (a cascade of
// DeleteDomain); migration 2 -> 3 builds them for existing files.

// orgPositionLen is the length of a position (and cursor) in the
// organization index: date_begin | identity hash | domain id.
const orgPositionLen = reportKeyLen - idLen + idLen

// orgReportKey is the organization index key of the report whose domain
// index key is domainKey (reportKey: domain id | date_begin | hash).
func orgReportKey(orgID string, domainKey []byte) []byte {
	k := make([]byte, 0, idLen+orgPositionLen)
	k = append(k, orgID...)
	k = append(k, domainKey[idLen:]...)
	return append(k, domainKey[:idLen]...)
}

// indexOrgReport adds a report stored under domainKey in the domain index,
// with value v, to its organization's index and count. Storing the same key
// again does not count it twice.
func indexOrgReport(tx *bolt.Tx, orgID string, domainKey, v []byte) error {
	fresh, err := putOrgReport(tx, orgID, domainKey, v, false)
	if err != nil || !fresh {
		return err
	}
	return addOrgReportCount(tx, orgID, 1)
}

// putOrgReport is indexOrgReport without the count: it reports whether the
// report was new to the index, so that the ingest commit adds each
// organization's new reports to its count once, not once a report. With
// isNew the caller knows it is (the date index, kept in the same
// transactions, has no entry under domainKey): the lookup is spared, a
// B-tree search per report in the single writer.
func putOrgReport(tx *bolt.Tx, orgID string, domainKey, v []byte, isNew bool) (fresh bool, err error) {
	if len(domainKey) != reportKeyLen {
		return false, errorf(ErrInvalid, "malformed report index key")
	}
	b := tx.Bucket(bucketReportsByOrg)
	b.FillPercent = 0.9 // keys grow with date_begin within each domain, as bucketReportsByDomain's
	k := orgReportKey(orgID, domainKey)
	fresh = isNew || b.Get(k) == nil
	return fresh, b.Put(k, orgIndexValue(v))
}

// orgIndexValue is the organization index value for the date index value
// v: its date_end.
func orgIndexValue(v []byte) []byte {
	if len(v) < 8 {
		return nil
	}
	return v[len(v)-8:]
}

// orgIndexedID returns the report id of the organization index entry k,
// v: from v when it holds it (files of schema 9 and before), else from
// the domain index entry the key names.
func orgIndexedID(tx *bolt.Tx, k, v []byte) string {
	if id := indexedID(v); id != "" {
		return id
	}
	if len(k) != idLen+orgPositionLen {
		return ""
	}
	pos := k[idLen:]
	dk := make([]byte, 0, reportKeyLen)
	dk = append(dk, pos[reportKeyLen-idLen:]...)
	dk = append(dk, pos[:reportKeyLen-idLen]...)
	return indexedID(tx.Bucket(bucketReportsByDomain).Get(dk))
}

// unindexOrgReport removes the report stored under domainKey from its
// organization's index and count, if it is there.
func unindexOrgReport(tx *bolt.Tx, orgID string, domainKey []byte) error {
	if len(domainKey) != reportKeyLen {
		return nil
	}
	b := tx.Bucket(bucketReportsByOrg)
	k := orgReportKey(orgID, domainKey)
	if b.Get(k) == nil {
		return nil
	}
	if err := b.Delete(k); err != nil {
		return err
	}
	return addOrgReportCount(tx, orgID, -1)
}

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

// orgReportCount is how many reports the organization has in its index.
func orgReportCount(tx *bolt.Tx, orgID string) int {
	v := tx.Bucket(bucketReportCounts).Get([]byte(orgID))
	if len(v) != 8 {
		return 0
	}
	return int(binary.BigEndian.Uint64(v))
}

// deleteDomainOrgReports removes the reports of a domain from its
// organization's index and count. It is a cascade of DeleteDomain and runs
// before deleteDomainReports, while the domain index still lists them.
func deleteDomainOrgReports(tx *bolt.Tx, orgID, domainID string) error {
	prefix := []byte(domainID)
	var keys [][]byte
	c := tx.Bucket(bucketReportsByDomain).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, bytes.Clone(k))
	}
	for _, k := range keys {
		if err := unindexOrgReport(tx, orgID, k); err != nil {
			return err
		}
	}
	return nil
}

// scanOrgReports is scanReports over a whole organization by its index:
// newest first, the filters applied as scanReports does. Without a date
// filter the total is the stored count and the scan stops after the page.
// after is a position of this index (orgPositionLen bytes) or of a domain
// index (shorter: it compares as a prefix), or nil.
func scanOrgReports(tx *bolt.Tx, orgID string, f ReportFilter, skip, limit int) (int, []string, []byte) {
	prefix := orgPrefix(orgID)
	var from []byte
	if f.DateFrom != nil {
		from = binary.BigEndian.AppendUint64(nil, unixKey(*f.DateFrom))
	}
	counted := f.DateFrom == nil && f.DateTo == nil
	b := tx.Bucket(bucketReportsByOrg)
	c := b.Cursor()
	var k, v []byte
	if f.After != nil {
		// Start at the last key before the cursor's position.
		start := append(bytes.Clone(prefix), f.After...)
		if k, v = c.Seek(start); k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
	} else if end := prefixEnd(prefix); end == nil {
		k, v = c.Last()
	} else if k, v = c.Seek(end); k == nil {
		k, v = c.Last()
	} else {
		k, v = c.Prev()
	}
	total, seen := 0, 0
	var ids []string
	var last, next []byte
	for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Prev() {
		if len(k) != idLen+orgPositionLen {
			continue
		}
		pos := k[idLen:]
		if from != nil && bytes.Compare(pos[:8], from) < 0 {
			break
		}
		if f.DateTo != nil && time.Unix(int64(indexedEnd(v)), 0).After(*f.DateTo) {
			continue
		}
		switch {
		case seen >= skip && len(ids) < limit:
			ids = append(ids, orgIndexedID(tx, k, v))
			last = pos
		case len(ids) == limit && next == nil:
			next = bytes.Clone(last)
		}
		seen++
		total++
		if counted && next != nil {
			break
		}
	}
	if counted {
		return orgReportCount(tx, orgID), ids, next
	}
	if f.After != nil {
		// The total counts every report that passes the filter, those
		// before the cursor too: count them.
		total += countOrgReportsFrom(tx, orgID, f)
	}
	return total, ids, next
}

// countOrgReportsFrom counts the reports of the organization at or after
// (newer than or at) position f.After that pass f's date filters.
func countOrgReportsFrom(tx *bolt.Tx, orgID string, f ReportFilter) int {
	prefix := orgPrefix(orgID)
	var from []byte
	if f.DateFrom != nil {
		from = binary.BigEndian.AppendUint64(nil, unixKey(*f.DateFrom))
	}
	n := 0
	c := tx.Bucket(bucketReportsByOrg).Cursor()
	for k, v := c.Seek(append(bytes.Clone(prefix), f.After...)); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if len(k) != idLen+orgPositionLen {
			continue
		}
		pos := k[idLen:]
		if bytes.Compare(pos, f.After) < 0 {
			continue
		}
		if from != nil && bytes.Compare(pos[:8], from) < 0 {
			continue
		}
		if f.DateTo != nil && time.Unix(int64(indexedEnd(v)), 0).After(*f.DateTo) {
			continue
		}
		n++
	}
	return n
}

// migrateOrgReportIndex is migration 2 -> 3: it builds the organization
// index and counts from the domain index, in Open's transaction. Entries of
// a domain that no longer exists are left out.
func migrateOrgReportIndex(tx *bolt.Tx) error {
	for _, name := range [][]byte{bucketReportsByOrg, bucketReportCounts} {
		if err := tx.DeleteBucket(name); err != nil {
			return err
		}
		if _, err := tx.CreateBucket(name); err != nil {
			return err
		}
	}
	owners := map[string]string{}
	byDomain := tx.Bucket(bucketReportsByDomain)
	var pending []struct{ org, key, v []byte }
	err := byDomain.ForEach(func(k, v []byte) error {
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
		if org == "" {
			return nil
		}
		pending = append(pending, struct{ org, key, v []byte }{[]byte(org), bytes.Clone(k), bytes.Clone(v)})
		return nil
	})
	if err != nil {
		return err
	}
	counts := map[string]int64{}
	b := tx.Bucket(bucketReportsByOrg)
	for _, p := range pending {
		if err := b.Put(orgReportKey(string(p.org), p.key), orgIndexValue(p.v)); err != nil {
			return err
		}
		counts[string(p.org)]++
	}
	for org, n := range counts {
		if err := addOrgReportCount(tx, org, n); err != nil {
			return err
		}
	}
	return nil
}
