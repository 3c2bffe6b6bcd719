package store

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"slices"
	"sync"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store/internal/bloom"
)

// The source index of new_failing_source: for each domain and UTC day, the
// set of source IPs seen in its reports of that day (32-bit hashes of the
// address text, sorted: setVersion32 then 4 bytes a hash; files before
// schema 10 hold 8-byte hashes, read as their top 32 bits). Two sources
// share a hash once in 4 billion: a source then counts as seen when it
// was not, about once in ten thousand checks for a domain that saw 600,000
// sources in a window, which only spares an alert. It is data only: the rule (package alert)
// asks whether a source was seen in a window of days (alert.History
// SeenSource), which looks it up in the sets of those days.
//
// Sets per day, rather than one key per IP, keep the cost of learning off
// the ingest path: a commit rewrites the small values of the days it
// stores instead of inserting a key per source all over the B+tree (which
// tripled the pages an ingest commit writes). The sets are kept decoded in
// memory, each with a small Bloom filter (package bloom) so that looking a
// new source up in the 31 sets of a window is 31 bit tests, and are
// checked against the stored bytes once per commit.

// maxDaySetIPs caps the sources remembered per domain and day; beyond it a
// source goes unremembered and may later count as new (the alerts it could
// raise are capped per day anyway).
const maxDaySetIPs = 20_000

// maxCachedIPs bounds the decoded sets kept in memory (10 bytes per IP).
const maxCachedIPs = 1 << 20

// sourceSetKey is domain id | UTC day (big-endian).
func sourceSetKey(domainID string, day uint32) []byte {
	k := make([]byte, 0, idLen+4)
	return binary.BigEndian.AppendUint32(append(k, domainID...), day)
}

// setKey names one set in memory.
type setKey struct {
	domain string
	day    uint32
}

// hashIP is the top 32 bits of 64-bit FNV-1a of the address as the
// report wrote it (FNV-1a mixes its high bits best).
func hashIP(ip string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(ip); i++ {
		h ^= uint64(ip[i])
		h *= 1099511628211
	}
	return h >> 32
}

// setVersion32 is the first byte of a stored set of 32-bit hashes; its
// length, 1 + 4n, is odd, so it is never taken for the 8-byte hashes of
// older files (a multiple of 8).
const setVersion32 = 0x20

// daySet is one stored set: sorted hashes with their Bloom filter, plus
// those added in the current commit.
type daySet struct {
	raw    []byte // the stored bytes it was read from or written as
	sorted []uint64
	bloom  *bloom.Filter // of sorted; nil when empty
	added  *hashSet      // nil unless the set is being changed
}

// Bloom filter settings of a set: 16 bits a hash and two probes, about
// 1.5 % false positives, which only cost a binary search.
const (
	daySetBits   = 16
	daySetProbes = 2
)

// bloomKey is the filter's two hashes of a source hash, spread over 64
// bits (a multiplication by the golden ratio, SplitMix64's first step):
// the first picks the block, the second (its halves swapped) the bits in
// it.
func bloomKey(h uint64) (uint64, uint64) {
	m := (h ^ h<<32) * 0x9e3779b97f4a7c15
	return m, bits.RotateLeft64(m, 32)
}

// noSet stands for every day without a stored set; it is never changed.
var noSet = &daySet{}

func decodeDaySet(raw []byte) *daySet {
	if raw == nil {
		return noSet
	}
	s := &daySet{raw: bytes.Clone(raw)}
	switch {
	case len(raw)%8 == 0: // 8-byte hashes (before schema 10)
		s.sorted = make([]uint64, len(raw)/8)
		for i := range s.sorted {
			s.sorted[i] = binary.BigEndian.Uint64(raw[8*i:]) >> 32
		}
	case len(raw)%4 == 1 && raw[0] == setVersion32:
		s.sorted = make([]uint64, len(raw)/4)
		for i := range s.sorted {
			s.sorted[i] = uint64(binary.BigEndian.Uint32(raw[1+4*i:]))
		}
	default:
		return s // damaged: start afresh, it is only a hint
	}
	if !slices.IsSorted(s.sorted) {
		slices.Sort(s.sorted)
	}
	s.sorted = slices.Compact(s.sorted) // two 8-byte hashes may share their top half
	s.buildBloom()
	return s
}

