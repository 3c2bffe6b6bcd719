package reports

import (
	"cmp"
	"hash/maphash"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dmarcd/dmarcd/store/internal/codec"
)

// Sources accumulates one report's per-source roll-up while its
// records are added. Each record appends a row; rows are summed by source
// only when many have piled up (compact) and at the end. A report's
// records mostly come from distinct sources, so a map of one object per
// source cost an allocation, a hash and an insert per record for nothing:
// rows live in one slice, and grouping a few thousand of them by source
// once, through a scratch hash table of row numbers, is cheaper than that.
//
// Summing keeps what the incremental roll-up kept: a source's geolocation
// is its first record's, its evidence is counted in the order it first
// appears (at most maxSourceEvidence entries, see addEvidence), and past
// maxDraftSourceIPs distinct sources the ones with the fewest messages are
// folded into the row of OtherSources, down to keepDraftSourceIPs.
//
// The rows and their evidence are what a report of a million records
// holds while it is read (up to maxDraftSourceIPs+compactEvery rows and
// two or three times as much evidence), so they are compact: a row numbers
// its geolocation in geos and an evidence entry its domain in doms (a
// report's sources share a few of each), a row has no count of the
// disposition none (its messages less the others), and rows are summed in
// place (issue 25: 80 bytes a row instead of 120, 24 an evidence entry
// instead of 48, and no second array of rows).
type Sources struct {
	rows []srcRow
	// auths holds the rows' evidence: row i's are auths[a0:a1].
	auths []srcEvidence
	// summed is how many leading rows are summed: one per source, in no
	// particular order (the encoding and the counts need none).
	summed int
	// geos numbers the rows' geolocations, the first (0) being none; doms
	// the evidence's domains (in lower case).
	geos interner[srcGeo]
	doms interner[string]
	perm []int32  // scratch of sum
	tab  []int32  // scratch of distinct and sum
	strs strTable // scratch of encode
	// geoRefs and domRefs are encode's string references of each
	// geolocation (its country's and AS name's) and domain.
	geoRefs, domRefs []uint64
	// spareAuths is what sum and prune write the evidence into; they then
	// swap it with auths, so that a report whose sources repeat sums them
	// without new slices.
	spareAuths []srcEvidence
	grp, first []int32 // scratch of sum
	// Pool is the DB's, which hands the slices on from report to report;
	// nil: new slices, sized for 4 sources.
	Pool *SourcePool
}

// srcRow is one record's contribution to its source, or (once compacted)
// the sum of its source's records. Its messages with the disposition none
// are messages-quarantine-reject: a record has one disposition.
type srcRow struct {
	ip                                            string
	messages, pass, spf, dkim, quarantine, reject int64
	geo                                           int32 // in Sources.geos
	a0, a1                                        int32
}

// srcGeo is a geolocation of rows.
type srcGeo struct {
	cc, asOrg               string
	asn                     uint32
	hasCC, hasASN, hasASOrg bool
}

// srcEvidence is an Evidence of a row: key is the number of its domain in
// Sources.doms, shifted left by one, plus evKeySPF for SPF.
type srcEvidence struct {
	key            uint32
	messages, pass int64
}

const evKeySPF = 1

// interner numbers distinct values in the order they first come, from 0.
// A report has a few countries, ASes and domains, looked up in the list
// itself while it is short; a map takes over past internScan of them.
// The last two numbers returned are tried first: a report's records come
// in runs from one AS, each with its DKIM and its SPF domain.
type interner[K comparable] struct {
	list       []K
	idx        map[K]int32 // in use when big
	big        bool
	last, prev int32 // the numbers ref returned last
}

const internScan = 8

// ref returns the number of k, adding it.
func (t *interner[K]) ref(k K) int32 {
	if int(t.last) < len(t.list) && t.list[t.last] == k {
		return t.last
	}
	if int(t.prev) < len(t.list) && t.list[t.prev] == k {
		t.last, t.prev = t.prev, t.last
		return t.last
	}
	i := t.find(k)
	t.last, t.prev = i, t.last
	return i
}

// find returns the number of k, adding it.
func (t *interner[K]) find(k K) int32 {
	if !t.big {
		for i := len(t.list) - 1; i >= 0; i-- {
			if t.list[i] == k {
				return int32(i)
			}
		}
		if len(t.list) >= internScan {
			if t.idx == nil {
				t.idx = make(map[K]int32, 4*internScan)
			}
			for i, v := range t.list {
				t.idx[v] = int32(i)
			}
			t.big = true
		}
	} else if i, ok := t.idx[k]; ok {
		return i
	}
	i := int32(len(t.list))
	t.list = append(t.list, k)
	if t.big {
		t.idx[k] = i
	}
	return i
}

