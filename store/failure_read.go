package store

import (
	"bytes"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store/internal/reports"
)

// scanFailures walks owner's range of an arrival index newest first within
// the date bounds and returns how many entries pass the filter and the ids
// of those on the page.
func scanFailures(b *bolt.Bucket, owner string, f FailureFilter, mask byte, skip, limit int) (int, []string, []byte) {
	lo := failTimePrefix(owner, time.Unix(0, 0))
	if f.DateFrom != nil {
		lo = failTimePrefix(owner, *f.DateFrom)
	}
	hi := prefixEnd([]byte(owner))
	if f.DateTo != nil {
		hi = failTimePrefix(owner, f.DateTo.Add(time.Second))
	}
	total, seen := 0, 0
	var ids []string
	var last, next []byte
	c := b.Cursor()
	k, v := seekBefore(c, hi)
	for ; k != nil && bytes.Compare(k, lo) >= 0; k, v = c.Prev() {
		if len(k) != failTimeKeyLen {
			continue
		}
		e, ok := decodeFailIndex(v)
		if !ok || e.mask&mask != mask || (f.SourceIP != "" && string(e.ip) != f.SourceIP) {
			continue
		}
		// The position of a report is its key without the owner: arrival |
		// report id, the same in the organization's and a domain's index.
		if pos := k[idLen:]; f.After == nil || bytes.Compare(pos, f.After) < 0 {
			switch {
			case seen >= skip && len(ids) < limit:
				ids = append(ids, failKeyID(k))
				last = pos
			case len(ids) == limit && next == nil:
				next = bytes.Clone(last)
			}
			seen++
		}
		total++
	}
	return total, ids, next
}

// seekBefore positions c on the last key below end (the last key of all
// when end is nil).
func seekBefore(c *bolt.Cursor, end []byte) ([]byte, []byte) {
	if end == nil {
		return c.Last()
	}
	if k, _ := c.Seek(end); k == nil {
		return c.Last()
	}
	return c.Prev()
}

// getFailure reads report id, with its headers when asked. ErrNotFound
// when absent or id malformed.
func getFailure(tx *bolt.Tx, id string, withHeaders bool) (*FailureReportDetail, error) {
	if !ValidID(id) {
		return nil, errFailureNotFound()
	}
	raw := tx.Bucket(bucketFailures).Get(idKey(id))
	if raw == nil {
		return nil, errFailureNotFound()
	}
	det, _, err := reports.DecodeFailure(id, raw)
	if err != nil || !withHeaders {
		return det, err
	}
	if hraw := tx.Bucket(bucketFailureHeaders).Get(idKey(id)); hraw != nil {
		if det.Headers, err = reports.DecodeFailureHeaders(id, hraw); err != nil {
			return nil, err
		}
	}
	return det, nil
}