// buildBloom makes the filter of the sorted hashes.
func (s *daySet) buildBloom() {
	if len(s.sorted) == 0 {
		s.bloom = nil
		return
	}
	s.bloom = bloom.New(int64(len(s.sorted)), daySetBits, daySetProbes)
	for _, h := range s.sorted {
		s.bloom.Add(bloomKey(h))
	}
}

func (s *daySet) has(h uint64) bool {
	if s.added != nil && s.added.has(h) {
		return true
	}
	if s.bloom == nil || !s.bloom.Has(bloomKey(h)) {
		return false
	}
	_, ok := slices.BinarySearch(s.sorted, h)
	return ok
}

func (s *daySet) size() int {
	if s.added == nil {
		return len(s.sorted)
	}
	return len(s.sorted) + s.added.n
}

// add remembers h unless the set is full; the set must be a clone.
func (s *daySet) add(h uint64) {
	if s.size() >= maxDaySetIPs || s.has(h) {
		return
	}
	s.added.add(h)
}

// written returns the set as it is once its additions are stored, and
// the bytes to store.
func (s *daySet) written() (*daySet, []byte) {
	all := make([]uint64, 0, s.size())
	all = append(all, s.sorted...)
	if s.added != nil {
		all = s.added.appendTo(all)
	}
	slices.Sort(all)
	raw := make([]byte, 1, 1+4*len(all))
	raw[0] = setVersion32
	for _, h := range all {
		raw = binary.BigEndian.AppendUint32(raw, uint32(h))
	}
	w := &daySet{raw: raw, sorted: all}
	w.buildBloom()
	return w, raw
}

// clone returns a copy of s to add to, leaving s (maybe cached) as it is.
func (s *daySet) clone() *daySet {
	return &daySet{raw: s.raw, sorted: s.sorted, bloom: s.bloom, added: &hashSet{}}
}

// hashSet is a set of 64-bit hashes with open addressing and linear
// probing: the values are hashes already, so they pick their slot
// themselves, which makes it several times cheaper than a map for the
// thousands of sources a commit learns. Slot value 0 means free; the
// hash 0 is kept aside.
type hashSet struct {
	slots []uint64
	n     int
	zero  bool
}

