package store

import (
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
)

// authCache keeps the answers of Authenticate for valid keys, so that the
// request path usually skips the read transaction and JSON decoding. Keys
// and organizations change rarely, and only through this process (bbolt's
// file lock), so one generation number guards the whole cache: every write
// to keys or organizations bumps it before and after its transaction
// (updateAuth), and an entry is used only while the generation it was read
// under is current. A revocation therefore takes effect before
// RevokeAPIKey returns. Unknown keys are never cached, so guessing cannot
// grow the map.
type authCache struct {
	gen atomic.Uint64
	mu  sync.RWMutex
	m   map[[32]byte]authEntry
}

type authEntry struct {
	gen uint64
	key APIKey
	org Organization
}

// maxAuthEntries bounds the map; far above 5 active keys per organization
// times any realistic number of organizations.
const maxAuthEntries = 100_000

func (c *authCache) get(sum [32]byte) (*APIKey, *Organization, bool) {
	c.mu.RLock()
	e, ok := c.m[sum]
	c.mu.RUnlock()
	if !ok || e.gen != c.gen.Load() {
		return nil, nil, false
	}
	key, org := e.key, e.org
	return &key, &org, true
}

func (c *authCache) put(sum [32]byte, gen uint64, key *APIKey, org *Organization) {
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxAuthEntries {
		c.m = make(map[[32]byte]authEntry)
	}
	c.m[sum] = authEntry{gen: gen, key: *key, org: *org}
	c.mu.Unlock()
}

// updateAuth runs a write transaction that may change keys or
// organizations, invalidating the cache around it.
func (db *DB) updateAuth(fn func(tx *bolt.Tx) error) error {
	db.auth.gen.Add(1)
	defer db.auth.gen.Add(1)
	return db.bolt.Update(fn)
}