// reset empties t, keeping its slice and map (not their values) unless
// they grew past keep entries.
func (t *interner[K]) reset(keep int) {
	clear(t.list)
	t.list = t.list[:0]
	if t.idx != nil {
		if len(t.idx) > keep {
			t.idx = nil
		} else {
			clear(t.idx)
		}
	}
	if cap(t.list) > keep {
		t.list = nil
	}
	t.big, t.last, t.prev = false, 0, 0
}

// compactEvery is how many rows are appended before they are summed: it
// bounds a large report's rows to that many past its distinct sources.
const compactEvery = 4096

// SourcePool is what the Sources of one DB share.
type SourcePool struct {
	// hint is how many rows a report's first record makes room for: as
	// many as the last report summed had sources (reports of one import or
	// reporter are alike), between 4 and compactEvery; 0 before the first.
	hint atomic.Int64
	// bufs holds the *sourceBufs of finished reports.
	bufs sync.Pool
}

// rows is how many rows a report's first record makes room for.
func (p *SourcePool) rows() int {
	if p != nil {
		if n := p.hint.Load(); n > 0 {
			return int(n)
		}
	}
	return 4
}

// sourceBufs are the slices of a finished report's rows, kept for the next
// report: a report of 50 records took 12 KB of them, which made a fifth of
// the bytes the store allocated per record.
type sourceBufs struct {
	rows                  []srcRow
	auths, spareAuths     []srcEvidence
	perm, tab, grp, first []int32
	strs                  strTable
	geos                  interner[srcGeo]
	doms                  interner[string]
	geoRefs, domRefs      []uint64
}

// take gives s the slices of a finished report, or new ones sized by the
// pool's hint.
func (s *Sources) take() {
	n := s.Pool.rows()
	s.rows, s.auths = nil, nil
	if s.Pool != nil {
		if b, _ := s.Pool.bufs.Get().(*sourceBufs); b != nil && cap(b.rows) >= n {
			s.rows, s.auths, s.perm, s.tab, s.strs = b.rows[:0], b.auths[:0], b.perm[:0], b.tab, b.strs
			s.spareAuths, s.grp, s.first = b.spareAuths[:0], b.grp[:0], b.first[:0]
			s.geos, s.doms, s.geoRefs, s.domRefs = b.geos, b.doms, b.geoRefs, b.domRefs
			*b = sourceBufs{}
			s.Pool.bufs.Put(b)
		}
	}
	if s.rows == nil {
		s.rows, s.auths = make([]srcRow, 0, n), make([]srcEvidence, 0, 2*n)
	}
	s.geos.ref(srcGeo{}) // 0: none
}

// Release hands s's slices to the next report and empties s. Nothing may
// point into them any more: counts and encode copy what they keep.
func (s *Sources) Release() {
	if s.Pool != nil && cap(s.rows) > 0 && cap(s.rows) <= compactEvery {
		b, _ := s.Pool.bufs.Get().(*sourceBufs)
		if b == nil {
			b = new(sourceBufs)
		}
		clear(s.rows[:cap(s.rows)]) // the strings of the report go with it
		s.strs.reset()
		s.strs.s = SourceRollup{}
		s.geos.reset(4 * compactEvery)
		s.doms.reset(4 * compactEvery)
		b.rows, b.auths, b.perm, b.tab, b.strs = s.rows[:0], s.auths[:0], s.perm[:0], s.tab, s.strs
		b.spareAuths, b.grp, b.first = s.spareAuths[:0], s.grp[:0], s.first[:0]
		b.geos, b.doms, b.geoRefs, b.domRefs = s.geos, s.doms, s.geoRefs[:0], s.domRefs[:0]
		s.Pool.bufs.Put(b)
	}
	*s = Sources{}
}