func (s *hashSet) has(h uint64) bool {
	if h == 0 {
		return s.zero
	}
	if len(s.slots) == 0 {
		return false
	}
	mask := uint64(len(s.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch s.slots[i] {
		case h:
			return true
		case 0:
			return false
		}
	}
}

// add inserts h (once), growing the table past half full.
func (s *hashSet) add(h uint64) {
	if h == 0 {
		if !s.zero {
			s.zero, s.n = true, s.n+1
		}
		return
	}
	if 2*(s.n+1) > len(s.slots) {
		s.grow()
	}
	mask := uint64(len(s.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch s.slots[i] {
		case h:
			return
		case 0:
			s.slots[i] = h
			s.n++
			return
		}
	}
}

func (s *hashSet) grow() {
	old := s.slots
	s.slots = make([]uint64, max(64, 2*len(old)))
	mask := uint64(len(s.slots) - 1)
	for _, h := range old {
		if h == 0 {
			continue
		}
		i := h & mask
		for s.slots[i] != 0 {
			i = (i + 1) & mask
		}
		s.slots[i] = h
	}
}

// appendTo appends every hash of the set to dst.
func (s *hashSet) appendTo(dst []uint64) []uint64 {
	for _, h := range s.slots {
		if h != 0 {
			dst = append(dst, h)
		}
	}
	if s.zero {
		dst = append(dst, 0)
	}
	return dst
}

// sourceCache holds decoded sets across commits; the DB's ingesters share
// it.
type sourceCache struct {
	mu   sync.Mutex
	sets map[setKey]*daySet
	ips  int
}

func (c *sourceCache) get(k setKey) *daySet {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sets[k]
}

// put caches s, emptying the cache first when it would grow past its
// budget.
func (c *sourceCache) put(k setKey, s *daySet) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.sets[k]; old != nil {
		c.ips -= len(old.sorted)
	}
	if c.sets == nil || c.ips+len(s.sorted) > maxCachedIPs {
		c.sets, c.ips = make(map[setKey]*daySet), 0
	}
	c.sets[k] = s
	c.ips += len(s.sorted)
}

// sourceIndex is the source index as one commit sees it.
type sourceIndex struct {
	db      *DB
	bucket  *bolt.Bucket
	loaded  map[setKey]*daySet // read (and checked) in this commit
	dirty   map[setKey]*daySet // changed in this commit
	windows map[windowKey][]*daySet
	history map[string]bool // domain id -> it has a stored set
}

// windowKey names the sets of a domain from one day to another.
type windowKey struct {
	domain   string
	from, to uint32
}

func newSourceIndex(db *DB, tx *bolt.Tx) *sourceIndex {
	return &sourceIndex{db: db, bucket: tx.Bucket(bucketAlertSources),
		loaded: map[setKey]*daySet{}, dirty: map[setKey]*daySet{}, windows: map[windowKey][]*daySet{},
		history: map[string]bool{}}
}

// set returns the set of domain and day as this commit sees it: with the
// sources it learnt so far.
func (x *sourceIndex) set(domainID string, day uint32) *daySet {
	if s := x.dirty[setKey{domainID, day}]; s != nil {
		return s
	}
	return x.stored(domainID, day)
}

// stored returns the set of domain and day as committed, from the cache
// when the stored bytes are still those it holds.
func (x *sourceIndex) stored(domainID string, day uint32) *daySet {
	k := setKey{domainID, day}
	if s := x.loaded[k]; s != nil {
		return s
	}
	raw := x.bucket.Get(sourceSetKey(domainID, day))
	s := x.db.alerts.sources.get(k)
	if s == nil || !bytes.Equal(s.raw, raw) {
		s = decodeDaySet(raw)
		if s != noSet {
			x.db.alerts.sources.put(k, s)
		}
	}
	x.loaded[k] = s
	return s
}

// hasHistory reports whether any report of the domain was learnt before
// this one.
func (x *sourceIndex) hasHistory(domainID string) bool {
	if known, ok := x.history[domainID]; ok {
		return known
	}
	prefix := []byte(domainID)
	k, _ := x.bucket.Cursor().Seek(prefix)
	x.history[domainID] = k != nil && bytes.HasPrefix(k, prefix)
	return x.history[domainID]
}

// window returns the domain's non-empty sets from day to back to day
// from, as this commit sees them, most recent first (a source known at all
// is most often known from the last days). The reports of a commit are
// mostly of one or two days, so windows are kept for the commit.
func (x *sourceIndex) window(domainID string, from, to uint32) []*daySet {
	k := windowKey{domainID, from, to}
	if w, ok := x.windows[k]; ok {
		return w
	}
	sets := make([]*daySet, 0, max(int64(to)-int64(from)+1, 0))
	for d := int64(to); d >= int64(from); d-- {
		// A set this commit changes may be empty yet: it stays in.
		if s := x.set(domainID, uint32(d)); s.size() > 0 || s.added != nil {
			sets = append(sets, s)
		}
	}
	x.windows[k] = sets
	return sets
}

// seenIn reports whether h is in one of the sets.
func seenIn(sets []*daySet, h uint64) bool {
	for _, s := range sets {
		if s.has(h) {
			return true
		}
	}
	return false
}

// learn adds the hashes to the domain's set of day.
func (x *sourceIndex) learn(domainID string, day uint32, hs []uint64) {
	k := setKey{domainID, day}
	s := x.dirty[k]
	if s == nil {
		s = x.stored(domainID, day).clone()
		x.dirty[k] = s
		// The windows holding the stored set hold the wrong one now.
		for wk := range x.windows {
			if wk.domain == domainID && wk.from <= day && day <= wk.to {
				delete(x.windows, wk)
			}
		}
	}
	for _, h := range hs {
		s.add(h)
	}
	x.history[domainID] = true
}

// flush writes the changed sets; the cache takes them once tx commits.
func (x *sourceIndex) flush(tx *bolt.Tx) error {
	for k, s := range x.dirty {
		if s.added.n == 0 {
			continue
		}
		w, raw := s.written()
		if err := x.bucket.Put(sourceSetKey(k.domain, k.day), raw); err != nil {
			return err
		}
		tx.OnCommit(func() { x.db.alerts.sources.put(k, w) })
	}
	return nil
}
