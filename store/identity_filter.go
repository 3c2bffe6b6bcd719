package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/maphash"
	"math/bits"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store/internal/bloom"
)

// The dedup identity of an aggregate report (API.md: organization name,
// report id and domain, whatever its dates) is the 16-byte hash at the end
// of its date index key, reportKey(domain, date_begin, identity). A report
// sent again with its dates is found there by one read. The same identity
// with other dates is rare (a reporter's bug or an edited copy), and is found
// by scanning the domain's keys; an in-memory filter of every stored identity
// answers "surely not stored" for almost every new report, so that scan runs
// only for the rare ones and for about one in ten thousand new reports.
//
// Schema 5 kept an index by identity instead. Report ids are random (Google's
// are large numbers), so each report's entry landed on its own page of that
// index: about 60 % of the pages a commit of small reports wrote, where
// every other index appends by date.

// identityBitsPerReport sizes the filter: with identityProbes bits set in
// one 512-bit block, about 1 in 10,000 absent identities looks present.
const (
	identityBitsPerReport = 24
	identityProbes        = 12
	// identityMinCapacity is the reports the first segment holds: 192 KiB.
	identityMinCapacity = 1 << 16
)

// identityFilter is a Bloom filter (package bloom, growing by segments) of
// the (domain id, identity hash) of every stored aggregate report. A
// report deleted leaves its bits: the filter only ever answers "maybe" for
// more than is stored, never less, and refreshIdentities rebuilds it from
// the file.
//
// Adds come from write transactions, before they commit; lookups from any
// transaction. A rolled-back add only costs a needless scan later.
type identityFilter struct {
	seed  maphash.Seed
	keys  *bloom.Growing
	scans atomic.Int64 // domain scans made after a "maybe" (tests, metrics)
}

func newIdentityFilter(expect int64) *identityFilter {
	return &identityFilter{seed: maphash.MakeSeed(),
		keys: bloom.NewGrowing(max(expect+expect/2, identityMinCapacity), identityBitsPerReport, identityProbes)}
}

// hashes derives the filter's two hashes of an identity from its hash
// (already uniform: a prefix of sha256) mixed with the domain id.
func (f *identityFilter) hashes(domainID, ident []byte) (uint64, uint64) {
	d := maphash.Bytes(f.seed, domainID)
	return binary.LittleEndian.Uint64(ident[:8]) ^ d, binary.LittleEndian.Uint64(ident[8:16]) ^ bits.RotateLeft64(d, 32)
}

// add records an identity (ident: reportKeyHashLen bytes).
func (f *identityFilter) add(domainID, ident []byte) { f.keys.Add(f.hashes(domainID, ident)) }

// mayContain reports whether the identity may be stored: false is certain.
func (f *identityFilter) mayContain(domainID, ident []byte) bool {
	return f.keys.Has(f.hashes(domainID, ident))
}

// identities returns the filter of stored identities. Open builds it for a
// writable store; a read-only one builds it at first use, from tx (nothing
// else writes the file meanwhile: bbolt's lock keeps writers out).
func (db *DB) identities(tx *bolt.Tx) *identityFilter {
	if f := db.idents.Load(); f != nil {
		return f
	}
	db.identsMu.Lock()
	defer db.identsMu.Unlock()
	if f := db.idents.Load(); f != nil {
		return f
	}
	f := buildIdentityFilter(tx)
	db.idents.Store(f)
	return f
}

// refreshIdentities rebuilds the filter when most of what it holds was
// deleted (retention), so its memory follows the reports kept. The
// rebuild holds the writer, about a second per 10 million reports, so that
// no commit adds an identity the new filter would miss; deciding whether
// to rebuild needs only a read.
func (db *DB) refreshIdentities() error {
	f := db.idents.Load()
	if f == nil {
		return nil
	}
	var stale bool
	err := db.bolt.View(func(tx *bolt.Tx) error {
		added, kept := f.keys.Len(), storedReports(tx)
		stale = added-kept > max(kept, identityMinCapacity)
		return nil
	})
	if err != nil || !stale {
		return err
	}
	tx, err := db.bolt.Begin(true)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	db.identScans.Add(f.scans.Load())
	db.idents.Store(buildIdentityFilter(tx))
	return nil
}

// storedReports returns how many aggregate reports the organizations' counts
// add up to.
func storedReports(tx *bolt.Tx) int64 {
	var n int64
	_ = tx.Bucket(bucketReportCounts).ForEach(func(_, v []byte) error {
		if len(v) == 8 {
			n += int64(binary.BigEndian.Uint64(v))
		}
		return nil
	})
	return n
}

// buildIdentityFilter reads every key of the date index into a new filter,
// sized from the organizations' report counts.
func buildIdentityFilter(tx *bolt.Tx) *identityFilter {
	f := newIdentityFilter(storedReports(tx))
	c := tx.Bucket(bucketReportsByDomain).Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if len(k) == reportKeyLen {
			f.add(k[:idLen], k[idLen+8:])
		}
	}
	return f
}

// storedReport returns the stored report with the identity of key, a
// reportKey, or nil when there is none; exact says the date index has an
// entry under key itself, with the same date_begin. A new report's
// identity is almost always one the filter has never seen, and then
// nothing is read. Otherwise the exact key is read first (a report sent
// again usually carries its dates), then the domain's keys. An index entry
// whose report is missing is passed over.
func (f *identityFilter) storedReport(tx *bolt.Tx, tables *tableCache, key []byte) (rep *Report, exact bool, err error) {
	domainID, ident := key[:idLen], key[idLen+8:]
	if !f.mayContain(domainID, ident) {
		return nil, false, nil
	}
	byDomain := tx.Bucket(bucketReportsByDomain)
	if v := byDomain.Get(key); v != nil {
		if rep, err := indexedReport(tx, tables, v); rep != nil || err != nil {
			return rep, true, err
		}
		exact = true
	}
	f.scans.Add(1)
	c := byDomain.Cursor()
	for k, v := c.Seek(domainID); k != nil && bytes.HasPrefix(k, domainID); k, v = c.Next() {
		if len(k) != reportKeyLen || !bytes.Equal(k[idLen+8:], ident) || bytes.Equal(k, key) {
			continue
		}
		if rep, err := indexedReport(tx, tables, v); rep != nil || err != nil {
			return rep, false, err
		}
	}
	return nil, exact, nil
}

// indexedReport returns the report of a date index value (report id |
// date_end), or nil when it is missing.
func indexedReport(tx *bolt.Tx, tables *tableCache, v []byte) (*Report, error) {
	id := indexedID(v)
	if id == "" {
		return nil, errorf(ErrInvalid, "malformed report index entry")
	}
	rep, _, err := getReport(tx, tables, id, false)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	return rep, err
}