// Add counts one record. r may be reused afterwards: only its strings,
// which never change, are kept.
func (s *Sources) Add(r *Record) {
	if s.rows == nil {
		s.take()
	}
	n := r.Count
	dkim, spf, _ := r.aligned()
	row := srcRow{ip: r.SourceIP, messages: n, pass: ifPass(spf || dkim, n), spf: ifPass(spf, n), dkim: ifPass(dkim, n)}
	switch r.Disposition {
	case "quarantine":
		row.quarantine = n
	case "reject":
		row.reject = n
	}
	if g := r.Geo; g != nil && (g.CountryCode != nil || g.ASN != nil || g.ASOrg != nil) {
		var sg srcGeo
		if g.CountryCode != nil {
			sg.cc, sg.hasCC = *g.CountryCode, true
		}
		if g.ASN != nil {
			sg.asn, sg.hasASN = *g.ASN, true
		}
		if g.ASOrg != nil {
			sg.asOrg, sg.hasASOrg = *g.ASOrg, true
		}
		row.geo = s.geos.ref(sg)
	}
	// A row alone is a summed source: its evidence is distinct and at
	// most maxSourceEvidence entries, as the sum of several would be.
	row.a0 = int32(len(s.auths))
	for i := range r.AuthResults.DKIM {
		a := &r.AuthResults.DKIM[i]
		s.addRecordEvidence(row.a0, 0, a.Domain, a.Result, n)
	}
	for i := range r.AuthResults.SPF {
		a := &r.AuthResults.SPF[i]
		s.addRecordEvidence(row.a0, evKeySPF, a.Domain, a.Result, n)
	}
	row.a1 = int32(len(s.auths))
	s.rows = append(s.rows, row)
	if len(s.rows)-s.summed >= compactEvery {
		s.Compact()
	}
}

// Compact sums the rows by source and prunes them past maxDraftSourceIPs
// sources. Rows are only moved when a source has several: a report's
// sources are mostly distinct, and then a look-up per row in a table of
// their hashes is all it costs.
func (s *Sources) Compact() {
	if s.summed == len(s.rows) {
		return
	}
	if !s.distinct() {
		s.sum()
	}
	s.summed = len(s.rows)
	if s.Pool != nil {
		s.Pool.hint.Store(int64(min(max(len(s.rows), 4), compactEvery)))
	}
	if len(s.rows) > maxDraftSourceIPs {
		s.prune(keepDraftSourceIPs)
	}
}

// sum replaces the rows by one per source, in the order the sources first
// came, each the sum of its rows in the order they came (the first one's
// geolocation and auth order win). The rows are grouped by source with a
// hash table of the sources; the evidence is summed source by source
// through a counting sort of the rows into the spare evidence, then the
// rows are summed in place: a source's place (its number in the order of
// first coming) is never after its first row, so every row is read
// before a place is written over it.
func (s *Sources) sum() {
	n := len(s.rows)
	tab := s.table(n)
	mask := len(tab) - 1
	grp := append(s.grp[:0], make([]int32, n)...) // each row's source, from 0
	first := s.first[:0]                          // each source's first row
	for i := range s.rows {
		ip := s.rows[i].ip
		for h := int(maphash.String(sourceSeed, ip)) & mask; ; h = (h + 1) & mask {
			g := tab[h] - 1
			if g < 0 {
				g = int32(len(first))
				first = append(first, int32(i))
				tab[h] = g + 1
			} else if s.rows[first[g]].ip != ip {
				continue
			}
			grp[i] = g
			break
		}
	}
	s.grp, s.first = grp, first
	// Each source's place in perm: its rows, counted, then summed up. The
	// hash table is done with, and has room for one more than the rows.
	at := tab[:len(first)+1]
	clear(at)
	for _, g := range grp {
		at[g+1]++
	}
	for g := 1; g < len(at); g++ {
		at[g] += at[g-1]
	}
	perm := append(s.perm[:0], make([]int32, n)...)
	for i, g := range grp {
		perm[at[g]] = int32(i)
		at[g]++
	}
	s.perm = perm
	// The evidence, source by source; the first row of each gets its new
	// range, which it takes to its place below.
	auths := slices.Grow(s.spareAuths[:0], len(s.auths))
	for i := 0; i < len(perm); {
		j := i + 1
		for j < len(perm) && grp[perm[j]] == grp[perm[i]] {
			j++
		}
		a0 := int32(len(auths))
		for _, k := range perm[i:j] {
			for _, a := range s.auths[s.rows[k].a0:s.rows[k].a1] {
				auths = addSrcEvidence(auths, a0, a)
			}
		}
		f := &s.rows[perm[i]]
		f.a0, f.a1 = a0, int32(len(auths))
		i = j
	}
	// The counts, in place: source g's first row moves up to row g (g is
	// at most its index), the others add to it.
	next := int32(0)
	for i, g := range grp {
		if g == next {
			s.rows[g] = s.rows[i]
			next++
		} else {
			s.sumRow(&s.rows[g], &s.rows[i])
		}
	}
	clear(s.rows[len(first):]) // the strings of the rows summed
	s.rows = s.rows[:len(first)]
	s.auths, s.spareAuths = auths, s.auths[:0]
}

