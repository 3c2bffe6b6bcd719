package reports

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/dmarcd/dmarcd/store/internal/codec"
)

// maxSourceAuth is how many distinct (kind, domain, result) entries a
// source keeps per day; the rest count in the totals only.
const maxSourceAuth = 8

// AuthDomainCount counts a source's messages with one auth result: Kind
// "spf" (the SPF-checked domain, usually the envelope sender's) or "dkim"
// (the signing domain), the domain and its result as reported.
type AuthDomainCount struct {
	Kind     string `json:"kind"`
	Domain   string `json:"domain"`
	Result   string `json:"result"`
	Messages int64  `json:"messages"`
}

// SourceRollup is the mail of one source IP for one domain: on one day as
// stored, or summed over days by a reader. SPFAligned and DKIMAligned are
// the DMARC-evaluated (aligned) results; Auth the raw results with their
// domains, most messages first. FirstSeen is the earliest date_begin and
// LastSeen the latest date_end of the reports that carried the source.
type SourceRollup struct {
	SourceIP    string
	Messages    int64
	DMARCPass   int64
	SPFAligned  int64
	DKIMAligned int64
	Disposition DispositionCount
	FirstSeen   time.Time
	LastSeen    time.Time
	CountryCode *string
	ASN         *uint32
	ASOrg       *string
	Auth        []AuthDomainCount
}

// Merge adds o (the same source on another day or report) into s.
func (s *SourceRollup) Merge(o *SourceRollup) {
	s.Messages += o.Messages
	s.DMARCPass += o.DMARCPass
	s.SPFAligned += o.SPFAligned
	s.DKIMAligned += o.DKIMAligned
	s.Disposition.None += o.Disposition.None
	s.Disposition.Quarantine += o.Disposition.Quarantine
	s.Disposition.Reject += o.Disposition.Reject
	if s.FirstSeen.IsZero() || (!o.FirstSeen.IsZero() && o.FirstSeen.Before(s.FirstSeen)) {
		s.FirstSeen = o.FirstSeen
	}
	if o.LastSeen.After(s.LastSeen) {
		s.LastSeen = o.LastSeen
	}
	if s.CountryCode == nil {
		s.CountryCode = o.CountryCode
	}
	if s.ASN == nil {
		s.ASN, s.ASOrg = o.ASN, o.ASOrg
	}
	for _, a := range o.Auth {
		s.addAuth(a.Kind, a.Domain, a.Result, a.Messages)
	}
}

// addAuth counts n messages with one auth result, keeping at most
// maxSourceAuth distinct entries.
func (s *SourceRollup) addAuth(kind, domain, result string, n int64) {
	for i := range s.Auth {
		a := &s.Auth[i]
		if a.Kind == kind && a.Domain == domain && a.Result == result {
			a.Messages += n
			return
		}
	}
	if len(s.Auth) >= maxSourceAuth {
		return
	}
	s.Auth = append(s.Auth, AuthDomainCount{Kind: kind, Domain: domain, Result: result, Messages: n})
}

// maxDraftSourceIPs is how many distinct sources a report being ingested
// keeps in its per-source roll-up; past it the sources with the fewest
// messages are folded into one row without IP (SourceIP ""), down to
// keepDraftSourceIPs, so that a report of a million distinct sources
// needs bounded memory while every total stays exact.
const (
	maxDraftSourceIPs  = 16 << 10
	keepDraftSourceIPs = maxDraftSourceIPs / 2
)

// OtherSources is the SourceIP of the row that sums the sources a report
// with more than 16,384 distinct sources could not keep one by one.
const OtherSources = ""

// DaySources is a domain-day's sources by IP, as segments are merged.
type DaySources map[string]*SourceRollup

// Add merges s into the source of its IP; the first one of an IP is kept
// (DecodeSourceSegment hands out new ones).
func (d DaySources) Add(s *SourceRollup) {
	if g := d[s.SourceIP]; g != nil {
		g.Merge(s)
	} else {
		d[s.SourceIP] = s
	}
}

// SourceEntries is the per-source roll-up of one or more reports,
// encoded as a segment's blocks (appendBlockV2). body starts with its
// version byte (segV2), so that a domain-day with one report in a commit
// (as when reports arrive one by one) stores body as its segment without
// a copy.
type SourceEntries struct {
	n    int
	body []byte   // segV2, then a block
	more [][]byte // the bodies of further reports of the same day
}

// Len returns how many entries there are.
func (s *SourceEntries) Len() int { return s.n }

