package store

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// failureBuckets are every bucket failure reports write to.
var failureBuckets = [][]byte{bucketFailures, bucketFailureHeaders, bucketFailuresByOrg,
	bucketFailuresByDomain, bucketFailureDedup, bucketFailureRollups}

// countFailureKeys returns how many keys each failure bucket holds.
func countFailureKeys(t *testing.T, db *DB) map[string]int {
	t.Helper()
	n := map[string]int{}
	err := db.bolt.View(func(tx *bolt.Tx) error {
		for _, b := range failureBuckets {
			n[string(b)] = tx.Bucket(b).Stats().KeyN
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func openFailureDB(t *testing.T) (*DB, string) {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "dmarcd.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	org, err := db.CreateOrganization("acme", PlanUnlimited)
	if err != nil {
		t.Fatal(err)
	}
	return db, org.ID
}

func internalFailure(t *testing.T, db *DB, orgID string, dom *Domain, arrival time.Time, ip string) *FailureDraft {
	t.Helper()
	f, err := NewFailureDraft(&FailureReportDetail{
		FailureReport: &FailureReport{DomainID: dom.ID, Domain: dom.Name, OrgID: orgID, ReceivedAt: arrival.Add(time.Hour),
			ArrivalDate: arrival, SourceIP: &ip, AuthFailure: []string{"dmarc"},
			Geo: &Geo{CountryCode: new("GB")}},
		Headers: []FailureHeader{{Name: "From", Value: "x@y"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestFailureDeletesLeaveNothing ensures retention and a domain's deletion
// leave no index entry, header, dedup entry or roll-up behind.
func TestFailureDeletesLeaveNothing(t *testing.T) {
	db, orgID := openFailureDB(t)
	dom := &Domain{OrgID: orgID, Name: "example.com", ReportingEmail: "a1@reports.test", DMARCRecord: "v=DMARC1; p=none"}
	other := &Domain{OrgID: orgID, Name: "example.org", ReportingEmail: "a2@reports.test", DMARCRecord: "v=DMARC1; p=none"}
	for _, d := range []*Domain{dom, other} {
		if err := db.CreateDomain(d); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var drafts []*FailureDraft
	for i := range 30 {
		d := dom
		if i%2 == 1 {
			d = other
		}
		drafts = append(drafts, internalFailure(t, db, orgID, d, t0.Add(time.Duration(i)*5*time.Hour), "192.0.2.7"))
	}
	if _, err := db.NewIngester().Commit(&IngestBatch{Failures: drafts}); err != nil {
		t.Fatal(err)
	}
	if n := countFailureKeys(t, db); n[string(bucketFailures)] != 30 || n[string(bucketFailureRollups)] == 0 {
		t.Fatalf("after the commit: %v", n)
	}
	if err := db.DeleteDomain(orgID, dom.ID); err != nil {
		t.Fatal(err)
	}
	if n := countFailureKeys(t, db); n[string(bucketFailures)] != 15 || n[string(bucketFailureHeaders)] != 15 ||
		n[string(bucketFailuresByOrg)] != 15 || n[string(bucketFailureDedup)] != 15 {
		t.Errorf("after deleting one domain: %v", n)
	}
	if _, err := db.DeleteFailureReportsBefore(t0.AddDate(1, 0, 0)); err != nil {
		t.Fatal(err)
	}
	for b, n := range countFailureKeys(t, db) {
		if n != 0 {
			t.Errorf("bucket %s keeps %d keys", b, n)
		}
	}
	if err := db.Check(); err != nil {
		t.Error(err)
	}
}

// TestFailureKeys ensures index keys sort by owner, then arrival date, then
// id, and that their parts read back.
func TestFailureKeys(t *testing.T) {
	owner, id := NewID(), NewID()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a, b := failTimeKey(owner, t0, id), failTimeKey(owner, t0.Add(time.Second), NewID())
	if bytes.Compare(a, b) >= 0 || failKeyID(a) != id || failKeyArrival(a) != uint64(t0.Unix()) {
		t.Errorf("keys %x %x", a, b)
	}
	if !bytes.HasPrefix(a, failTimePrefix(owner, t0)) {
		t.Error("a key does not start with its prefix")
	}
	k := failRollupKey(owner, 20000, id)
	if failRollupDay(k) != 20000 || failRollupDomain(k) != id || len(k) != failRollupKeyLen {
		t.Errorf("roll-up key %x", k)
	}
}
