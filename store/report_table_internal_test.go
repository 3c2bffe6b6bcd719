package store

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/dmarcd/dmarcd/store/internal/block"
)

// TestTableCacheConcurrent ensures the report table cache answers every
// value right under concurrent lookups and loads of more tables than it
// holds, stays within its bound, and tells a table replaced under the same
// reference by its tag.
func TestTableCacheConcurrent(t *testing.T) {
	const tables, perTable, valLen = 40, 64, 16 << 10 // 1 MB a table: the cache holds 16
	type stored struct {
		ref []byte
		raw []byte
		ids [][16]byte
	}
	// A value of its own for each report (the cache's bound counts the
	// decompressed bytes, so compressible ones serve).
	val := func(id [16]byte) []byte { return bytes.Repeat(id[:], valLen/16) }
	all := make([]stored, tables)
	for i := range all {
		var entries []block.TableEntry
		for j := range perTable {
			var id [16]byte
			binary.BigEndian.PutUint64(id[:8], uint64(i))
			binary.BigEndian.PutUint64(id[8:], uint64(j))
			entries = append(entries, block.TableEntry{ID: id, Val: val(id)})
		}
		raw, err := block.EncodeTable(nil, entries)
		if err != nil {
			t.Fatal(err)
		}
		ref := binary.BigEndian.AppendUint64(nil, uint64(i%(tables/2))) // two tables per reference
		s := stored{ref: ref, raw: raw}
		for _, e := range entries {
			s.ids = append(s.ids, e.ID)
		}
		all[i] = s
	}
	var c tableCache
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 7))
			for range 400 {
				s := all[r.IntN(tables)]
				id := s.ids[r.IntN(perTable)]
				got, ok := c.lookup(s.ref, id)
				if !ok {
					tab, err := c.load(s.ref, s.raw)
					if err != nil {
						t.Error(err)
						return
					}
					if got, ok = tab.Get(id); !ok {
						t.Errorf("report %x not in its table", id)
						return
					}
				}
				if !bytes.Equal(got, val(id)) {
					t.Errorf("report %x: wrong value", id)
					return
				}
			}
		})
	}
	wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bytes > tableCacheBytes || len(c.byRef) == 0 {
		t.Fatalf("cache holds %d bytes in %d tables; bound %d", c.bytes, len(c.byRef), tableCacheBytes)
	}
	sum := 0
	for _, ct := range c.byRef {
		sum += ct.t.Size()
	}
	if sum != c.bytes {
		t.Fatalf("cache counts %d bytes, holds %d", c.bytes, sum)
	}
}
