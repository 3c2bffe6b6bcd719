package httpapi

import "sync"

// pageCache keeps encoded list pages of an organization for as long as the
// store's version of the data they were built from is current. Listing is
// by far the most frequent call and its data changes rarely, so most
// requests skip the store read and the JSON encoding.
type pageCache struct {
	mu  sync.RWMutex
	max int
	m   map[pageKey]pageEntry
}

type pageKey struct {
	org         string
	page, limit int
}

type pageEntry struct {
	version uint64
	body    []byte
}

func newPageCache(max int) *pageCache {
	return &pageCache{max: max, m: map[pageKey]pageEntry{}}
}

// get returns the body cached for k if it was built at version.
func (c *pageCache) get(k pageKey, version uint64) ([]byte, bool) {
	c.mu.RLock()
	e, ok := c.m[k]
	c.mu.RUnlock()
	if !ok || e.version != version {
		return nil, false
	}
	return e.body, true
}

// put caches body, built from data read at version. When full, the cache
// starts over: simpler than LRU bookkeeping, and it refills on demand.
func (c *pageCache) put(k pageKey, version uint64, body []byte) {
	c.mu.Lock()
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[k] = pageEntry{version: version, body: body}
	c.mu.Unlock()
}
