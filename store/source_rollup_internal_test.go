package store

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store/internal/days"
)

// TestCommitLeavesDraftSourcesAlone ensures committing reports of one day
// does not change the drafts' encoded sources: the pipeline commits the
// same drafts again, one by one, when a group fails.
func TestCommitLeavesDraftSourcesAlone(t *testing.T) {
	db, dom := openDomainDB(t)
	day := time.Date(2026, 11, 5, 0, 0, 0, 0, time.UTC)
	var drafts []*ReportDraft
	var before [][]byte
	for i := range 3 {
		d, err := db.NewReportDraft(Report{DomainID: dom.ID, Domain: dom.Name, OrgID: dom.OrgID, OrgName: "google.com",
			ExternalReportID: fmt.Sprint(i), DateBegin: day, DateEnd: day.Add(time.Hour), ReceivedAt: day})
		if err != nil {
			t.Fatal(err)
		}
		for j := range 10 {
			d.Add(&Record{SourceIP: fmt.Sprintf("192.0.2.%d", j), Count: 1, DKIM: "pass",
				AuthResults: AuthResults{DKIM: []DKIMAuth{{Domain: "example.com", Result: "pass"}}}})
		}
		d.Finish()
		drafts = append(drafts, d)
		before = append(before, bytes.Clone(d.srcEnc.Frame()))
	}
	if _, err := db.NewIngester().Commit(&IngestBatch{Reports: drafts}); err != nil {
		t.Fatal(err)
	}
	for i, d := range drafts {
		if !bytes.Equal(d.srcEnc.Frame(), before[i]) || d.srcEnc.Len() != 10 {
			t.Errorf("draft %d's sources changed by the commit", i)
		}
	}
}

// TestSourceSegmentsMergeInLevels commits a day's reports one commit
// each, as a server receives them: the day never holds more than
// maxSourceSegments segments, its sources always sum to what was stored,
// and the big first segment is not rewritten by every merge.
func TestSourceSegmentsMergeInLevels(t *testing.T) {
	db, dom := openDomainDB(t)
	day := time.Date(2026, 11, 5, 0, 0, 0, 0, time.UTC)
	prefix := rollupKey(dom.ID, days.Of(day))
	in := db.NewIngester()
	want := map[string]int64{}
	var firstKept, merges, prevSegs int
	var first []byte
	for i := range 400 {
		d, err := db.NewReportDraft(Report{DomainID: dom.ID, Domain: dom.Name, OrgID: dom.OrgID, OrgName: "google.com",
			ExternalReportID: fmt.Sprint(i), DateBegin: day, DateEnd: day.Add(time.Hour), ReceivedAt: day})
		if err != nil {
			t.Fatal(err)
		}
		for j := range 3 {
			ip := fmt.Sprintf("192.0.%d.%d", (i*3+j)%50, j) // sources come back
			d.Add(&Record{SourceIP: ip, Count: int64(1 + j), DKIM: "pass"})
			want[ip] += int64(1 + j)
		}
		d.Finish()
		if _, err := in.Commit(&IngestBatch{Reports: []*ReportDraft{d}}); err != nil {
			t.Fatal(err)
		}
		var segs int
		var now []byte
		err = db.bolt.View(func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketSourceRollups)
			c := b.Cursor()
			for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
				segs++
			}
			now = bytes.Clone(b.Get(sourceSegKey(prefix, 0)))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if segs > maxSourceSegments {
			t.Fatalf("commit %d: %d segments, at most %d", i, segs, maxSourceSegments)
		}
		if segs < prevSegs { // this commit merged segments
			merges++
			if bytes.Equal(now, first) {
				firstKept++
			}
		}
		first, prevSegs = now, segs
	}
	got := map[string]int64{}
	if err := db.EachSourceDay(dom.OrgID, dom.ID, day, day, func(_ time.Time, s *SourceRollup) { got[s.SourceIP] += s.Messages }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d sources, want %d", len(got), len(want))
	}
	for ip, n := range want {
		if got[ip] != n {
			t.Fatalf("source %s: %d messages, want %d", ip, got[ip], n)
		}
	}
	if merges == 0 || firstKept == 0 {
		t.Errorf("%d merges, %d of them left the first segment alone: want merges of the newer segments only", merges, firstKept)
	}
}

// openDomainDB opens a new store with organization acme and its domain
// example.com.
func openDomainDB(t *testing.T) (*DB, *Domain) {
	t.Helper()
	db, orgID := openFailureDB(t)
	dom := &Domain{OrgID: orgID, Name: "example.com", ReportingEmail: "r@reports.test", DMARCRecord: "v=DMARC1; p=none"}
	if err := db.CreateDomain(dom); err != nil {
		t.Fatal(err)
	}
	return db, dom
}
