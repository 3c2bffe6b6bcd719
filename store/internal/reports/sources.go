package reports

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/dmarcd/dmarcd/store/internal/codec"
)

// maxSourceEvidence is how many distinct (kind, domain) entries of
// evidence a source keeps per day and per window read: a source mostly has
// two to four. Past it, a domain with more messages than the entry with the
// fewest takes that entry's place (addEvidence).
const maxSourceEvidence = 8

// Kinds of Evidence.
const (
	EvidenceDKIM = "dkim" // the d= domain of a DKIM signature
	EvidenceSPF  = "spf"  // the domain SPF checked: the MAIL FROM's (or HELO's)
)

// Evidence counts the messages of a source that carried one domain in one
// kind of authentication result (EvidenceDKIM or EvidenceSPF): Messages
// had it, Pass of them passed for it (a message signed twice by the domain
// counts once, passing when either signature did). Domain is in lower
// case. A verified signature or a passing SPF result names who sent the
// mail; a failing one names nobody (anyone can claim a domain).
type Evidence struct {
	Kind     string
	Domain   string
	Messages int64
	Pass     int64
}

// SourceRollup is the mail of one source IP for one domain: on one day as
// stored, or summed over days by a reader. SPFAligned and DKIMAligned are
// the DMARC-evaluated (aligned) results; Evidence the domains of the raw
// auth results with their counts. FirstSeen is the earliest date_begin and
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
	Evidence    []Evidence
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
	for _, e := range o.Evidence {
		s.Evidence = addEvidence(s.Evidence, 0, e)
	}
}

// addEvidence counts e in the evidence that starts at out[e0] (the
// messages of another record or day add up), keeping at most
// maxSourceEvidence entries: past them e takes the place of the entry
// with the fewest messages when it has more.
func addEvidence(out []Evidence, e0 int32, e Evidence) []Evidence {
	have := out[e0:]
	least := -1
	for i := range have {
		h := &have[i]
		if h.Kind == e.Kind && h.Domain == e.Domain {
			h.Messages += e.Messages
			h.Pass += e.Pass
			return out
		}
		if least < 0 || h.Messages < have[least].Messages {
			least = i
		}
	}
	switch {
	case len(have) < maxSourceEvidence:
		out = append(out, e)
	case e.Messages > have[least].Messages:
		have[least] = e
	}
	return out
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
// encoded as a segment's blocks (appendSourceBlock). body starts with its
// version byte (segVersion), so that a domain-day with one report in a commit
// (as when reports arrive one by one) stores body as its segment without
// a copy.
type SourceEntries struct {
	n    int
	body []byte   // segVersion, then a block
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
// source_codec.go).

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
	e = append(e, segVersion)
	var t strTable
	for len(srcs) > 0 {
		n := 1
		for n < len(srcs) && srcs[n].FirstSeen.Equal(srcs[0].FirstSeen) && srcs[n].LastSeen.Equal(srcs[0].LastSeen) {
			n++
		}
		block := srcs[:n]
		e = appendSourceBlock(e, &t, srcs[0].FirstSeen.Unix(), srcs[0].LastSeen.Unix(), n, func(i int, s *SourceRollup) { *s = *block[i] })
		srcs = srcs[n:]
	}
	return e
}

// DecodeSourceSegment calls fn with each source of a segment, plain
// (segVersion) or sealed (sealedSegVersion); each call gets a new
// SourceRollup the caller may keep. Segments of the versions before
// segVersion are gone: the migration to schema 8 rebuilt them.
func DecodeSourceSegment(raw []byte, fn func(*SourceRollup)) error {
	d := codec.NewDec(raw)
	switch d.Byte() {
	case segVersion:
	case sealedSegVersion:
		payload, err := openZstd(raw[1:])
		if err != nil {
			return err
		}
		return decodeSourceColumns(payload, fn)
	default:
		return errCorrupt
	}
	for d.Ok() && d.Len() > 0 {
		if err := decodeSourceBlock(&d, fn); err != nil {
			return err
		}
	}
	if !d.Ok() {
		return errCorrupt
	}
	return nil
}