// table returns the scratch hash table for n rows, empty: a power of two
// of at least 2n entries, so it is at most half full.
func (s *Sources) table(n int) []int32 {
	size := 1 << bits.Len(uint(2*n))
	if cap(s.tab) < size {
		s.tab = make([]int32, size)
	} else {
		s.tab = s.tab[:size]
		clear(s.tab)
	}
	return s.tab
}

// distinct tells whether every row has its own source, with an open
// addressing table of row numbers keyed by a hash of the IP.
func (s *Sources) distinct() bool {
	tab := s.table(len(s.rows))
	mask := len(tab) - 1
	for i := range s.rows {
		ip := s.rows[i].ip
		for h := int(maphash.String(sourceSeed, ip)) & mask; ; h = (h + 1) & mask {
			k := tab[h]
			if k == 0 {
				tab[h] = int32(i + 1)
				break
			}
			if s.rows[k-1].ip == ip {
				return false
			}
		}
	}
	return true
}

var sourceSeed = maphash.MakeSeed()

// addRecordEvidence counts the n messages of one record with one auth
// result in the evidence of its row, which starts at auths[e0]: a domain
// the record names twice (two signatures) counts its messages once,
// passing when either result passed. An empty domain is no evidence.
// kind is 0 for DKIM, evKeySPF for SPF.
func (s *Sources) addRecordEvidence(e0 int32, kind uint32, domain, result string, n int64) {
	if domain == "" {
		return
	}
	if needsLower(domain) {
		domain = strings.ToLower(domain)
	}
	key := uint32(s.doms.ref(domain))<<1 | kind
	pass := ifPass(result == "pass", n)
	have := s.auths[e0:]
	for i := range have {
		if h := &have[i]; h.key == key {
			h.pass = max(h.pass, pass)
			return
		}
	}
	e := srcEvidence{key: key, messages: n, pass: pass}
	if len(have) < maxSourceEvidence {
		s.auths = append(s.auths, e)
		return
	}
	s.auths = addSrcEvidence(s.auths, e0, e)
}

// addSrcEvidence is addEvidence for the rows' evidence.
func addSrcEvidence(out []srcEvidence, e0 int32, e srcEvidence) []srcEvidence {
	have := out[e0:]
	least := -1
	for i := range have {
		h := &have[i]
		if h.key == e.key {
			h.messages += e.messages
			h.pass += e.pass
			return out
		}
		if least < 0 || h.messages < have[least].messages {
			least = i
		}
	}
	switch {
	case len(have) < maxSourceEvidence:
		out = append(out, e)
	case e.messages > have[least].messages:
		have[least] = e
	}
	return out
}

// needsLower reports whether s has a byte strings.ToLower may change: an
// upper-case ASCII letter, or any byte past ASCII. Reports' domains are
// mostly lower case already, and this is cheaper than ToLower's own scan
// on the ingest path.
func needsLower(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c-'A' < 26 || c >= 0x80 {
			return true
		}
	}
	return false
}

// sumCounts adds o's counts into r.
func (r *srcRow) sumCounts(o *srcRow) {
	r.messages += o.messages
	r.pass += o.pass
	r.spf += o.spf
	r.dkim += o.dkim
	r.quarantine += o.quarantine
	r.reject += o.reject
}

// sumRow adds o's counts into r, and the parts of o's geolocation r lacks
// (a country, an AS with its name), not its auth results.
func (s *Sources) sumRow(r, o *srcRow) {
	r.sumCounts(o)
	if r.geo == o.geo || o.geo == 0 {
		return
	}
	g, og := s.geos.list[r.geo], s.geos.list[o.geo]
	changed := false
	if !g.hasCC && og.hasCC {
		g.cc, g.hasCC, changed = og.cc, true, true
	}
	if !g.hasASN && og.hasASN {
		g.asn, g.hasASN, g.asOrg, g.hasASOrg, changed = og.asn, true, og.asOrg, og.hasASOrg, true
	}
	if changed {
		r.geo = s.geos.ref(g)
	}
}

