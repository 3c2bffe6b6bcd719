package store

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store/internal/bloom"
)

// identityOf returns a (domain id, identity hash) pair that differs with i.
func identityOf(domainID string, i int) ([]byte, []byte) {
	h := sha256.Sum256(binary.BigEndian.AppendUint64(nil, uint64(i)))
	return []byte(domainID), h[:reportKeyHashLen]
}

// TestIdentityFilterNeverForgets ensures every identity added is found,
// across the segments added as the filter grows, and that few identities
// never added look present.
func TestIdentityFilterNeverForgets(t *testing.T) {
	f := newIdentityFilter(0)
	dom := NewID()
	const n = 3*identityMinCapacity + 1000 // three segments
	for i := range n {
		f.add(identityOf(dom, i))
	}
	if first := bloom.New(identityMinCapacity, identityBitsPerReport, identityProbes).Bytes(); f.keys.Bytes() <= first {
		t.Fatalf("%d identities in %d bytes; the filter did not grow", n, f.keys.Bytes())
	}
	if got := f.keys.Len(); got != n {
		t.Errorf("Len() = %d, want %d", got, n)
	}
	for i := range n {
		if !f.mayContain(identityOf(dom, i)) {
			t.Fatalf("identity %d added and not found", i)
		}
	}
	// The same identities under another domain, and new ones: absent.
	other, falsePos := NewID(), 0
	const probes = 200_000
	for i := range probes {
		if f.mayContain(identityOf(other, i)) {
			falsePos++
		}
		if f.mayContain(identityOf(dom, n+i)) {
			falsePos++
		}
	}
	// Sized for about 1 in 10,000 per segment, with a few segments.
	if rate := float64(falsePos) / (2 * probes); rate > 1e-3 {
		t.Errorf("false positive rate %.5f (%d of %d), want under 0.001", rate, falsePos, 2*probes)
	}
	t.Logf("%d identities in %d KiB: %d false positives in %d probes", n, f.keys.Bytes()/1024, falsePos, 2*probes)
}

// identityDB opens a store with a domain and returns a function that
// commits a one-record report of reporter org with report id id and
// date_begin begin.
func identityDB(t *testing.T) (*DB, *Domain, func(org, id string, begin time.Time) ReportOutcome) {
	t.Helper()
	db, dom := openDomainDB(t)
	return db, dom, func(org, id string, begin time.Time) ReportOutcome {
		t.Helper()
		return commitIdentity(t, db, dom, org, id, begin)
	}
}

func commitIdentity(t *testing.T, db *DB, dom *Domain, org, id string, begin time.Time) ReportOutcome {
	t.Helper()
	d, err := db.NewReportDraft(Report{DomainID: dom.ID, OrgID: dom.OrgID, Domain: dom.Name, OrgName: org,
		ExternalReportID: id, DateBegin: begin, DateEnd: begin.Add(24 * time.Hour), ReceivedAt: begin.Add(25 * time.Hour),
		PolicyPublished: PolicyPublished{Domain: dom.Name, P: "none", PCT: 100, ADKIM: "r", ASPF: "r"}})
	if err != nil {
		t.Fatal(err)
	}
	d.Add(&Record{SourceIP: "192.0.2.1", Count: 1, Disposition: "none", DKIM: "pass", SPF: "pass", HeaderFrom: dom.Name})
	d.Finish()
	outs, err := db.NewIngester().Commit(&IngestBatch{Reports: []*ReportDraft{d}})
	if err != nil {
		t.Fatal(err)
	}
	return outs[0]
}

// saturate makes every identity look stored, so that each dedup check
// scans the domain's keys: a filter that probes no bit answers "maybe"
// for everything.
func saturate(f *identityFilter) { f.keys = bloom.NewGrowing(1, identityBitsPerReport, 0) }

// TestDedupWhenTheFilterSaysMaybe ensures the answer does not depend on the
// filter: with every bit set, new reports are still stored and a report
// sent again with other dates is still found, by the scan.
func TestDedupWhenTheFilterSaysMaybe(t *testing.T) {
	db, dom, commit := identityDB(t)
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i := range 20 {
		if out := commit("google.com", fmt.Sprint("r-", i), day.AddDate(0, 0, i)); !out.Stored {
			t.Fatalf("report %d: %+v", i, out)
		}
	}
	f := db.idents.Load()
	saturate(f)
	before := f.scans.Load()
	if out := commit("google.com", "r-new", day); !out.Stored {
		t.Fatalf("a new report taken for a duplicate when the filter says maybe: %+v", out)
	}
	out := commit("google.com", "r-7", day.AddDate(0, 1, 0))
	if out.Stored || out.Duplicate == nil || !out.Duplicate.DateBegin.Equal(day.AddDate(0, 0, 7)) {
		t.Fatalf("r-7 sent again with other dates: %+v", out)
	}
	if f.scans.Load()-before != 2 {
		t.Errorf("%d scans, want 2 (one per check the exact key did not answer)", f.scans.Load()-before)
	}
	d, err := db.NewReportDraft(Report{DomainID: dom.ID, OrgID: dom.OrgID, OrgName: "google.com", ExternalReportID: "r-3",
		DateBegin: day.AddDate(1, 0, 0), ReceivedAt: day})
	if err != nil {
		t.Fatal(err)
	}
	if dup, err := findDuplicate(db, d); err != nil || dup == nil || dup.ExternalReportID != "r-3" {
		t.Errorf("FindDuplicate of r-3 with other dates: %+v, %v", dup, err)
	}
}

