package store

import (
	"crypto/sha256"
	"encoding/json"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// ResolveAPIKey returns the id of the key ref names: its id (any case), the
// whole key, or its 8-character prefix as 'keys list' shows it ("dmk_1a2b",
// a trailing "…" ignored) when exactly one key has that prefix. Errors:
// ErrNotFound when nothing matches, ErrConflict when the prefix is shared
// (the message says to give the id), ErrInvalid for anything else.
func (db *DB) ResolveAPIKey(ref string) (string, error) {
	ref = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(ref), "…"), "...")
	if id := strings.ToLower(ref); ValidID(id) {
		return id, nil
	}
	var id string
	err := db.bolt.View(func(tx *bolt.Tx) error {
		if ValidKeyFormat(ref) {
			sum := sha256.Sum256([]byte(ref))
			v := tx.Bucket(bucketKeysByHash).Get(sum[:])
			if v == nil {
				return errKeyNotFound()
			}
			id = string(v)
			return nil
		}
		prefix := strings.ToLower(ref)
		if len(prefix) != keyDisplayedLen || !strings.HasPrefix(prefix, KeyPrefix) {
			return errorf(ErrInvalid, "%q is no key id, key or key prefix: give the id or the 8-character prefix (dmk_....) that 'dmarcd keys list' shows", ref)
		}
		var matches []string
		err := tx.Bucket(bucketKeys).ForEach(func(k, v []byte) error {
			var rec keyRecord
			if err := json.Unmarshal(v, &rec); err != nil {
				return err
			}
			if rec.Prefix == prefix {
				matches = append(matches, rec.ID)
			}
			return nil
		})
		switch {
		case err != nil:
			return err
		case len(matches) == 0:
			return errorf(ErrNotFound, "no API key has the prefix %s", prefix)
		case len(matches) > 1:
			return errorf(ErrConflict, "%d API keys have the prefix %s: give the key id (dmarcd keys list --org ORG)", len(matches), prefix)
		}
		id = matches[0]
		return nil
	})
	if err != nil {
		return "", wrap("resolve API key", err)
	}
	return id, nil
}