// Append adds the entries of o, whose bytes are only read (a commit that
// fails is retried with the same drafts).
func (s *SourceEntries) Append(o SourceEntries) {
	if o.n == 0 {
		return
	}
	if s.n == 0 {
		s.body = o.body
	} else {
		s.more = append(s.more, o.body)
	}
	s.n += o.n
	s.more = append(s.more, o.more...)
}

// Size is how many bytes the entries take.
func (s *SourceEntries) Size() int {
	n := len(s.body)
	for _, b := range s.more {
		n += len(b)
	}
	return n
}

// Frame returns the entries as a segment: the body itself when there is
// one report (the caller only reads it), else the bodies concatenated,
// each without its leading version byte but the first.
func (s *SourceEntries) Frame() []byte {
	if len(s.more) == 0 {
		return s.body
	}
	size := len(s.body)
	for _, b := range s.more {
		size += len(b) - 1
	}
	seg := append(make([]byte, 0, size), s.body...)
	for _, b := range s.more {
		seg = append(seg, b[1:]...)
	}
	return seg
}

// A segment is its version and then blocks until its end: a block is
// the first and last seen times (Unix seconds, the second as a delta),
// the number of entries, and the entries, which share those times (see
// source_codec.go for version 2, which every segment is written in now;
// version 1, codecVersion, is still read).

// appendBlockHeader starts a block of n entries seen from first to last.
func appendBlockHeader(e codec.Enc, first, last int64, n int) codec.Enc {
	return e.Varint(first).Varint(last - first).Uvarint(uint64(n))
}

// AppendSourceSegment encodes the sources of a segment, in blocks of the
// same first and last seen times, each in IP order.
func AppendSourceSegment(e codec.Enc, day DaySources) codec.Enc {
	srcs := make([]*SourceRollup, 0, len(day))
	for _, s := range day {
		srcs = append(srcs, s)
	}
	slices.SortFunc(srcs, func(a, b *SourceRollup) int {
		return cmp.Or(a.FirstSeen.Compare(b.FirstSeen), a.LastSeen.Compare(b.LastSeen), strings.Compare(a.SourceIP, b.SourceIP))
	})
	e = append(e, segV2)
	var t strTable
	for len(srcs) > 0 {
		n := 1
		for n < len(srcs) && srcs[n].FirstSeen.Equal(srcs[0].FirstSeen) && srcs[n].LastSeen.Equal(srcs[0].LastSeen) {
			n++
		}
		block := srcs[:n]
		e = appendBlockV2(e, &t, srcs[0].FirstSeen.Unix(), srcs[0].LastSeen.Unix(), n, func(i int, s *SourceRollup) { *s = *block[i] })
		srcs = srcs[n:]
	}
	return e
}

// DecodeSourceSegment calls fn with each source of a segment; each call
// gets a new SourceRollup the caller may keep.
func DecodeSourceSegment(raw []byte, fn func(*SourceRollup)) error {
	d := codec.NewDec(raw)
	switch d.Byte() {
	case segV2:
		for d.Ok() && d.Len() > 0 {
			if err := decodeBlockV2(&d, fn); err != nil {
				return err
			}
		}
		if !d.Ok() {
			return errCorrupt
		}
		return nil
	case codecVersion:
	default:
		return errCorrupt
	}
	for d.Ok() && d.Len() > 0 {
		f := d.Varint()
		first, last := time.Unix(f, 0).UTC(), time.Unix(f+d.Varint(), 0).UTC()
		n := d.Count()
		for range n {
			s := &SourceRollup{SourceIP: d.Str(), Messages: d.Varint(), DMARCPass: d.Varint(),
				SPFAligned: d.Varint(), DKIMAligned: d.Varint(), FirstSeen: first, LastSeen: last}
			s.Disposition = DispositionCount{None: d.Varint(), Quarantine: d.Varint(), Reject: d.Varint()}
			s.CountryCode, s.ASN, s.ASOrg = d.Opt(), d.OptU32(), d.Opt()
			na := d.Count()
			if na > maxSourceAuth {
				return errCorrupt
			}
			if na > 0 {
				s.Auth = make([]AuthDomainCount, na)
				for i := range s.Auth {
					s.Auth[i] = AuthDomainCount{Kind: d.Sym(), Domain: d.Str(), Result: d.Sym(), Messages: d.Varint()}
				}
			}
			if !d.Ok() {
				return errCorrupt
			}
			fn(s)
		}
	}
	if !d.Ok() {
		return errCorrupt
	}
	return nil
}
