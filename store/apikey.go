package store

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Scope is what an API key may do.
type Scope string

// The key scopes.
const (
	// ScopeFull allows every request.
	ScopeFull Scope = "full"
	// ScopeRead allows requests that change nothing.
	ScopeRead Scope = "read"
)

// ParseScope returns the scope named s (case-insensitive, surrounding space
// ignored). An unknown name is an ErrInvalid *Error listing the valid scopes.
func ParseScope(s string) (Scope, error) {
	switch sc := Scope(strings.ToLower(strings.TrimSpace(s))); sc {
	case ScopeFull, ScopeRead:
		return sc, nil
	}
	return "", errorf(ErrInvalid, "invalid scope %q: valid scopes are full, read", s)
}

// MaxActiveKeys is how many unrevoked keys an organization may hold.
const MaxActiveKeys = 5

// KeyPrefix starts every API key. A key is KeyPrefix and 32 lowercase hex
// digits, 36 characters in all.
const KeyPrefix = "dmk_"

const (
	keyHexLen       = 32
	keyLen          = len(KeyPrefix) + keyHexLen
	keyDisplayedLen = 8 // characters of a key kept for display
)

// ValidKeyFormat reports whether s has the form of an API key.
func ValidKeyFormat(s string) bool {
	if len(s) != keyLen || !strings.HasPrefix(s, KeyPrefix) {
		return false
	}
	for i := len(KeyPrefix); i < len(s); i++ {
		if !isLowerHex(s[i]) {
			return false
		}
	}
	return true
}

// APIKey describes a key. The secret is never stored, only its SHA-256 hash,
// which this type does not carry.
type APIKey struct {
	ID    string `json:"id"`
	OrgID string `json:"organization_id"`
	Name  string `json:"name"`
	// Prefix is the first 8 characters of the key, e.g. "dmk_1a2b".
	Prefix     string     `json:"prefix"`
	Scope      Scope      `json:"scope"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	RevokedAt  *time.Time `json:"revoked_at"`
}

// Active reports whether the key has not been revoked.
func (k *APIKey) Active() bool { return k.RevokedAt == nil }

// keyRecord is how a key is stored.
type keyRecord struct {
	ID         string     `json:"id"`
	OrgID      string     `json:"org_id"`
	Name       string     `json:"name"`
	Prefix     string     `json:"prefix"`
	Scope      Scope      `json:"scope"`
	Hash       []byte     `json:"sha256"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
}

// CreateAPIKey creates a key for organization orgID and returns it with its
// secret, which is shown once and never stored. Errors: ErrNotFound for an
// unknown organization; ErrInvalid for a name that is empty or over
// MaxKeyNameLen characters, or a bad scope; ErrLimit when MaxActiveKeys are
// active. The CLI, the REST API and the web interface all create keys here.
func (db *DB) CreateAPIKey(orgID, name string, scope Scope) (key *APIKey, secret string, err error) {
	if name, err = cleanNameLen("API key name", name, MaxKeyNameLen); err != nil {
		return nil, "", err
	}
	if scope, err = ParseScope(string(scope)); err != nil {
		return nil, "", err
	}
	secret = newKeySecret()
	sum := sha256.Sum256([]byte(secret))
	rec := &keyRecord{
		ID: NewID(), OrgID: orgID, Name: name, Prefix: secret[:keyDisplayedLen],
		Scope: scope, Hash: sum[:], CreatedAt: db.now(),
	}
	err = db.updateAuth(func(tx *bolt.Tx) error {
		if _, err := getOrg(tx, orgID); err != nil {
			return err
		}
		active, err := countActiveKeys(tx, orgID)
		if err != nil {
			return err
		}
		if active >= MaxActiveKeys {
			return errorf(ErrLimit, "limit of %d active API keys reached: revoke one first", MaxActiveKeys)
		}
		hashes := tx.Bucket(bucketKeysByHash)
		if hashes.Get(rec.Hash) != nil {
			return fmt.Errorf("key hash collision") // 2^-128: a broken random source
		}
		if err := putKey(tx, rec); err != nil {
			return err
		}
		if err := hashes.Put(rec.Hash, idKey(rec.ID)); err != nil {
			return err
		}
		return tx.Bucket(bucketKeysByOrg).Put(orgTimeIDKey(orgID, rec.CreatedAt, rec.ID), nil)
	})
	if err != nil {
		return nil, "", wrap("create API key", err)
	}
	return rec.apiKey(), secret, nil
}

