package store

import (
	"bytes"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// maxLocalMatches bounds DomainsByReportingLocal: reporting addresses are
// unique random local parts, so more than one match is already an
// anomaly (an address kept from an earlier --reporting-domain).
const maxLocalMatches = 8

// DomainsByReportingLocal returns the domains whose reporting address has
// the local part local (case-insensitive), whatever its domain part: the
// HTTPS way in for TLS reports (/tlsrpt/<local part>) knows only that.
// At most a few are returned, in address order; none is no error.
func (db *DB) DomainsByReportingLocal(local string) ([]*Domain, error) {
	local = strings.TrimSpace(local)
	if local == "" || strings.ContainsAny(local, "@") {
		return nil, nil
	}
	prefix := emailKey(local + "@")
	var out []*Domain
	err := db.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketDomainsByEmail).Cursor()
		for k, id := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(out) < maxLocalMatches; k, id = c.Next() {
			rec, err := getDomain(tx, string(id))
			if err != nil {
				return err
			}
			out = append(out, rec.domain())
		}
		return nil
	})
	if err != nil {
		return nil, wrap("find domains by reporting local part", err)
	}
	return out, nil
}