// prune keeps the keep sources with the most messages (and the row of
// other sources) and folds the rest into that row, which has no
// geolocation. The rows must be summed; they stay so.
func (s *Sources) prune(keep int) {
	// The sources are sorted in place and the auth results written into
	// the spare ones: a report of a million records from distinct sources
	// pruned a hundred times, and made three new slices of up to 16,000
	// rows each time.
	var other srcRow
	n := len(s.rows)
	rest := s.rows[:0] // the rows but the other one, in place
	for _, r := range s.rows {
		if r.ip == OtherSources {
			other = r
		} else {
			rest = append(rest, r)
		}
	}
	slices.SortFunc(rest, func(a, b srcRow) int {
		return cmp.Or(cmp.Compare(b.messages, a.messages), strings.Compare(a.ip, b.ip))
	})
	auths := s.spareAuths[:0]
	for _, a := range s.auths[other.a0:other.a1] {
		auths = addSrcEvidence(auths, 0, a)
	}
	k := min(keep, len(rest))
	for i := range rest[k:] {
		o := &rest[k+i]
		other.sumCounts(o)
		for _, a := range s.auths[o.a0:o.a1] {
			auths = addSrcEvidence(auths, 0, a)
		}
	}
	other.ip, other.geo = OtherSources, 0
	other.a0, other.a1 = 0, int32(len(auths))
	// The other row first, then the rows kept, moved up by one.
	rows := slices.Grow(rest[:k], 1)[:k+1]
	copy(rows[1:], rows[:k])
	rows[0] = other
	for i := 1; i < len(rows); i++ {
		r := &rows[i]
		a := int32(len(auths))
		auths = append(auths, s.auths[r.a0:r.a1]...)
		r.a0, r.a1 = a, int32(len(auths))
	}
	if len(rows) < n {
		clear(s.rows[len(rows):n]) // the dropped sources' strings
	}
	s.rows, s.auths, s.spareAuths = rows, auths, s.auths[:0]
	s.summed = len(rows)
	s.shrinkTables()
}

// shrinkTables drops the geolocations and domains no row refers to any
// more once they are many more than the rows could: a report of a million
// sources from as many ASes and domains keeps only those of the sources
// it keeps. They keep their order; nothing depends on their numbers.
func (s *Sources) shrinkTables() {
	if len(s.geos.list) > 2*len(s.rows)+1024 {
		remap := make([]int32, len(s.geos.list))
		for i := range s.rows {
			remap[s.rows[i].geo] = 1
		}
		remap[0] = 1 // none stays 0
		keepMarked(&s.geos, remap)
		for i := range s.rows {
			r := &s.rows[i]
			r.geo = remap[r.geo]
		}
	}
	if len(s.doms.list) > 2*len(s.auths)+1024 {
		remap := make([]int32, len(s.doms.list))
		for _, a := range s.auths {
			remap[a.key>>1] = 1
		}
		keepMarked(&s.doms, remap)
		for i := range s.auths {
			a := &s.auths[i]
			a.key = uint32(remap[a.key>>1])<<1 | a.key&evKeySPF
		}
	}
}

// keepMarked keeps the values of t whose mark is 1, in order, and turns
// each mark into the value's new number.
func keepMarked[K comparable](t *interner[K], mark []int32) {
	list := t.list
	kept := make([]K, 0, len(list)/2)
	for i, v := range list {
		if mark[i] == 1 {
			mark[i] = int32(len(kept))
			kept = append(kept, v)
		}
	}
	t.reset(0)
	for _, v := range kept {
		t.ref(v)
	}
}

// IPCount is one source of a report as the day roll-up and the alert
// rules count it.
type IPCount struct {
	IP string
	SourceCount
}

// Counts returns the sources as the day roll-up counts them, at most
// maxDraftSources of them (those with the most messages, ties by IP),
// without the row of other sources. The rows must be summed. A slice, not
// a map: its readers only go through it. Its geolocation points into
// slices of its own, not into the rows, which the next report reuses (and
// which the day roll-up would keep alive otherwise).
func (s *Sources) Counts() []IPCount {
	out := make([]IPCount, 0, len(s.rows))
	var g geoRefs
	for i := range s.rows {
		r := &s.rows[i]
		if r.ip == OtherSources {
			continue
		}
		c := IPCount{IP: r.ip, SourceCount: SourceCount{Messages: r.messages, Pass: r.pass, Fail: r.messages - r.pass}}
		geo := &s.geos.list[r.geo]
		if geo.hasCC {
			c.CC = g.str(geo.cc)
		}
		if geo.hasASN {
			c.ASN = g.num(geo.asn)
		}
		if geo.hasASOrg {
			c.ASOrg = g.str(geo.asOrg)
		}
		out = append(out, c)
	}
	if len(out) > maxDraftSources {
		slices.SortFunc(out, func(a, b IPCount) int {
			return cmp.Or(cmp.Compare(b.Messages, a.Messages), strings.Compare(a.IP, b.IP))
		})
		out = out[:maxDraftSources]
	}
	return out
}

