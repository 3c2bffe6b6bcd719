package store

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// TestCommitLeavesDraftSourcesAlone ensures committing reports of one day
// does not change the drafts' encoded sources: the pipeline commits the
// same drafts again, one by one, when a group fails.
func TestCommitLeavesDraftSourcesAlone(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "x.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	org, err := db.CreateOrganization("acme", PlanUnlimited)
	if err != nil {
		t.Fatal(err)
	}
	dom := &Domain{OrgID: org.ID, Name: "example.com", ReportingEmail: "r@reports.test", DMARCRecord: "v=DMARC1; p=none"}
	if err := db.CreateDomain(dom); err != nil {
		t.Fatal(err)
	}
	day := time.Date(2026, 11, 5, 0, 0, 0, 0, time.UTC)
	var drafts []*ReportDraft
	var before [][]byte
	for i := range 3 {
		d, err := NewReportDraft(Report{DomainID: dom.ID, Domain: dom.Name, OrgID: org.ID, OrgName: "google.com",
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
		before = append(before, bytes.Clone(d.srcEnc.body))
	}
	if _, err := db.NewIngester().Commit(&IngestBatch{Reports: drafts}); err != nil {
		t.Fatal(err)
	}
	for i, d := range drafts {
		if !bytes.Equal(d.srcEnc.body, before[i]) || d.srcEnc.n != 10 {
			t.Errorf("draft %d's sources changed by the commit", i)
		}
	}
}
