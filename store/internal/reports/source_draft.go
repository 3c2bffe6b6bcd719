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
type Sources struct {
	rows []srcRow
	// auths holds the rows' evidence: row i's are auths[a0:a1].
	auths []Evidence
	// summed is how many leading rows are summed: one per source, in no
	// particular order (the encoding and the counts need none).
	summed int
	perm   []int32  // scratch of compact
	tab    []int32  // scratch of distinct
	strs   strTable // scratch of encode
	// spare and spareAuths are what sum writes the summed rows into; it
	// then swaps them with rows and auths, so that a report whose sources
	// repeat sums them without new slices.
	spare      []srcRow
	spareAuths []Evidence
	grp, first []int32 // scratch of sum
	// Pool is the DB's, which hands the slices on from report to report;
	// nil: new slices, sized for 4 sources.
	Pool *SourcePool
}

// srcRow is one record's contribution to its source, or (once compacted)
// the sum of its source's records.
type srcRow struct {
	ip                        string
	messages, pass, spf, dkim int64
	none, quarantine, reject  int64
	cc, asOrg                 string
	asn                       uint32
	hasCC, hasASN, hasASOrg   bool
	a0, a1                    int32
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
	rows, spare           []srcRow
	auths, spareAuths     []Evidence
	perm, tab, grp, first []int32
	strs                  strTable
}

