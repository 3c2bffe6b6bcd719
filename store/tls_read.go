package store

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TLSFilter selects TLS reports for ListTLSReports, as for aggregate
// reports: DateFrom keeps reports whose date_begin >= DateFrom, DateTo
// those whose date_end <= DateTo. Cursor, when set, is a NextCursor of an
// earlier page with the same filters, and replaces Page.Page.
type TLSFilter struct {
	DomainID         string
	DateFrom, DateTo *time.Time
	Page             Page
	Cursor           string
}

// TLSList is one page of TLS reports.
type TLSList struct {
	Reports []*TLSReport
	// Total is how many reports pass the filters, cursor aside.
	Total int
	// NextCursor continues after the last report of the page; "" on the
	// last page.
	NextCursor string
}

// ListTLSReports returns one page of the TLS reports of organization orgID
// that pass f, newest date_begin first (ties: newest stored first). The
// filters are read from the index, never from the reports. Errors:
// ErrNotFound when f.DomainID is not a domain of the organization,
// ErrInvalid for a page or limit below 1 or a malformed cursor.
func (db *DB) ListTLSReports(orgID string, f TLSFilter) (*TLSList, error) {
	if f.Cursor != "" {
		f.Page.Page = 1
	}
	skip, err := f.Page.offset()
	if err != nil {
		return nil, err
	}
	var after []byte
	if f.Cursor != "" {
		if after, err = decodeTLSCursor(f.Cursor); err != nil {
			return nil, err
		}
	}
	out := &TLSList{Reports: []*TLSReport{}}
	err = db.bolt.View(func(tx *bolt.Tx) error {
		owner, bucket := orgID, bucketTLSByOrg
		if f.DomainID != "" {
			if _, err := getOrgDomain(tx, orgID, f.DomainID); err != nil {
				return err
			}
			owner, bucket = f.DomainID, bucketTLSByDomain
		}
		var ids []string
		var last []byte
		out.Total, ids, last = scanTLS(tx.Bucket(bucket), owner, f, after, skip, f.Page.Limit)
		if last != nil {
			out.NextCursor = base64.RawURLEncoding.EncodeToString(last)
		}
		for _, id := range ids {
			d, err := getTLS(tx, id)
			if err != nil {
				return err
			}
			out.Reports = append(out.Reports, d.TLSReport)
		}
		return nil
	})
	if err != nil {
		return nil, wrap("list TLS reports", err)
	}
	return out, nil
}

// decodeTLSCursor checks a cursor: date_begin | report id, base64url.
func decodeTLSCursor(s string) ([]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 8+idLen || !ValidID(string(b[8:])) {
		return nil, errorf(ErrInvalid, "cursor is not one this listing returned")
	}
	return b, nil
}

// scanTLS walks owner's range of a date index newest first and returns how
// many entries pass the date filters, the ids of the page (after the
// cursor position when after is set, else after skip entries), and the
// cursor of the page's last entry when more follow it.
func scanTLS(b *bolt.Bucket, owner string, f TLSFilter, after []byte, skip, limit int) (int, []string, []byte) {
	lo := []byte(owner)
	if f.DateFrom != nil {
		lo = binary.BigEndian.AppendUint64([]byte(owner), unixKey(*f.DateFrom))
	}
	var maxEnd uint64
	if f.DateTo != nil {
		maxEnd = unixKey(*f.DateTo)
	}
	var cursorKey []byte
	if after != nil {
		cursorKey = append([]byte(owner), after...)
	}
	total := 0
	var ids []string
	var last []byte
	more := false
	c := b.Cursor()
	k, v := seekBefore(c, prefixEnd([]byte(owner)))
	for ; k != nil && bytes.HasPrefix(k, []byte(owner)) && bytes.Compare(k, lo) >= 0; k, v = c.Prev() {
		if len(k) != tlsTimeKeyLen || len(v) < 8 {
			continue
		}
		if f.DateTo != nil && binary.BigEndian.Uint64(v[len(v)-8:]) > maxEnd {
			continue
		}
		total++
		if cursorKey != nil && bytes.Compare(k, cursorKey) >= 0 {
			continue
		}
		if cursorKey == nil && total <= skip {
			continue
		}
		if len(ids) < limit {
			ids = append(ids, tlsKeyID(k))
			last = append(last[:0], k[idLen:]...)
		} else {
			more = true
		}
	}
	if !more {
		last = nil
	}
	return total, ids, last
}

// FindTLSReport returns TLS report id of organization orgID with its
// policies. ErrNotFound also when it belongs to another organization or id
// is malformed.
func (db *DB) FindTLSReport(orgID, id string) (*TLSReportDetail, error) {
	var d *TLSReportDetail
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		if d, err = getTLS(tx, id); err != nil {
			return err
		}
		if d.OrgID != orgID {
			d = nil
			return errTLSNotFound()
		}
		return nil
	})
	if err != nil {
		return nil, wrap("find TLS report", err)
	}
	return d, nil
}