// geoRefs gives pointers to a report's distinct geolocation values: a
// report's sources share a few countries and ASes.
type geoRefs struct {
	strs []string
	nums []uint32
}

// geoRefsScan is how many of the last values are compared with a new one.
const geoRefsScan = 8

func (g *geoRefs) str(v string) *string { return refTo(&g.strs, v) }

func (g *geoRefs) num(v uint32) *uint32 { return refTo(&g.nums, v) }

// refTo returns a pointer to v in *list, one of the last geoRefsScan
// values or a new one.
func refTo[T comparable](list *[]T, v T) *T {
	l := *list
	for i := len(l) - 1; i >= max(0, len(l)-geoRefsScan); i-- {
		if l[i] == v {
			return &l[i]
		}
	}
	if len(l) == cap(l) {
		// A new array: the pointers given stay valid in the old one.
		l = make([]T, 0, max(8, 2*cap(l)))
	}
	l = append(l, v)
	*list = l
	return &l[len(l)-1]
}

// Encode encodes the sources as one block of segment entries, each seen
// from begin to end (see encodeSources). The rows must be summed.
func (s *Sources) Encode(begin, end time.Time) SourceEntries {
	if len(s.rows) == 0 {
		return SourceEntries{}
	}
	e := make(codec.Enc, 0, 64+64*len(s.rows)) // about what an entry takes with two auth results
	e = append(e, segVersion)
	e = s.appendBlock(e, begin.Unix(), end.Unix())
	return SourceEntries{n: len(s.rows), body: e}
}

// noRef is a string reference not looked up yet.
const noRef = ^uint64(0)

// appendBlock appends the rows as appendSourceBlock does, byte for byte,
// without making a SourceRollup of each row twice: a geolocation's and a
// domain's strings are looked up in the block's table once each, the first
// time a row refers to them, which is when appendSourceBlock would have
// added them.
func (s *Sources) appendBlock(e codec.Enc, first, last int64) codec.Enc {
	t := &s.strs
	t.reset()
	gr := fillRefs(&s.geoRefs, 2*len(s.geos.list))
	dr := fillRefs(&s.domRefs, len(s.doms.list))
	for i := range s.rows {
		r := &s.rows[i]
		if ref := gr[2*r.geo:]; ref[0] == noRef {
			g := &s.geos.list[r.geo]
			ref[0], ref[1] = 0, 0
			if g.hasCC {
				ref[0] = t.ref(g.cc)
			}
			if g.hasASOrg {
				ref[1] = t.ref(g.asOrg)
			}
		}
		for _, a := range s.auths[r.a0:r.a1] {
			if d := a.key >> 1; dr[d] == noRef {
				dr[d] = t.ref(s.doms.list[d])
			}
		}
	}
	e = appendBlockHeader(e, first, last, len(s.rows))
	e = e.Uvarint(uint64(len(t.list)))
	for _, str := range t.list {
		e = e.Str(str)
	}
	for i := range s.rows {
		r := &s.rows[i]
		g := &s.geos.list[r.geo]
		e = e.Addr(r.ip) // OtherSources is "": no address
		e = e.Varint(r.messages).Varint(r.pass).Varint(r.spf).Varint(r.dkim)
		e = e.Varint(r.messages - r.quarantine - r.reject).Varint(r.quarantine).Varint(r.reject)
		e = e.Uvarint(gr[2*r.geo])
		if g.hasASN {
			e = append(e, 1).Uvarint(uint64(g.asn))
		} else {
			e = append(e, 0)
		}
		e = e.Uvarint(gr[2*r.geo+1])
		e = e.Uvarint(uint64(r.a1 - r.a0))
		for _, a := range s.auths[r.a0:r.a1] {
			kind := byte(evKindDKIM)
			if a.key&evKeySPF != 0 {
				kind = evKindSPF
			}
			e = append(e, kind)
			e = e.Uvarint(dr[a.key>>1]).Varint(a.messages).Varint(a.pass)
		}
	}
	return e
}

// fillRefs returns *refs made n long, each noRef.
func fillRefs(refs *[]uint64, n int) []uint64 {
	r := slices.Grow((*refs)[:0], n)[:n]
	for i := range r {
		r[i] = noRef
	}
	*refs = r
	return r
}