// newKeySecret returns KeyPrefix and 128 random bits in hex.
func newKeySecret() string {
	var b [keyHexLen / 2]byte
	_, _ = rand.Read(b[:])
	return KeyPrefix + hex.EncodeToString(b[:])
}

// ListAPIKeys returns the keys of organization orgID in creation order,
// revoked ones included. ErrNotFound for an unknown organization.
func (db *DB) ListAPIKeys(orgID string) ([]*APIKey, error) {
	keys := []*APIKey{}
	err := db.bolt.View(func(tx *bolt.Tx) error {
		if _, err := getOrg(tx, orgID); err != nil {
			return err
		}
		return forEachOrgKey(tx, orgID, func(rec *keyRecord) error {
			keys = append(keys, rec.apiKey())
			return nil
		})
	})
	if err != nil {
		return nil, wrap("list API keys", err)
	}
	return keys, nil
}

// ListAPIKeysPage returns one page of organization orgID's keys as API.md
// lists them: active keys first, then revoked ones, each newest first; and
// how many keys there are in all. ErrNotFound for an unknown organization.
func (db *DB) ListAPIKeysPage(orgID string, p Page) ([]*APIKey, int, error) {
	skip, err := p.offset()
	if err != nil {
		return nil, 0, err
	}
	all, err := db.ListAPIKeys(orgID)
	if err != nil {
		return nil, 0, err
	}
	slices.Reverse(all) // newest first; the sort below is stable
	slices.SortStableFunc(all, func(a, b *APIKey) int {
		switch {
		case a.Active() == b.Active():
			return 0
		case a.Active():
			return -1
		}
		return 1
	})
	lo := min(skip, len(all))
	hi := lo + min(p.Limit, len(all)-lo)
	return all[lo:hi], len(all), nil
}

// RevokeAPIKey revokes key id for good and returns it; revoking a revoked key
// returns it unchanged. ErrNotFound for an unknown key. The web sessions
// opened with the key end in the same transaction.
func (db *DB) RevokeAPIKey(id string) (*APIKey, error) {
	return db.revokeAPIKey("", id)
}

// RevokeOrgAPIKey is RevokeAPIKey for a key of organization orgID: another
// organization's key is ErrNotFound, as an unknown one is.
func (db *DB) RevokeOrgAPIKey(orgID, id string) (*APIKey, error) {
	if orgID == "" {
		return nil, wrap("revoke API key", errKeyNotFound())
	}
	return db.revokeAPIKey(orgID, id)
}

// revokeAPIKey revokes id, checking its organization unless orgID is "".
func (db *DB) revokeAPIKey(orgID, id string) (*APIKey, error) {
	var rec *keyRecord
	err := db.updateAuth(func(tx *bolt.Tx) error {
		r, err := getKey(tx, id)
		if err != nil {
			return err
		}
		if orgID != "" && r.OrgID != orgID {
			return errKeyNotFound()
		}
		rec = r
		// Sessions first, also for a revoked key: nothing may outlive it.
		if err := deleteKeySessions(tx, r.ID); err != nil {
			return err
		}
		if r.RevokedAt != nil {
			return nil
		}
		r.RevokedAt = new(db.now())
		return putKey(tx, r)
	})
	if err != nil {
		return nil, wrap("revoke API key", err)
	}
	return rec.apiKey(), nil
}

func errInvalidKey() error { return errorf(ErrNotFound, "invalid API key") }