// TestDedupWithoutTheFilterScan ensures a filter that says "surely not"
// spares the scan, and that a new report's own identity is seen by the
// next commit's check before any scan is needed.
func TestDedupWithoutTheFilterScan(t *testing.T) {
	db, _, commit := identityDB(t)
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	f := db.idents.Load()
	for i := range 50 {
		if out := commit("google.com", fmt.Sprint("r-", i), day); !out.Stored {
			t.Fatalf("report %d: %+v", i, out)
		}
	}
	// Same dates: found by the exact key, no scan.
	if out := commit("google.com", "r-3", day); out.Duplicate == nil {
		t.Fatalf("r-3 sent again: %+v", out)
	}
	if n := f.scans.Load(); n > 1 {
		t.Errorf("%d scans for 50 new reports and one sent again with its dates; want at most a rare false positive", n)
	}
	// Other dates: the filter says maybe, the scan finds it.
	if out := commit("google.com", "r-3", day.AddDate(0, 0, 1)); out.Duplicate == nil {
		t.Fatalf("r-3 sent again with other dates: %+v", out)
	}
}

// TestIdentityFilterRebuiltOnOpen ensures the identities stored before a
// restart are found after it, with other dates (the filter is not in the
// file).
func TestIdentityFilterRebuiltOnOpen(t *testing.T) {
	db, dom, commit := identityDB(t)
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i := range 10 {
		commit("google.com", fmt.Sprint("r-", i), day)
	}
	path := db.bolt.Path()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got := db.idents.Load().keys.Len(); got != 10 {
		t.Errorf("the reopened filter holds %d identities, want 10", got)
	}
	if out := commitIdentity(t, db, dom, "google.com", "r-4", day.AddDate(0, 0, 3)); out.Duplicate == nil {
		t.Fatalf("after a restart, r-4 with other dates: %+v", out)
	}
	// Read-only: built at first use.
	path = db.bolt.Path()
	_ = db.Close()
	ro, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	d, err := db.NewReportDraft(Report{DomainID: dom.ID, OrgID: dom.OrgID, OrgName: "google.com", ExternalReportID: "r-9",
		DateBegin: day.AddDate(0, 2, 0), ReceivedAt: day})
	if err != nil {
		t.Fatal(err)
	}
	if dup, err := findDuplicate(ro, d); err != nil || dup == nil {
		t.Errorf("read-only FindDuplicate of r-9 with other dates: %+v, %v", dup, err)
	}
}

// TestDedupPassesOverAnOrphanEntry ensures a date index entry whose report
// is missing (a damaged file) does not stand for a stored report: the
// report is stored, and its own entry answers the next check.
func TestDedupPassesOverAnOrphanEntry(t *testing.T) {
	db, dom, commit := identityDB(t)
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	orphan := reportKey(dom.ID, day, "google.com", "r-1")
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		db.identities(tx).add(orphan[:idLen], orphan[idLen+8:])
		return tx.Bucket(bucketReportsByDomain).Put(orphan, binary.BigEndian.AppendUint64([]byte(NewID()), 0))
	})
	if err != nil {
		t.Fatal(err)
	}
	if out := commit("google.com", "r-1", day.AddDate(0, 0, 2)); !out.Stored {
		t.Fatalf("an orphan entry was taken for a stored report: %+v", out)
	}
	if out := commit("google.com", "r-1", day.AddDate(0, 0, 5)); out.Duplicate == nil || !out.Duplicate.DateBegin.Equal(day.AddDate(0, 0, 2)) {
		t.Fatalf("r-1 sent a third time: %+v", out)
	}
	// Under the orphan's own key: the exact read finds the orphan, the
	// scan goes on to the stored one.
	if out := commit("google.com", "r-1", day); out.Duplicate == nil || !out.Duplicate.DateBegin.Equal(day.AddDate(0, 0, 2)) {
		t.Fatalf("r-1 under the orphan's own key: %+v", out)
	}
}

