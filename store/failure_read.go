package store

import (
	"bytes"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store/internal/reports"
)

// FailureFilter selects failure reports for ListFailureReports. DateFrom
// and DateTo bound the arrival date (both included); SourceIP is an exact
// IP in canonical form (as netip.Addr.String gives it); AuthFailure is
// "dmarc", "spf" or "dkim".
type FailureFilter struct {
	DomainID         string
	DateFrom, DateTo *time.Time
	SourceIP         string
	AuthFailure      string
	Page             Page
	// After, when set, is a previous page's Next: the listing resumes
	// after that report, in the same order, and Page.Page is ignored.
	After []byte
}

func errFailureNotFound() error { return errorf(ErrNotFound, "forensic report not found") }

// ListFailureReports returns one page of the failure reports of
// organization orgID that pass f, newest arrival date first (ties: newest
// stored first), and how many pass in all. The filters are read from the
// index, never from the reports. Errors: ErrNotFound when f.DomainID is not
// a domain of the organization, ErrInvalid for a page or limit below 1 or
// an unknown f.AuthFailure.
func (db *DB) ListFailureReports(orgID string, f FailureFilter) ([]*FailureReport, int, error) {
	p, err := db.ListFailureReportsPage(orgID, f)
	if err != nil {
		return nil, 0, err
	}
	return p.Reports, p.Total, nil
}

// FailureReportPage is one page of a failure report listing.
type FailureReportPage struct {
	Reports []*FailureReport
	// Total is how many reports pass the filter, on every page.
	Total int
	// Next resumes the listing after the page's last report (pass it as
	// FailureFilter.After); nil when nothing follows.
	Next []byte
}

// ListFailureReportsPage is ListFailureReports with the position of the
// next page. An After that is no position is ErrInvalid.
func (db *DB) ListFailureReportsPage(orgID string, f FailureFilter) (*FailureReportPage, error) {
	skip, err := f.Page.offset()
	if f.After != nil {
		skip, err = 0, f.Page.offset1()
		if err == nil && len(f.After) != failTimeKeyLen-idLen {
			err = errorf(ErrInvalid, "invalid cursor")
		}
	}
	if err != nil {
		return nil, err
	}
	var mask byte
	if f.AuthFailure != "" {
		if mask = reports.FailureCheckBit(f.AuthFailure); mask == 0 {
			return nil, errorf(ErrInvalid, "the failed check must be dmarc, spf or dkim")
		}
	}
	page := &FailureReportPage{Reports: []*FailureReport{}}
	err = db.bolt.View(func(tx *bolt.Tx) error {
		owner, bucket := orgID, bucketFailuresByOrg
		if f.DomainID != "" {
			if _, err := getOrgDomain(tx, orgID, f.DomainID); err != nil {
				return err
			}
			owner, bucket = f.DomainID, bucketFailuresByDomain
		}
		var ids []string
		page.Total, ids, page.Next = scanFailures(tx.Bucket(bucket), owner, f, mask, skip, f.Page.Limit)
		for _, id := range ids {
			det, err := getFailure(tx, id, false)
			if err != nil {
				return err
			}
			page.Reports = append(page.Reports, det.FailureReport)
		}
		return nil
	})
	if err != nil {
		return nil, wrap("list failure reports", err)
	}
	return page, nil
}

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

// FindFailureReport returns failure report id of organization orgID with
// its headers. ErrNotFound also when it belongs to another organization or
// id is malformed.
func (db *DB) FindFailureReport(orgID, id string) (*FailureReportDetail, error) {
	var det *FailureReportDetail
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		if det, err = getFailure(tx, id, true); err != nil {
			return err
		}
		if det.OrgID != orgID {
			det = nil
			return errFailureNotFound()
		}
		return nil
	})
	if err != nil {
		return nil, wrap("find failure report", err)
	}
	return det, nil
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
