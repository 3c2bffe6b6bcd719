package store

import (
	"sync"
	"sync/atomic"
)

// versions counts, in memory, the changes made by this process to each
// organization's domains. bbolt lets only one process open the file, so
// every write is seen here, and a reader can cache what it derived from
// the domains (an encoded page of the list, say) for as long as the
// version it read before deriving is still current.
type versions struct {
	m sync.Map // org id -> *atomic.Uint64
}

func (v *versions) counter(orgID string) *atomic.Uint64 {
	if c, ok := v.m.Load(orgID); ok {
		return c.(*atomic.Uint64)
	}
	c, _ := v.m.LoadOrStore(orgID, new(atomic.Uint64))
	return c.(*atomic.Uint64)
}

// changing runs the write fn between two bumps of the organization's
// version. The first bump makes caches filled before the write stale; the
// second makes stale anything filled while the transaction was in flight
// (a reader that started before the commit would have read the old data
// under the first bump's number).
func (v *versions) changing(orgID string, fn func() error) error {
	c := v.counter(orgID)
	c.Add(1)
	defer c.Add(1)
	return fn()
}
