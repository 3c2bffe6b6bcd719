package store

import (
	"encoding/binary"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The markers of queued digests: one per organization, recipient and
// period, written in the transaction that queues the digest's mail, so
// that a digest is queued exactly once whatever restarts in between.

// digestSentKey is org id | lower-cased recipient | 0x00 | period (as
// the digest package names it: "day 2026-11-28").
func digestSentKey(orgID, email, period string) []byte {
	k := make([]byte, 0, len(orgID)+len(email)+1+len(period))
	k = append(k, orgID...)
	k = append(k, strings.ToLower(email)...)
	k = append(k, 0)
	return append(k, period...)
}

// DigestQueued reports whether the digest of period for recipient email
// of organization orgID was queued.
func (db *DB) DigestQueued(orgID, email, period string) (bool, error) {
	var ok bool
	err := db.bolt.View(func(tx *bolt.Tx) error {
		ok = tx.Bucket(bucketDigestSent).Get(digestSentKey(orgID, email, period)) != nil
		return nil
	})
	return ok, wrap("digest queued", err)
}

// QueueDigest queues m, the digest of period for m.To in organization
// m.OrgID, unless one was queued for them before: the mail and the
// marker are written in one transaction. It returns the mail's status,
// or nil and no error when the digest was queued before. Errors as
// EnqueueMail.
func (db *DB) QueueDigest(period string, m *OutgoingMail) (*MailStatus, error) {
	var st *MailStatus
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketDigestSent)
		key := digestSentKey(m.OrgID, m.To, period)
		if b.Get(key) != nil {
			return nil
		}
		now := db.now()
		var err error
		if st, err = enqueueMail(tx, m, now); err != nil {
			return err
		}
		v := binary.BigEndian.AppendUint64(nil, uint64(now.Unix()))
		return b.Put(key, append(v, st.ID...))
	})
	if err != nil {
		return nil, wrap("queue digest", err)
	}
	return st, nil
}

// PruneDigestMarkers deletes the markers of digests queued before t
// (older than any period a digest job still sends) and returns how many.
func (db *DB) PruneDigestMarkers(t time.Time) (int, error) {
	var old [][]byte
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketDigestSent)
		err := b.ForEach(func(k, v []byte) error {
			if len(v) >= 8 && int64(binary.BigEndian.Uint64(v)) < t.Unix() {
				old = append(old, append([]byte(nil), k...))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range old { // not while iterating: a cursor skips after a delete
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	return len(old), wrap("prune digest markers", err)
}
