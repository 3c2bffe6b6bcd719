package store

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Per-source roll-ups: for each domain, UTC day (of a report's date_begin)
// and source IP, the counts the sources, senders and policy-advice views
// need, kept at ingest so that those views never scan records.
//
// Unlike the day roll-up (rollup.go), which caps its sources, these keep
// every source IP. A day of a busy domain may hold tens of thousands of
// them, too many to decode and re-encode on every commit, so a day is
// stored as segments: each commit appends one segment per domain and day it
// touched, holding only the sources of the reports it stored (key
// sourceSegKey(domain, day, seq)). Reading a day merges its segments. When
// a day has maxSourceSegments segments, the commit that would add one more
// merges them all into segment 0 instead, so a day never has more than
// that many and the work of merging is spread over that many commits.
//
// Each commit also queues the days it touched for reverse DNS
// (bucketRDNSPending), so the resolver job learns new source IPs without a
// change to the ingest path beyond this file.

// maxSourceSegments is how many segments one domain-day may have.
const maxSourceSegments = 32

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

// daySources is a domain-day's sources by IP, as segments are merged.
type daySources map[string]*SourceRollup

// sourceEntries is the per-source roll-up of one or more reports,
// encoded as a segment's blocks (appendSourceBlock). body starts with its
// version byte (segVersion), so that a domain-day with one report in a commit
// (as when reports arrive one by one) stores body as its segment without
// a copy.
type sourceEntries struct {
	n    int
	body []byte   // segVersion, then a block
	more [][]byte // the bodies of further reports of the same day
}

// sourceRollups gathers, during one commit, the encoded per-source
// roll-ups of the reports it stores, by domain and day. A day's segment
// is the entries of its reports back to back: a segment may hold a source
// more than once, and readers sum by IP. Drafts are only read: a commit
// that fails is retried with the same drafts.
type sourceRollups map[string]*sourceEntries // rollupKey -> entries

// newSourceRollups starts the per-source roll-ups of one commit.
func newSourceRollups() sourceRollups { return sourceRollups{} }

// addEntries adds a report's encoded sources to its domain's day; the
// bytes are only read.
func (sr sourceRollups) addEntries(domainID string, dayNum uint32, src sourceEntries) {
	if src.n == 0 {
		return
	}
	sr.addKeyed(string(rollupKey(domainID, dayNum)), src)
}

// addKeyed is addEntries for the day's rollupKey, which the commit has
// made already for the day roll-up.
func (sr sourceRollups) addKeyed(key string, src sourceEntries) {
	if src.n == 0 {
		return
	}
	if day := sr[key]; day != nil {
		day.n += src.n
		day.more = append(day.more, src.body)
		return
	}
	sr[key] = &sourceEntries{n: src.n, body: src.body}
}

// size is how many bytes the entries take.
func (s *sourceEntries) size() int {
	n := len(s.body)
	for _, b := range s.more {
		n += len(b)
	}
	return n
}

// frame returns the entries as a segment: the body itself when there is
// one report (the caller only reads it), else the bodies concatenated,
// each without its leading version byte but the first.
func (s *sourceEntries) frame() []byte {
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

// put writes one segment per domain-day touched (merging the day's
// segments when it has too many) and queues the days for reverse DNS.
func (sr sourceRollups) put(tx *bolt.Tx) error {
	if len(sr) == 0 {
		return nil
	}
	b := tx.Bucket(bucketSourceRollups)
	pending := tx.Bucket(bucketRDNSPending)
	// One touch sequence for every day of the commit: it only needs to
	// differ from what DonePendingSources compares with.
	n, err := pending.NextSequence()
	if err != nil {
		return err
	}
	touch := binary.BigEndian.AppendUint64(nil, n)
	for key, day := range sr {
		prefix := []byte(key)
		seq, err := nextSegment(b, prefix)
		if err != nil {
			return err
		}
		var seg []byte
		if seq >= maxSourceSegments {
			// The newer segments are merged alone while they hold less
			// than the first, as an LSM tree's levels are: a busy day's
			// big first segment is rewritten when the others have grown
			// as large, not every maxSourceSegments commits.
			from := uint32(0)
			if first := b.Get(sourceSegKey(prefix, 0)); first != nil && segmentBytes(b, prefix, 1)+day.size() < len(first) {
				from = 1
			}
			if seg, err = mergeSegments(b, prefix, from, day); err != nil {
				return err
			}
			seq = from
		} else {
			seg = day.frame()
		}
		if err := b.Put(sourceSegKey(prefix, seq), seg); err != nil {
			return err
		}
		if err := pending.Put(prefix, touch); err != nil {
			return err
		}
	}
	return nil
}

// mergeSegments deletes the segments of the day prefix from seq from on
// and returns one segment of their sources and the new entries, one entry
// per source.
func mergeSegments(b *bolt.Bucket, prefix []byte, from uint32, add *sourceEntries) ([]byte, error) {
	day := daySources{}
	merge := func(s *SourceRollup) {
		if g := day[s.SourceIP]; g != nil {
			g.Merge(s)
		} else {
			day[s.SourceIP] = s // decodeSourceSegment's to keep
		}
	}
	if err := eachSegment(b, prefix, from, merge); err != nil {
		return nil, err
	}
	if err := decodeSourceSegment(add.frame(), merge); err != nil {
		return nil, fmt.Errorf("new source roll-up entries: %w", err)
	}
	start := sourceSegKey(prefix, from)
	c := b.Cursor()
	for k, _ := c.Seek(start); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(start) {
		if err := c.Delete(); err != nil {
			return nil, err
		}
	}
	return appendSourceSegment(make(enc, 0, 64*len(day)), day), nil
}

// segmentBytes is the size of the day prefix's segments from seq from on.
func segmentBytes(b *bolt.Bucket, prefix []byte, from uint32) int {
	n := 0
	c := b.Cursor()
	for k, v := c.Seek(sourceSegKey(prefix, from)); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		n += len(v)
	}
	return n
}

// sourceSegKey is rollupKey(domain, day) | seq (big-endian).
func sourceSegKey(prefix []byte, seq uint32) []byte {
	return binary.BigEndian.AppendUint32(append(make([]byte, 0, len(prefix)+4), prefix...), seq)
}

// nextSegment returns the seq after the last segment of the day prefix.
func nextSegment(b *bolt.Bucket, prefix []byte) (uint32, error) {
	c := b.Cursor()
	k, _ := c.Seek(sourceSegKey(prefix, 0xffffffff))
	if k == nil {
		k, _ = c.Last()
	} else if bytes.HasPrefix(k, prefix) {
		return 0, fmt.Errorf("source roll-up segment %x: %w", k, errCorrupt)
	} else {
		k, _ = c.Prev()
	}
	if k == nil || !bytes.HasPrefix(k, prefix) {
		return 0, nil
	}
	if len(k) != len(prefix)+4 {
		return 0, fmt.Errorf("source roll-up key of length %d: %w", len(k), errCorrupt)
	}
	return binary.BigEndian.Uint32(k[len(prefix):]) + 1, nil
}

// A segment is its version and then blocks until its end: a block is
// the first and last seen times (Unix seconds, the second as a delta),
// the number of entries, and the entries, which share those times (see
// source_codec.go).

// appendBlockHeader starts a block of n entries seen from first to last.
func appendBlockHeader(e enc, first, last int64, n int) enc {
	return e.varint(first).varint(last - first).uvarint(uint64(n))
}

// appendSourceSegment encodes the sources of a segment, in blocks of the
// same first and last seen times, each in IP order.
func appendSourceSegment(e enc, day daySources) enc {
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

// decodeSourceSegment calls fn with each source of a segment; each call
// gets a new SourceRollup the caller may keep. Segments of the versions
// before segVersion are gone: the migration to schema 8 rebuilt them.
func decodeSourceSegment(raw []byte, fn func(*SourceRollup)) error {
	d := &dec{b: raw}
	if d.byte() != segVersion {
		return errCorrupt
	}
	for d.ok() && len(d.b) > 0 {
		if err := decodeSourceBlock(d, fn); err != nil {
			return err
		}
	}
	if !d.ok() {
		return errCorrupt
	}
	return nil
}

// eachSegment decodes the segments of the day prefix from seq from on.
func eachSegment(b *bolt.Bucket, prefix []byte, from uint32, fn func(*SourceRollup)) error {
	c := b.Cursor()
	for k, v := c.Seek(sourceSegKey(prefix, from)); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if err := decodeSourceSegment(v, fn); err != nil {
			return fmt.Errorf("source roll-up %x: %w", k, err)
		}
	}
	return nil
}

// EachSourceDay calls fn for every source of every UTC day from..to (both
// truncated to their UTC day, both included) of domain domainID of
// organization orgID, oldest day first; a source appears once per segment
// of a day or more (sum them by SourceIP). Days without a call had no report.
// Errors: ErrNotFound when the domain is not the organization's,
// ErrInvalid when to is before from or the range is longer than 366 days.
func (db *DB) EachSourceDay(orgID, domainID string, from, to time.Time, fn func(day time.Time, s *SourceRollup)) error {
	fromDay, toDay := dayNumber(from), dayNumber(to)
	if toDay < fromDay {
		return wrap("source roll-ups", errorf(ErrInvalid, "date_to is before date_from"))
	}
	if toDay-fromDay >= maxStatsDays {
		return wrap("source roll-ups", errorf(ErrInvalid, "date range is longer than %d days", maxStatsDays))
	}
	err := db.bolt.View(func(tx *bolt.Tx) error {
		if _, err := getOrgDomain(tx, orgID, domainID); err != nil {
			return err
		}
		prefix := []byte(domainID)
		c := tx.Bucket(bucketSourceRollups).Cursor()
		for k, v := c.Seek(rollupKey(domainID, fromDay)); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			if len(k) != len(prefix)+8 {
				return fmt.Errorf("source roll-up key of length %d: %w", len(k), errCorrupt)
			}
			day := binary.BigEndian.Uint32(k[len(prefix):])
			if day > toDay {
				break
			}
			t := dayTime(day)
			if err := decodeSourceSegment(v, func(s *SourceRollup) { fn(t, s) }); err != nil {
				return fmt.Errorf("source roll-up of domain %s day %d: %w", domainID, day, err)
			}
		}
		return nil
	})
	return wrap("source roll-ups", err)
}

