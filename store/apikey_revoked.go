package store

import (
	"crypto/sha256"
	"crypto/subtle"

	bolt "go.etcd.io/bbolt"
)

// RevokedAPIKey returns the key whose secret this is when that key was
// revoked, and ErrNotFound for any other secret (active, unknown or
// malformed). Authenticate answers a revoked key like an unknown one; the
// HTTP layer asks this only after a failed authentication, to count a
// client that still sends a revoked key apart from one guessing keys.
func (db *DB) RevokedAPIKey(secret string) (*APIKey, error) {
	if !ValidKeyFormat(secret) {
		return nil, errInvalidKey()
	}
	sum := sha256.Sum256([]byte(secret))
	var key *keyRecord
	err := db.bolt.View(func(tx *bolt.Tx) error {
		id := tx.Bucket(bucketKeysByHash).Get(sum[:])
		if id == nil {
			return errInvalidKey()
		}
		var err error
		if key, err = getKey(tx, string(id)); err != nil {
			return notFoundAs(err, errInvalidKey())
		}
		if subtle.ConstantTimeCompare(key.Hash, sum[:]) != 1 || key.RevokedAt == nil {
			return errInvalidKey()
		}
		return nil
	})
	if err != nil {
		return nil, wrap("revoked API key", err)
	}
	return key.apiKey(), nil
}
