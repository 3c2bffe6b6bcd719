package reports

// The per-source roll-up of a report as it was before its rows and
// evidence were made compact (issue 25): the reference that
// TestSourcesMatchLegacy compares Sources with, byte for byte. Test code
// only; do not change it.

import (
	"cmp"
	"hash/maphash"
	"math/bits"
	"slices"
	"strings"
	"time"

	"github.com/dmarcd/dmarcd/store/internal/codec"
)

type legacySources struct {
	rows       []legacyRow
	auths      []Evidence
	summed     int
	perm       []int32
	tab        []int32
	strs       strTable
	spare      []legacyRow
	spareAuths []Evidence
	grp, first []int32
}

// legacyRow is one record's contribution to its source, or (once compacted)
// the sum of its source's records.
type legacyRow struct {
	ip                        string
	messages, pass, spf, dkim int64
	none, quarantine, reject  int64
	cc, asOrg                 string
	asn                       uint32
	hasCC, hasASN, hasASOrg   bool
	a0, a1                    int32
}

// Add counts one record. r may be reused afterwards: only its strings,
// which never change, are kept.
func (s *legacySources) Add(r *Record) {
	n := r.Count
	dkim, spf, _ := r.aligned()
	row := legacyRow{ip: r.SourceIP, messages: n, pass: ifPass(spf || dkim, n), spf: ifPass(spf, n), dkim: ifPass(dkim, n)}
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
		s.auths = legacyAddRecordEvidence(s.auths, row.a0, EvidenceDKIM, a.Domain, a.Result, n)
	}
	for i := range r.AuthResults.SPF {
		a := &r.AuthResults.SPF[i]
		s.auths = legacyAddRecordEvidence(s.auths, row.a0, EvidenceSPF, a.Domain, a.Result, n)
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
func (s *legacySources) Compact() {
	if s.summed == len(s.rows) {
		return
	}
	if !s.distinct() {
		s.sum()
	}
	s.summed = len(s.rows)
	if len(s.rows) > maxDraftSourceIPs {
		s.prune(keepDraftSourceIPs)
	}
}

// sum replaces the rows by one per source, in the order the sources first
// came. The rows are grouped by source with a hash table of the sources
// and a counting sort, which keeps each source's rows in the order they
// came (the first one's geolocation and auth order win), the summed row
// first.
func (s *legacySources) sum() {
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
func (s *legacySources) table(n int) []int32 {
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
func (s *legacySources) distinct() bool {
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

// legacyAddRecordEvidence counts the n messages of one record with one auth
// result in the evidence of its row, which starts at out[e0]: a domain
// the record names twice (two signatures) counts its messages once,
// passing when either result passed. An empty domain is no evidence.
func legacyAddRecordEvidence(out []Evidence, e0 int32, kind, domain, result string, n int64) []Evidence {
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

// sum adds o's counts into r (not its auth results, nor its geolocation
// when r has one).
func (r *legacyRow) sum(o *legacyRow) {
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
func (s *legacySources) prune(keep int) {
	// The sources are sorted in place and the auth results written into
	// the spare ones: a report of a million records from distinct sources
	// pruned a hundred times, and made three new slices of up to 16,000
	// rows each time.
	var other legacyRow
	n := len(s.rows)
	rest := s.rows[:0] // the rows but the other one, in place
	for _, r := range s.rows {
		if r.ip == OtherSources {
			other = r
		} else {
			rest = append(rest, r)
		}
	}
	slices.SortFunc(rest, func(a, b legacyRow) int {
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
func (s *legacySources) rollup(r *legacyRow, out *SourceRollup) {
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

// Counts returns the sources as the day roll-up counts them, at most
// maxDraftSources of them (those with the most messages, ties by IP),
// without the row of other sources. The rows must be summed. A slice, not
// a map: its readers only go through it. Its geolocation points into
// slices of its own, not into the rows, which the next report reuses (and
// which the day roll-up would keep alive otherwise).
func (s *legacySources) Counts() []IPCount {
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

// Encode encodes the sources as one block of segment entries, each seen
// from begin to end (see encodeSources). The rows must be summed.
func (s *legacySources) Encode(begin, end time.Time) SourceEntries {
	if len(s.rows) == 0 {
		return SourceEntries{}
	}
	e := make(codec.Enc, 0, 64+64*len(s.rows)) // about what an entry takes with two auth results
	e = append(e, segVersion)
	e = appendSourceBlock(e, &s.strs, begin.Unix(), end.Unix(), len(s.rows), func(i int, sr *SourceRollup) { s.rollup(&s.rows[i], sr) })
	return SourceEntries{n: len(s.rows), body: e}
}