// Authenticate returns the active key whose secret this is and its
// organization. A malformed, unknown or revoked key is ErrNotFound with the
// one message "invalid API key", so that callers cannot tell them apart. It
// runs on every request: answers come from a cache that every key and
// organization write invalidates, else from one read transaction.
func (db *DB) Authenticate(secret string) (*APIKey, *Organization, error) {
	if !ValidKeyFormat(secret) {
		return nil, nil, errInvalidKey()
	}
	sum := sha256.Sum256([]byte(secret))
	if k, o, ok := db.auth.get(sum); ok {
		return k, o, nil
	}
	gen := db.auth.gen.Load() // before the read: see authCache
	var key *keyRecord
	var org *orgRecord
	err := db.bolt.View(func(tx *bolt.Tx) error {
		id := tx.Bucket(bucketKeysByHash).Get(sum[:])
		if id == nil {
			return errInvalidKey()
		}
		var err error
		if key, err = getKey(tx, string(id)); err != nil {
			return notFoundAs(err, errInvalidKey())
		}
		// The index found it already; comparing the stored hash as well
		// guards against a stale index, in constant time.
		if subtle.ConstantTimeCompare(key.Hash, sum[:]) != 1 || key.RevokedAt != nil {
			return errInvalidKey()
		}
		org, err = getOrg(tx, key.OrgID)
		return notFoundAs(err, errInvalidKey())
	})
	if err != nil {
		return nil, nil, wrap("authenticate", err)
	}
	k, o := key.apiKey(), org.organization()
	db.auth.put(sum, gen, k, o)
	return k, o, nil
}

// notFoundAs replaces an ErrNotFound error with repl; other errors pass.
func notFoundAs(err, repl error) error {
	if err != nil && isKind(err, ErrNotFound) {
		return repl
	}
	return err
}

// TouchAPIKeys records when keys were last used, in one write transaction:
// used maps key ids to times. A time replaces the stored one only when later;
// unknown ids are ignored. The HTTP layer collects uses and flushes them
// now and then, so that Authenticate never writes.
func (db *DB) TouchAPIKeys(used map[string]time.Time) error {
	if len(used) == 0 {
		return nil
	}
	err := db.updateAuth(func(tx *bolt.Tx) error {
		// Sorted ids write the bucket in key order.
		for _, id := range slices.Sorted(maps.Keys(used)) {
			if err := touchKey(tx, id, used[id].UTC().Truncate(time.Second)); err != nil {
				return err
			}
		}
		return nil
	})
	return wrap("touch API keys", err)
}

func touchKey(tx *bolt.Tx, id string, at time.Time) error {
	rec, err := getKey(tx, id)
	if isKind(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if rec.LastUsedAt != nil && !at.After(*rec.LastUsedAt) {
		return nil
	}
	rec.LastUsedAt = &at
	return putKey(tx, rec)
}

func errKeyNotFound() error { return errorf(ErrNotFound, "API key not found") }

// getKey reads key id; ErrNotFound when it is absent or id malformed.
func getKey(tx *bolt.Tx, id string) (*keyRecord, error) {
	if !ValidID(id) {
		return nil, errKeyNotFound()
	}
	raw := tx.Bucket(bucketKeys).Get(idKey(id))
	if raw == nil {
		return nil, errKeyNotFound()
	}
	rec := new(keyRecord)
	if err := json.Unmarshal(raw, rec); err != nil {
		return nil, fmt.Errorf("decode API key %s: %w", id, err)
	}
	return rec, nil
}

func putKey(tx *bolt.Tx, rec *keyRecord) error {
	raw, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode API key %s: %w", rec.ID, err)
	}
	return tx.Bucket(bucketKeys).Put(idKey(rec.ID), raw)
}

// forEachOrgKey calls fn for the keys of orgID in creation order.
func forEachOrgKey(tx *bolt.Tx, orgID string, fn func(*keyRecord) error) error {
	prefix := orgPrefix(orgID)
	c := tx.Bucket(bucketKeysByOrg).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		rec, err := getKey(tx, idFromOrgTimeIDKey(k))
		if err != nil {
			return err
		}
		if err := fn(rec); err != nil {
			return err
		}
	}
	return nil
}

func countActiveKeys(tx *bolt.Tx, orgID string) (int, error) {
	n := 0
	err := forEachOrgKey(tx, orgID, func(rec *keyRecord) error {
		if rec.RevokedAt == nil {
			n++
		}
		return nil
	})
	return n, err
}

func (rec *keyRecord) apiKey() *APIKey {
	return &APIKey{
		ID: rec.ID, OrgID: rec.OrgID, Name: rec.Name, Prefix: rec.Prefix, Scope: rec.Scope,
		CreatedAt: rec.CreatedAt, LastUsedAt: rec.LastUsedAt, RevokedAt: rec.RevokedAt,
	}
}

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