// TestIdentityFilterFollowsRetention ensures the filter is rebuilt once
// retention deleted most of what it holds, and still finds what is kept.
func TestIdentityFilterFollowsRetention(t *testing.T) {
	db, dom := openDomainDB(t)
	old := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	keep := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	// Many identities, added straight to the filter: committing
	// identityMinCapacity reports one at a time would take minutes.
	f := db.idents.Load()
	for i := range 2*identityMinCapacity + 10 {
		f.add(identityOf(dom.ID, i))
	}
	commitIdentity(t, db, dom, "google.com", "old", old)
	commitIdentity(t, db, dom, "google.com", "kept", keep)
	n, err := db.DeleteReportsBefore(keep.AddDate(0, -1, 0))
	if err != nil || n != 1 {
		t.Fatalf("DeleteReportsBefore: %d, %v", n, err)
	}
	g := db.idents.Load()
	if g == f || g.keys.Len() != 1 {
		t.Fatalf("after retention the filter holds %d identities (rebuilt: %v), want 1", g.keys.Len(), g != f)
	}
	if out := commitIdentity(t, db, dom, "google.com", "kept", keep.AddDate(0, 0, 1)); out.Duplicate == nil {
		t.Errorf("kept report with other dates after the rebuild: %+v", out)
	}
	if out := commitIdentity(t, db, dom, "google.com", "old", old.AddDate(1, 0, 0)); !out.Stored {
		t.Errorf("a deleted report's identity still blocks: %+v", out)
	}
}

// TestMigrationDropsIdentityIndex ensures a schema 5 file loses its dedup
// index on open, and its reports are still found by identity.
func TestMigrationDropsIdentityIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v5.db")
	db, err := open(path, nil, migrations[:5])
	if err != nil {
		t.Fatal(err)
	}
	org, err := db.CreateOrganization("acme", PlanUnlimited)
	if err != nil {
		t.Fatal(err)
	}
	dom := &Domain{OrgID: org.ID, Name: "example.com", ReportingEmail: "r@reports.test", DMARCRecord: "v=DMARC1; p=none"}
	if err := db.CreateDomain(dom); err != nil {
		t.Fatal(err)
	}
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	commitIdentity(t, db, dom, "google.com", "r-1", day)
	err = db.bolt.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket(bucketReportsByIdentity)
		if err != nil {
			return err
		}
		return b.Put([]byte("schema 5 entry"), []byte("x"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := SchemaVersionOf(db); err != nil || v != 5 {
		t.Fatalf("schema %d, %v; want 5", v, err)
	}
	_ = db.Close()

	db, err = Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, err := SchemaVersionOf(db); err != nil || v != SchemaVersion {
		t.Fatalf("schema %d, %v; want %d", v, err, SchemaVersion)
	}
	_ = db.bolt.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketReportsByIdentity) != nil {
			t.Error("the schema 5 dedup index is still there")
		}
		return nil
	})
	if out := commitIdentity(t, db, dom, "google.com", "r-1", day.AddDate(0, 0, 1)); out.Duplicate == nil {
		t.Errorf("a schema 5 report sent again with other dates: %+v", out)
	}
}

// BenchmarkBuildIdentityFilter measures what Open spends building the
// filter of a store of a million aggregate reports (keys of the date
// index, written directly).
func BenchmarkBuildIdentityFilter(b *testing.B) {
	db, err := Open(filepath.Join(b.TempDir(), "x.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	const reports, domains = 1_000_000, 1000
	doms := make([]string, domains)
	for i := range doms {
		doms[i] = NewID()
	}
	day := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	err = db.bolt.Update(func(tx *bolt.Tx) error { return addOrgReportCount(tx, NewID(), reports) })
	if err != nil {
		b.Fatal(err)
	}
	for start := 0; start < reports; start += 100_000 {
		err := db.bolt.Update(func(tx *bolt.Tx) error {
			byDomain := tx.Bucket(bucketReportsByDomain)
			for i := start; i < start+100_000; i++ {
				k := reportKey(doms[i%domains], day.AddDate(0, 0, i/domains%365), "google.com", fmt.Sprint(i))
				if err := byDomain.Put(k, binary.BigEndian.AppendUint64([]byte(NewID()), 0)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		var f *identityFilter
		_ = db.bolt.View(func(tx *bolt.Tx) error {
			f = buildIdentityFilter(tx)
			return nil
		})
		if f.keys.Len() != reports {
			b.Fatalf("%d identities, want %d", f.keys.Len(), reports)
		}
		b.ReportMetric(float64(f.keys.Bytes())/reports, "filter-B/report")
	}
}

// findDuplicate is the dedup check of ingest: Lookup.FindDuplicate in a
// lookup of its own.
func findDuplicate(db *DB, d *ReportDraft) (*Report, error) {
	var dup *Report
	err := db.Lookup(func(l *Lookup) error {
		var err error
		dup, err = l.FindDuplicate(d)
		return err
	})
	return dup, err
}
