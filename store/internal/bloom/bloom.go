// Package bloom is the store's Bloom filter: a set that answers "maybe" or
// "surely not", never forgets a key added, and takes a few bits per key.
// The store keeps two: the identities of the stored aggregate reports (the
// dedup check), and the sources seen per domain and day (the alert rules'
// source index).
//
// It is a blocked filter: the bits of a key lie in one 512-bit block (a
// cache line), so a lookup touches one line whatever its number of
// probes. A key is given as two 64-bit hashes, which must be uniform: the
// first picks the block, the second the bits, 9 at a time, rehashed with
// the first when they run out.
package bloom

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// blockWords is the words of a block: 512 bits.
const blockWords = 8

// Filter is a Bloom filter of fixed size. Add and Has are for a filter one
// goroutine owns (or that nobody changes any more); AddAtomic and
// HasAtomic for one that is read while it is added to.
type Filter struct {
	words  []uint64
	blocks uint64
	probes int
}

// New returns a filter for n keys at bitsPerKey bits each (at least one
// block), setting probes bits per key. With 24 bits and 12 probes, about
// 1 in 10,000 absent keys looks present; with 16 and 2, about 1 in 60.
func New(n int64, bitsPerKey, probes int) *Filter {
	blocks := max((uint64(max(n, 0))*uint64(bitsPerKey)+511)/512, 1)
	return &Filter{words: make([]uint64, blocks*blockWords), blocks: blocks, probes: probes}
}

// probe walks the bits of a key: the block h1 picks, then bits of h2
// nine at a time (a 512-bit block), h2 rehashed when its bits run out.
type probe struct {
	h1, h2 uint64
	avail  int
}

// start returns the first word of the key's block and its probe.
func (f *Filter) start(h1, h2 uint64) (int, probe) {
	hi, _ := bits.Mul64(h1, f.blocks) // h1 scaled to [0, blocks)
	return int(hi) * blockWords, probe{h1: h1, h2: h2, avail: 64}
}

// next returns the word (from the block's first) and bit of the next
// probe.
func (p *probe) next() (int, uint64) {
	if p.avail < 9 {
		p.h2 = p.h2*0x9e3779b97f4a7c15 + p.h1
		p.avail = 64
	}
	pos := p.h2 & 511
	p.h2 >>= 9
	p.avail -= 9
	return int(pos >> 6), 1 << (pos & 63)
}

// Add adds the key (h1, h2).
func (f *Filter) Add(h1, h2 uint64) {
	base, p := f.start(h1, h2)
	for range f.probes {
		w, bit := p.next()
		f.words[base+w] |= bit
	}
}

// Has reports whether the key (h1, h2) may have been added: false is
// certain.
func (f *Filter) Has(h1, h2 uint64) bool {
	base, p := f.start(h1, h2)
	for range f.probes {
		w, bit := p.next()
		if f.words[base+w]&bit == 0 {
			return false
		}
	}
	return true
}

// AddAtomic is Add for a filter that other goroutines read meanwhile with
// HasAtomic.
func (f *Filter) AddAtomic(h1, h2 uint64) {
	base, p := f.start(h1, h2)
	for range f.probes {
		w, bit := p.next()
		atomic.OrUint64(&f.words[base+w], bit)
	}
}

// HasAtomic is Has for a filter that other goroutines add to meanwhile
// with AddAtomic.
func (f *Filter) HasAtomic(h1, h2 uint64) bool {
	base, p := f.start(h1, h2)
	for range f.probes {
		w, bit := p.next()
		if atomic.LoadUint64(&f.words[base+w])&bit == 0 {
			return false
		}
	}
	return true
}

// Bytes returns the memory the filter's bits take.
func (f *Filter) Bytes() int64 { return int64(len(f.words)) * 8 }

// Growing is a filter without a size set in advance: it grows by
// segments, each twice the capacity of the one before, so that adding
// never rehashes. It is safe for concurrent use: adds from one goroutine
// (or several) while others look keys up.
type Growing struct {
	bitsPerKey, probes int
	mu                 sync.Mutex // held to grow, so a segment is never added twice
	segs               atomic.Pointer[[]*segment]
}

type segment struct {
	f        *Filter
	capacity int64
	n        atomic.Int64
}

// NewGrowing returns a filter whose first segment holds n keys at
// bitsPerKey bits each, setting probes bits per key.
func NewGrowing(n int64, bitsPerKey, probes int) *Growing {
	g := &Growing{bitsPerKey: bitsPerKey, probes: probes}
	segs := []*segment{g.segment(n)}
	g.segs.Store(&segs)
	return g
}

func (g *Growing) segment(capacity int64) *segment {
	return &segment{f: New(capacity, g.bitsPerKey, g.probes), capacity: capacity}
}

// Add adds the key (h1, h2).
func (g *Growing) Add(h1, h2 uint64) {
	segs := *g.segs.Load()
	last := segs[len(segs)-1]
	if last.n.Load() >= last.capacity {
		last = g.grow(last)
	}
	last.n.Add(1)
	last.f.AddAtomic(h1, h2)
}

// grow adds a segment after full, unless another Add did.
func (g *Growing) grow(full *segment) *segment {
	g.mu.Lock()
	defer g.mu.Unlock()
	segs := *g.segs.Load()
	if last := segs[len(segs)-1]; last != full {
		return last
	}
	next := append(segs[:len(segs):len(segs)], g.segment(full.capacity*2))
	g.segs.Store(&next)
	return next[len(next)-1]
}

// Has reports whether the key (h1, h2) may have been added: false is
// certain.
func (g *Growing) Has(h1, h2 uint64) bool {
	for _, s := range *g.segs.Load() {
		if s.f.HasAtomic(h1, h2) {
			return true
		}
	}
	return false
}

// Len returns how many keys were added.
func (g *Growing) Len() int64 {
	var n int64
	for _, s := range *g.segs.Load() {
		n += s.n.Load()
	}
	return n
}

// Bytes returns the memory the filter's bits take.
func (g *Growing) Bytes() int64 {
	var n int64
	for _, s := range *g.segs.Load() {
		n += s.f.Bytes()
	}
	return n
}
