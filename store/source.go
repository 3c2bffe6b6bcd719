package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store/internal/codec"
	"github.com/dmarcd/dmarcd/store/internal/days"
	"github.com/dmarcd/dmarcd/store/internal/reports"
)

// Per-source roll-ups: for each domain, UTC day (of a report's date_begin)
// and source IP, the counts the sources, senders and policy-advice views
// need, kept at ingest so that those views never scan records.
//
// Unlike the day roll-up (reports.DayRollup), which caps its sources, these keep
// every source IP. A day of a busy domain may hold tens of thousands of
// them, too many to decode and re-encode on every commit, so a day is
// stored as segments: each commit appends one segment per domain and day it
// touched, holding only the sources of the reports it stored (key
// sourceSegKey(domain, day, seq)). Reading a day merges its segments. When
// a day has maxSourceSegments segments, the commit that would add one more
// merges them all into segment 0 instead, so a day never has more than
// that many and the work of merging is spread over that many commits.
// Once the day is closed, the seal job rewrites its segments as one
// compressed segment 0 (rollup_seal.go); a later commit adds plain ones
// after it, and a merge writes segment 0 back plain until the next seal.
//
// Each commit also queues the days it touched for reverse DNS
// (bucketRDNSPending), so the resolver job learns new source IPs without a
// change to the ingest path beyond this file.

// maxSourceSegments is how many segments one domain-day may have.
const maxSourceSegments = 32

// sourceRollups gathers, during one commit, the encoded per-source
// roll-ups of the reports it stores, by domain and day. A day's segment
// is the entries of its reports back to back: a segment may hold a source
// more than once, and readers sum by IP. Drafts are only read: a commit
// that fails is retried with the same drafts.
type sourceRollups map[string]*reports.SourceEntries // rollupKey -> entries

// newSourceRollups starts the per-source roll-ups of one commit.
func newSourceRollups() sourceRollups { return sourceRollups{} }

// addEntries adds a report's encoded sources to its domain's day; the
// bytes are only read.
func (sr sourceRollups) addEntries(domainID string, dayNum uint32, src reports.SourceEntries) {
	if src.Len() == 0 {
		return
	}
	sr.addKeyed(string(rollupKey(domainID, dayNum)), src)
}

// addKeyed is addEntries for the day's rollupKey, which the commit has
// made already for the day roll-up.
func (sr sourceRollups) addKeyed(key string, src reports.SourceEntries) {
	if src.Len() == 0 {
		return
	}
	day := sr[key]
	if day == nil {
		day = &reports.SourceEntries{}
		sr[key] = day
	}
	day.Append(src)
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
			if first := b.Get(sourceSegKey(prefix, 0)); first != nil && segmentBytes(b, prefix, 1)+day.Size() < len(first) {
				from = 1
			}
			if seg, err = mergeSegments(b, prefix, from, day); err != nil {
				return err
			}
			seq = from
		} else {
			seg = day.Frame()
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
func mergeSegments(b *bolt.Bucket, prefix []byte, from uint32, add *reports.SourceEntries) ([]byte, error) {
	day := reports.DaySources{}
	if err := eachSegment(b, prefix, from, day.Add); err != nil {
		return nil, err
	}
	if err := reports.DecodeSourceSegment(add.Frame(), day.Add); err != nil {
		return nil, fmt.Errorf("new source roll-up entries: %w", err)
	}
	start := sourceSegKey(prefix, from)
	c := b.Cursor()
	for k, _ := c.Seek(start); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(start) {
		if err := c.Delete(); err != nil {
			return nil, err
		}
	}
	return reports.AppendSourceSegment(make(codec.Enc, 0, 64*len(day)), day), nil
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

// eachSegment decodes the segments of the day prefix from seq from on.
func eachSegment(b *bolt.Bucket, prefix []byte, from uint32, fn func(*SourceRollup)) error {
	c := b.Cursor()
	for k, v := c.Seek(sourceSegKey(prefix, from)); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if err := reports.DecodeSourceSegment(v, fn); err != nil {
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
// ErrRangeReversed or ErrRangeTooLong (ErrInvalid both) as DomainStatistics.
func (db *DB) EachSourceDay(orgID, domainID string, from, to time.Time, fn func(day time.Time, s *SourceRollup)) error {
	fromDay, toDay, err := statsDays(from, to)
	if err != nil {
		return err
	}
	err = db.bolt.View(func(tx *bolt.Tx) error {
		if _, err := getOrgDomain(tx, orgID, domainID); err != nil {
			return err
		}
		// Keys: domain | day | segment seq.
		return days.Scan(tx.Bucket(bucketSourceRollups).Cursor(), []byte(domainID), 4, fromDay, toDay, func(day uint32, _, v []byte) error {
			t := days.Start(day)
			if err := reports.DecodeSourceSegment(v, func(s *SourceRollup) { fn(t, s) }); err != nil {
				return fmt.Errorf("source roll-up of domain %s day %d: %w", domainID, day, err)
			}
			return nil
		})
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

// The per-source roll-ups are package reports' values.
type (
	// Evidence counts the messages of a source that carried one domain in
	// one kind of authentication result, and how many passed for it.
	Evidence = reports.Evidence
	// SourceRollup is the mail of one source IP for one domain.
	SourceRollup = reports.SourceRollup
)

// Kinds of Evidence.
const (
	EvidenceDKIM = reports.EvidenceDKIM // the d= domain of a DKIM signature
	EvidenceSPF  = reports.EvidenceSPF  // the domain SPF checked: the MAIL FROM's (or HELO's)
)

// OtherSources is the SourceIP of the row that sums the sources a report
// with more than 16,384 distinct sources could not keep one by one.
const OtherSources = reports.OtherSources

// FirstSourceDay returns the UTC day of domain id's oldest per-source
// roll-up (the first day of its reports still kept), and false when it has
// none. One seek: cheap for every domain every hour.
func (db *DB) FirstSourceDay(domainID string) (time.Time, bool, error) {
	var day time.Time
	found := false
	err := db.bolt.View(func(tx *bolt.Tx) error {
		prefix := []byte(domainID)
		k, _ := tx.Bucket(bucketSourceRollups).Cursor().Seek(prefix)
		if k == nil || !bytes.HasPrefix(k, prefix) {
			return nil
		}
		if len(k) != len(prefix)+8 {
			return fmt.Errorf("source roll-up key of length %d: %w", len(k), errCorrupt)
		}
		day, found = days.Start(binary.BigEndian.Uint32(k[len(prefix):])), true
		return nil
	})
	if err != nil {
		return time.Time{}, false, wrap("first source day", err)
	}
	return day, found, nil
}