// PendingSources is a batch of source IPs of the domain-days that ingest
// commits touched since they were last handled, for the reverse DNS job.
type PendingSources struct {
	IPs  []string          // deduplicated, sorted
	days map[string][]byte // day prefix -> the touch sequence read
}

// PendingSourceIPs returns the source IPs of up to maxDays domain-days
// queued for reverse DNS by ingest commits. Pass the batch to
// DonePendingSources once its IPs are handled; a day touched again in
// between stays queued.
func (db *DB) PendingSourceIPs(maxDays int) (*PendingSources, error) {
	p := &PendingSources{days: map[string][]byte{}}
	seen := map[string]bool{}
	err := db.bolt.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSourceRollups)
		c := tx.Bucket(bucketRDNSPending).Cursor()
		for k, v := c.First(); k != nil && len(p.days) < maxDays; k, v = c.Next() {
			p.days[string(k)] = bytes.Clone(v)
			if err := eachSegment(b, k, 0, func(s *SourceRollup) {
				if s.SourceIP != OtherSources && !seen[s.SourceIP] {
					seen[s.SourceIP] = true
					p.IPs = append(p.IPs, s.SourceIP)
				}
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrap("pending source ips", err)
	}
	slices.Sort(p.IPs)
	return p, nil
}

// DonePendingSources unqueues the days of p not touched since p was read.
func (db *DB) DonePendingSources(p *PendingSources) error {
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketRDNSPending)
		for k, seq := range p.days {
			if v := b.Get([]byte(k)); v != nil && bytes.Equal(v, seq) {
				if err := b.Delete([]byte(k)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	return wrap("done pending sources", err)
}

// deleteDomainSources deletes a domain's per-source roll-ups and its
// pending reverse DNS days; part of DeleteDomain's cascade.
func deleteDomainSources(tx *bolt.Tx, domainID string) error {
	if _, err := deletePrefix(tx.Bucket(bucketSourceRollups), []byte(domainID), -1); err != nil {
		return err
	}
	_, err := deletePrefix(tx.Bucket(bucketRDNSPending), []byte(domainID), -1)
	return err
}