// take gives s the slices of a finished report, or new ones sized by the
// pool's hint.
func (s *Sources) take() {
	n := s.Pool.rows()
	if s.Pool == nil {
		s.rows, s.auths = make([]srcRow, 0, n), make([]Evidence, 0, 2*n)
		return
	}
	if b, _ := s.Pool.bufs.Get().(*sourceBufs); b != nil && cap(b.rows) >= n {
		s.rows, s.auths, s.perm, s.tab, s.strs = b.rows[:0], b.auths[:0], b.perm[:0], b.tab, b.strs
		s.spare, s.spareAuths, s.grp, s.first = b.spare[:0], b.spareAuths[:0], b.grp[:0], b.first[:0]
		*b = sourceBufs{}
		s.Pool.bufs.Put(b)
		return
	}
	s.rows, s.auths = make([]srcRow, 0, n), make([]Evidence, 0, 2*n)
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
		clear(s.auths[:cap(s.auths)])
		clear(s.spare[:cap(s.spare)])
		clear(s.spareAuths[:cap(s.spareAuths)])
		s.strs.reset()
		s.strs.s = SourceRollup{}
		b.rows, b.auths, b.perm, b.tab, b.strs = s.rows[:0], s.auths[:0], s.perm[:0], s.tab, s.strs
		b.spare, b.spareAuths, b.grp, b.first = s.spare[:0], s.spareAuths[:0], s.grp[:0], s.first[:0]
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
	default:
		row.none = n
	}
	if g := r.Geo; g != nil {
		if g.CountryCode != nil {
			row.cc, row.hasCC = *g.CountryCode, true
		}
		if g.ASN != nil {
			row.asn, row.hasASN = *g.ASN, true
		}
		if g.ASOrg != nil {
			row.asOrg, row.hasASOrg = *g.ASOrg, true
		}
	}
	// A row alone is a summed source: its evidence is distinct and at
	// most maxSourceEvidence entries, as the sum of several would be.
	row.a0 = int32(len(s.auths))
	for i := range r.AuthResults.DKIM {
		a := &r.AuthResults.DKIM[i]
		s.auths = addRecordEvidence(s.auths, row.a0, EvidenceDKIM, a.Domain, a.Result, n)
	}
	for i := range r.AuthResults.SPF {
		a := &r.AuthResults.SPF[i]
		s.auths = addRecordEvidence(s.auths, row.a0, EvidenceSPF, a.Domain, a.Result, n)
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
// came. The rows are grouped by source with a hash table of the sources
// and a counting sort, which keeps each source's rows in the order they
// came (the first one's geolocation and auth order win), the summed row
// first.
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
	summed := slices.Grow(s.spare[:0], len(first))
	auths := slices.Grow(s.spareAuths[:0], len(s.auths))
	for i := 0; i < len(perm); {
		j := i + 1
		for j < len(perm) && grp[perm[j]] == grp[perm[i]] {
			j++
		}
		out := s.rows[perm[i]]
		out.a0 = int32(len(auths))
		for _, k := range perm[i:j] {
			if k != perm[i] {
				out.sum(&s.rows[k])
			}
			for _, a := range s.auths[s.rows[k].a0:s.rows[k].a1] {
				auths = addEvidence(auths, out.a0, a)
			}
		}
		out.a1 = int32(len(auths))
		summed = append(summed, out)
		i = j
	}
	// The rows summed become the spare ones: nothing points into them
	// (what the report keeps of them is copied by counts and encode).
	s.rows, s.auths, s.spare, s.spareAuths = summed, auths, s.rows[:0], s.auths[:0]
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
// result in the evidence of its row, which starts at out[e0]: a domain
// the record names twice (two signatures) counts its messages once,
// passing when either result passed. An empty domain is no evidence.
func addRecordEvidence(out []Evidence, e0 int32, kind, domain, result string, n int64) []Evidence {
	if domain == "" {
		return out
	}
	if needsLower(domain) {
		domain = strings.ToLower(domain)
	}
	pass := ifPass(result == "pass", n)
	have := out[e0:]
	for i := range have {
		if h := &have[i]; h.Domain == domain && h.Kind == kind {
			h.Pass = max(h.Pass, pass)
			return out
		}
	}
	e := Evidence{Kind: kind, Domain: domain, Messages: n, Pass: pass}
	if len(have) < maxSourceEvidence {
		return append(out, e)
	}
	return addEvidence(out, e0, e)
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

// sum adds o's counts into r (not its auth results, nor its geolocation
// when r has one).
func (r *srcRow) sum(o *srcRow) {
	r.messages += o.messages
	r.pass += o.pass
	r.spf += o.spf
	r.dkim += o.dkim
	r.none += o.none
	r.quarantine += o.quarantine
	r.reject += o.reject
	if !r.hasCC && o.hasCC {
		r.cc, r.hasCC = o.cc, true
	}
	if !r.hasASN && o.hasASN {
		r.asn, r.hasASN, r.asOrg, r.hasASOrg = o.asn, true, o.asOrg, o.hasASOrg
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
		auths = addEvidence(auths, 0, a)
	}
	k := min(keep, len(rest))
	for _, o := range rest[k:] {
		other.sum(&o)
		for _, a := range s.auths[o.a0:o.a1] {
			auths = addEvidence(auths, 0, a)
		}
	}
	other.ip, other.cc, other.asOrg, other.asn = OtherSources, "", "", 0
	other.hasCC, other.hasASN, other.hasASOrg = false, false, false
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
}

// rollup returns row r as a SourceRollup for the encoder: it points into
// r and the auth results, so it is only read while they are.
func (s *Sources) rollup(r *srcRow, out *SourceRollup) {
	*out = SourceRollup{SourceIP: r.ip, Messages: r.messages, DMARCPass: r.pass, SPFAligned: r.spf, DKIMAligned: r.dkim,
		Disposition: DispositionCount{None: r.none, Quarantine: r.quarantine, Reject: r.reject},
		Evidence:    s.auths[r.a0:r.a1]}
	if r.hasCC {
		out.CountryCode = &r.cc
	}
	if r.hasASN {
		out.ASN = &r.asn
	}
	if r.hasASOrg {
		out.ASOrg = &r.asOrg
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
		if r.hasCC {
			c.CC = g.str(r.cc)
		}
		if r.hasASN {
			c.ASN = g.num(r.asn)
		}
		if r.hasASOrg {
			c.ASOrg = g.str(r.asOrg)
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
	e = appendSourceBlock(e, &s.strs, begin.Unix(), end.Unix(), len(s.rows), func(i int, sr *SourceRollup) { s.rollup(&s.rows[i], sr) })
	return SourceEntries{n: len(s.rows), body: e}
}
