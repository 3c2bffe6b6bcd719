package store

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"

	bolt "go.etcd.io/bbolt"
)

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
