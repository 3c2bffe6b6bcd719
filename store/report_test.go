package store_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// reportEnv is a store with one organization, its domain, and an ingester.
type reportEnv struct {
	db  *store.DB
	org *store.Organization
	dom *store.Domain
	ing *store.Ingester
}

func newReportEnv(t testing.TB) *reportEnv {
	t.Helper()
	db := storetest.Open(t)
	org := storetest.MustOrganization(t, db, "acme", store.PlanUnlimited)
	return &reportEnv{db: db, org: org, dom: storetest.MustDomain(t, db, org.ID, "example.com"), ing: db.NewIngester()}
}

func reportDay(d int) time.Time { return time.Date(2026, 11, d, 0, 0, 0, 0, time.UTC) }

// mustDraft returns a finished draft of n records for dom, begun on begin.
func mustDraft(t *testing.T, db *store.DB, dom *store.Domain, extID string, begin time.Time, n int) *store.ReportDraft {
	t.Helper()
	d, err := db.NewReportDraft(store.Report{DomainID: dom.ID, Domain: dom.Name, OrgID: dom.OrgID,
		OrgName: "google.com", OrgEmail: "noreply@google.com", ExternalReportID: extID,
		DateBegin: begin, DateEnd: begin.Add(24*time.Hour - time.Second), ReceivedAt: storetest.Epoch(),
		PolicyPublished: store.PolicyPublished{Domain: dom.Name, P: "none", PCT: 100, ADKIM: "r", ASPF: "r"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		d.Add(testRecord(i))
	}
	return d
}

func testRecord(i int) *store.Record {
	r := &store.Record{SourceIP: fmt.Sprintf("192.0.2.%d", i%200), Count: int64(i%5 + 1), Disposition: "none",
		DKIM: "pass", SPF: "fail", HeaderFrom: "example.com",
		Reasons:     []store.Reason{},
		AuthResults: store.AuthResults{DKIM: []store.DKIMAuth{{Domain: "example.com", Result: "pass"}}, SPF: []store.SPFAuth{}}}
	if i%3 == 0 {
		r.DKIM, r.Disposition = "fail", "reject"
	}
	return r
}

func (e *reportEnv) commit(t *testing.T, b *store.IngestBatch) []store.ReportOutcome {
	t.Helper()
	for _, d := range b.Reports {
		d.Finish()
	}
	outs, err := e.ing.Commit(b)
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	return outs
}

// TestCommitReport ensures a committed draft is visible with its counts,
// records in order, summary, and the domain's last_report_at.
func TestCommitReport(t *testing.T) {
	e := newReportEnv(t)
	d := mustDraft(t, e.db, e.dom, "r1", reportDay(3), 150)
	outs := e.commit(t, &store.IngestBatch{Reports: []*store.ReportDraft{d}})
	if !outs[0].Stored {
		t.Fatalf("outcome %+v", outs[0])
	}
	rep, err := e.db.FindReport(e.org.ID, d.ID())
	if err != nil {
		t.Fatal(err)
	}
	var msgs, pass int64
	for i := range 150 {
		r := testRecord(i)
		msgs += r.Count
		if r.DKIM == "pass" {
			pass += r.Count
		}
	}
	if rep.RecordCount != 150 || rep.MessageCount != msgs || rep.DMARCPassCount != pass || rep.DMARCFailCount != msgs-pass ||
		rep.Domain != "example.com" || !rep.DateBegin.Equal(reportDay(3)) {
		t.Errorf("report %+v, want 150 records, %d messages, %d passing", rep, msgs, pass)
	}
	i := 0
	err = e.db.ReportRecords(e.org.ID, d.ID(), func(r *store.Record) error {
		if want := testRecord(i); r.SourceIP != want.SourceIP || r.Count != want.Count || r.DMARC != map[bool]string{true: "pass", false: "fail"}[want.DKIM == "pass"] {
			t.Errorf("record %d: %+v", i, r)
		}
		i++
		return nil
	})
	if err != nil || i != 150 {
		t.Errorf("ReportRecords: %d records, %v", i, err)
	}
	st, err := e.db.ReportStatistics(e.org.ID, d.ID())
	if err != nil || st.ReportID != d.ID() || st.MessageCount != msgs || st.Disposition.Reject+st.Disposition.None != msgs {
		t.Errorf("statistics %+v, %v", st, err)
	}
	dom, _ := e.db.FindDomain(e.org.ID, e.dom.ID)
	if dom.LastReportAt == nil || !dom.LastReportAt.Equal(storetest.Epoch()) {
		t.Errorf("last_report_at %v", dom.LastReportAt)
	}
}

// TestCommitOutcomes ensures a second report with the same identity in one
// batch is a duplicate of the first, and a report whose domain was deleted
// is not stored.
func TestCommitOutcomes(t *testing.T) {
	e := newReportEnv(t)
	gone := storetest.MustDomain(t, e.db, e.org.ID, "gone.example")
	a, b := mustDraft(t, e.db, e.dom, "same", reportDay(3), 2), mustDraft(t, e.db, e.dom, "same", reportDay(3), 2)
	c := mustDraft(t, e.db, gone, "x", reportDay(3), 2)
	if err := e.db.DeleteDomain(e.org.ID, gone.ID); err != nil {
		t.Fatal(err)
	}
	outs := e.commit(t, &store.IngestBatch{Reports: []*store.ReportDraft{a, b, c}})
	if !outs[0].Stored || outs[1].Duplicate == nil || outs[1].Duplicate.ID != a.ID() || !outs[2].DomainGone {
		t.Errorf("outcomes %+v", outs)
	}
	if dup, err := findDuplicate(e.db, mustDraft(t, e.db, e.dom, "same", reportDay(3), 1)); err != nil || dup == nil || dup.ID != a.ID() {
		t.Errorf("FindDuplicate: %v, %v", dup, err)
	}
	// The identity is reporter, report id and domain (API.md): another id is
	// a new report, the same id with other dates is not.
	if dup, err := findDuplicate(e.db, mustDraft(t, e.db, e.dom, "other", reportDay(3), 1)); err != nil || dup != nil {
		t.Errorf("FindDuplicate of a new report: %v, %v", dup, err)
	}
	if dup, err := findDuplicate(e.db, mustDraft(t, e.db, e.dom, "same", reportDay(4), 1)); err != nil || dup == nil || dup.ID != a.ID() {
		t.Errorf("FindDuplicate of a re-sent report with other dates: %v, %v", dup, err)
	}
}

// TestNewReportDraftInvalid ensures malformed report metadata is refused.
func TestNewReportDraftInvalid(t *testing.T) {
	db := storetest.Open(t)
	ok := store.Report{DomainID: store.NewID(), OrgID: store.NewID(), ReceivedAt: storetest.Epoch()}
	for name, change := range map[string]func(*store.Report){
		"bad domain id":   func(r *store.Report) { r.DomainID = "x" },
		"no org":          func(r *store.Report) { r.OrgID = "" },
		"no receive time": func(r *store.Report) { r.ReceivedAt = time.Time{} },
		"long org_name":   func(r *store.Report) { r.OrgName = strings.Repeat("a", 1025) },
		"long report_id":  func(r *store.Report) { r.ExternalReportID = strings.Repeat("a", 1025) },
	} {
		r := ok
		change(&r)
		if _, err := db.NewReportDraft(r); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	d, err := db.NewReportDraft(ok)
	if err != nil || !d.Report().DateBegin.Equal(ok.ReceivedAt) || !d.Report().DateEnd.Equal(ok.ReceivedAt) || !store.ValidID(d.ID()) {
		t.Errorf("report without dates: %+v, %v", d.Report(), err)
	}
}

// TestListReports ensures listings run newest date_begin first across the
// organization's domains, filter by domain and dates, page, and hide other
// organizations.
func TestListReports(t *testing.T) {
	e := newReportEnv(t)
	dom2 := storetest.MustDomain(t, e.db, e.org.ID, "example.org")
	other := storetest.MustOrganization(t, e.db, "other", store.PlanUnlimited)
	otherDom := storetest.MustDomain(t, e.db, other.ID, "example.com")
	var drafts []*store.ReportDraft
	for i, dd := range []int{5, 1, 9, 3, 7} {
		dom := e.dom
		if i%2 == 1 {
			dom = dom2
		}
		drafts = append(drafts, mustDraft(t, e.db, dom, fmt.Sprint(i), reportDay(dd), 1))
	}
	drafts = append(drafts, mustDraft(t, e.db, otherDom, "o", reportDay(4), 1))
	e.commit(t, &store.IngestBatch{Reports: drafts})
	page := store.Page{Page: 1, Limit: 10}
	ids := func(f store.ReportFilter) ([]string, int) {
		t.Helper()
		reps, total, err := e.db.ListReports(e.org.ID, f)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range reps {
			got = append(got, r.ExternalReportID)
		}
		return got, total
	}
	for name, tc := range map[string]struct {
		f     store.ReportFilter
		want  string
		total int
	}{
		"all":        {store.ReportFilter{Page: page}, "2 4 0 3 1", 5},
		"domain":     {store.ReportFilter{DomainID: dom2.ID, Page: page}, "3 1", 2},
		"from":       {store.ReportFilter{DateFrom: new(reportDay(5)), Page: page}, "2 4 0", 3},
		"to":         {store.ReportFilter{DateTo: new(reportDay(6)), Page: page}, "0 3 1", 3},
		"to on end":  {store.ReportFilter{DateTo: new(reportDay(6).Add(-time.Second)), Page: page}, "0 3 1", 3},
		"before end": {store.ReportFilter{DateTo: new(reportDay(6).Add(-2 * time.Second)), Page: page}, "3 1", 2},
		"page 2":     {store.ReportFilter{Page: store.Page{Page: 2, Limit: 2}}, "0 3", 5},
		"past end":   {store.ReportFilter{Page: store.Page{Page: 9, Limit: 2}}, "", 5},
	} {
		got, total := ids(tc.f)
		if strings.Join(got, " ") != tc.want || total != tc.total {
			t.Errorf("%s: %v of %d, want %s of %d", name, got, total, tc.want, tc.total)
		}
	}
	if _, _, err := e.db.ListReports(e.org.ID, store.ReportFilter{DomainID: otherDom.ID, Page: page}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("other org's domain: %v", err)
	}
	if _, _, err := e.db.ListReports(e.org.ID, store.ReportFilter{}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("no page: %v", err)
	}
	for _, id := range []string{drafts[5].ID(), "nope", strings.ToUpper(drafts[0].ID())} {
		if _, err := e.db.FindReport(e.org.ID, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("FindReport(%s): %v", id, err)
		}
		if _, err := e.db.ReportStatistics(e.org.ID, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("ReportStatistics(%s): %v", id, err)
		}
		if err := e.db.ReportRecords(e.org.ID, id, func(*store.Record) error { return nil }); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("ReportRecords(%s): %v", id, err)
		}
	}
}

// TestReportRecordsStops ensures an error of the callback ends the scan
// and comes back unchanged.
func TestReportRecordsStops(t *testing.T) {
	e := newReportEnv(t)
	d := mustDraft(t, e.db, e.dom, "r", reportDay(1), 10)
	e.commit(t, &store.IngestBatch{Reports: []*store.ReportDraft{d}})
	stop := errors.New("stop")
	n := 0
	err := e.db.ReportRecords(e.org.ID, d.ID(), func(*store.Record) error { n++; return stop })
	if err != stop || n != 1 {
		t.Errorf("got %v after %d records", err, n)
	}
}

// TestDomainStatisticsRange ensures the range rules: inclusive days, at
// most 366 of them, to not before from, and only the org's domains.
func TestDomainStatisticsRange(t *testing.T) {
	e := newReportEnv(t)
	e.commit(t, &store.IngestBatch{Reports: []*store.ReportDraft{mustDraft(t, e.db, e.dom, "a", reportDay(1).Add(23*time.Hour), 10)}})
	st, err := e.db.DomainStatistics(e.org.ID, e.dom.ID, reportDay(1).AddDate(-1, 0, 0), reportDay(1).Add(time.Hour))
	if err != nil || len(st.ByDay) != 366 || st.ByDay[365].Reports != 1 || st.ReportCount != 1 {
		t.Fatalf("366 days: %d days, %v", len(st.ByDay), err)
	}
	for name, r := range map[string][2]time.Time{
		"367 days":       {reportDay(1).AddDate(-1, 0, -1), reportDay(1)},
		"to before from": {reportDay(2), reportDay(1)},
	} {
		if _, err := e.db.DomainStatistics(e.org.ID, e.dom.ID, r[0], r[1]); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	other := storetest.MustOrganization(t, e.db, "other", store.PlanUnlimited)
	if _, err := e.db.DomainStatistics(other.ID, e.dom.ID, reportDay(1), reportDay(1)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("other org: %v", err)
	}
}

// TestRollupCacheRevalidated ensures the ingester does not trust its cached
// roll-up once the stored one changed behind it (here: deleted).
func TestRollupCacheRevalidated(t *testing.T) {
	e := newReportEnv(t)
	e.commit(t, &store.IngestBatch{Reports: []*store.ReportDraft{mustDraft(t, e.db, e.dom, "a", reportDay(1), 10)}})
	err := store.BoltOf(e.db).Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("report_rollups")).ForEach(func(k, _ []byte) error {
			return tx.Bucket([]byte("report_rollups")).Delete(k)
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	e.commit(t, &store.IngestBatch{Reports: []*store.ReportDraft{mustDraft(t, e.db, e.dom, "b", reportDay(1), 4)}})
	st, err := e.db.DomainStatistics(e.org.ID, e.dom.ID, reportDay(1), reportDay(1))
	if err != nil || st.ReportCount != 1 {
		t.Errorf("report_count %d (%v), want only the report after the delete", st.ReportCount, err)
	}
}

// TestQuarantine ensures entries are listed newest first with their bytes,
// a retry updates the entry in place, and delete removes it.
func TestQuarantine(t *testing.T) {
	e := newReportEnv(t)
	var items []*store.QuarantineItem
	for i := range 3 {
		items = append(items, &store.QuarantineItem{
			Entry: store.QuarantineEntry{Source: "smtp", Name: fmt.Sprint("mail ", i), Reason: "no report", Size: 5},
			Raw:   []byte(fmt.Sprint("raw ", i)),
		})
	}
	e.commit(t, &store.IngestBatch{Quarantine: items})
	list, total, err := e.db.ListQuarantine(store.Page{Page: 1, Limit: 2})
	if err != nil || total != 3 || len(list) != 2 || list[0].Name != "mail 2" || list[1].Name != "mail 1" {
		t.Fatalf("list %+v of %d, %v", list, total, err)
	}
	entry, raw, err := e.db.FindQuarantine(items[0].Entry.ID)
	if err != nil || string(raw) != "raw 0" || !entry.ReceivedAt.Equal(storetest.Epoch()) || entry.Retries != 0 {
		t.Fatalf("find: %+v %q %v", entry, raw, err)
	}
	retry := &store.QuarantineItem{Entry: store.QuarantineEntry{ID: entry.ID, Reason: "still no report"}}
	e.commit(t, &store.IngestBatch{Quarantine: []*store.QuarantineItem{retry}})
	entry, raw, _ = e.db.FindQuarantine(entry.ID)
	if entry.Retries != 1 || entry.Reason != "still no report" || entry.Name != "mail 0" || string(raw) != "raw 0" {
		t.Errorf("after retry: %+v %q", entry, raw)
	}
	if err := e.db.DeleteQuarantine(entry.ID); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{entry.ID, "bad"} {
		if _, _, err := e.db.FindQuarantine(id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("find %s: %v", id, err)
		}
		if err := e.db.DeleteQuarantine(id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("delete %s: %v", id, err)
		}
	}
	if _, _, err := e.db.ListQuarantine(store.Page{}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("bad page: %v", err)
	}
}

// TestPendingReports ensures records committed in chunks stay invisible
// until the draft is committed, and that what a crash leaves behind (chunks
// without their draft) is deleted at the next start, leaving a sound file.
func TestPendingReports(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dmarcd.db")
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	org := storetest.MustOrganization(t, db, "acme", store.PlanUnlimited)
	dom := storetest.MustDomain(t, db, org.ID, "example.com")
	ing := db.NewIngester()
	whole := mustDraft(t, db, dom, "whole", reportDay(1), 0)
	crashed := mustDraft(t, db, dom, "crashed", reportDay(2), 0)
	for i := range 50 {
		whole.Add(testRecord(i))
		crashed.Add(testRecord(i))
		if i%20 == 19 {
			if _, err := ing.Commit(&store.IngestBatch{Chunks: []*store.RecordChunk{whole.TakeChunk(), crashed.TakeChunk()}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, total, _ := db.ListReports(org.ID, store.ReportFilter{Page: store.Page{Page: 1, Limit: 9}}); total != 0 {
		t.Fatalf("%d reports visible before their final commit", total)
	}
	whole.Finish()
	if outs, err := ing.Commit(&store.IngestBatch{Reports: []*store.ReportDraft{whole}}); err != nil || !outs[0].Stored {
		t.Fatalf("final commit: %+v, %v", outs, err)
	}
	if err := db.Close(); err != nil { // the "crash": crashed never gets its final commit
		t.Fatal(err)
	}
	db, err = store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n, err := db.DiscardPendingReports(); n != 1 || err != nil {
		t.Fatalf("discarded %d, %v; want 1", n, err)
	}
	if err := db.Check(); err != nil {
		t.Fatal(err)
	}
	n := 0
	err = db.ReportRecords(org.ID, whole.ID(), func(*store.Record) error { n++; return nil })
	if err != nil || n != 50 {
		t.Errorf("whole report: %d records, %v", n, err)
	}
	prefixes := map[string]bool{}
	_ = store.BoltOf(db).View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("report_records")).ForEach(func(k, _ []byte) error {
			prefixes[string(k[:16])] = true
			return nil
		})
	})
	if len(prefixes) != 1 {
		t.Errorf("records of %d reports left, want the whole report's only", len(prefixes))
	}
	if n, err := db.DiscardPendingReports(); n != 0 || err != nil {
		t.Errorf("second discard: %d, %v", n, err)
	}
}

// TestDraftAbort ensures a draft given up deletes the records it handed
// out and its pending marker, once, and that aborting a stored draft, or
// one that handed out nothing, deletes nothing.
func TestDraftAbort(t *testing.T) {
	e := newReportEnv(t)
	ing := e.db.NewIngester()
	recordReports := func() int {
		prefixes := map[string]bool{}
		_ = store.BoltOf(e.db).View(func(tx *bolt.Tx) error {
			return tx.Bucket([]byte("report_records")).ForEach(func(k, _ []byte) error {
				prefixes[string(k[:16])] = true
				return nil
			})
		})
		return len(prefixes)
	}
	chunked := func(extID string, day int) *store.ReportDraft {
		d := mustDraft(t, e.db, e.dom, extID, reportDay(day), 0)
		for i := range 30 {
			d.Add(testRecord(i))
			if i%10 == 9 {
				if _, err := ing.Commit(&store.IngestBatch{Chunks: []*store.RecordChunk{d.TakeChunk()}}); err != nil {
					t.Fatal(err)
				}
			}
		}
		return d
	}
	stored, cut, dup := chunked("stored", 1), chunked("cut", 2), chunked("stored", 1)
	stored.Finish()
	dup.Finish()
	outs, err := ing.Commit(&store.IngestBatch{Reports: []*store.ReportDraft{stored, dup}})
	if err != nil || !outs[0].Stored || outs[1].Duplicate == nil {
		t.Fatalf("commit: %+v, %v", outs, err)
	}
	if n := recordReports(); n != 3 {
		t.Fatalf("records of %d reports before the aborts, want 3", n)
	}
	for _, d := range []*store.ReportDraft{cut, dup, cut, stored} {
		if err := d.Abort(e.db); err != nil {
			t.Fatal(err)
		}
	}
	if n := recordReports(); n != 1 {
		t.Errorf("records of %d reports after the aborts, want the stored one's only", n)
	}
	if n := store.ReportsPendingCount(e.db); n != 0 {
		t.Errorf("%d pending markers left", n)
	}
	n := 0
	if err := e.db.ReportRecords(e.org.ID, stored.ID(), func(*store.Record) error { n++; return nil }); err != nil || n != 30 {
		t.Errorf("stored report: %d records, %v", n, err)
	}
	if n, err := e.db.DiscardPendingReports(); n != 0 || err != nil {
		t.Errorf("left for the next start: %d, %v", n, err)
	}
	if err := mustDraft(t, e.db, e.dom, "unchunked", reportDay(3), 5).Abort(e.db); err != nil {
		t.Errorf("abort of a draft that handed out nothing: %v", err)
	}
}

// TestDomainsNamed ensures import routing finds a name in one or in every
// organization.
func TestDomainsNamed(t *testing.T) {
	e := newReportEnv(t)
	other := storetest.MustOrganization(t, e.db, "other", store.PlanUnlimited)
	storetest.MustDomain(t, e.db, other.ID, "example.com")
	for _, tc := range []struct {
		org, name string
		want      int
	}{{"", "example.com", 2}, {e.org.ID, "example.com", 1}, {"", "example.net", 0}, {other.ID, "example.net", 0}} {
		doms, err := e.db.DomainsNamed(tc.org, tc.name)
		if err != nil || len(doms) != tc.want {
			t.Errorf("DomainsNamed(%q, %s): %d, %v; want %d", tc.org, tc.name, len(doms), err, tc.want)
		}
	}
}

// TestDedupIgnoresDates ensures a report sent again with another date range
// (same reporter, report id and domain) is stored once, as API.md defines
// the identity; another reporter with the same id is a different report.
func TestDedupIgnoresDates(t *testing.T) {
	db := storetest.Open(t)
	org := storetest.MustOrganization(t, db, "acme", store.PlanUnlimited)
	dom := storetest.MustDomain(t, db, org.ID, "example.com")
	commit := func(orgName string, begin time.Time) store.ReportOutcome {
		t.Helper()
		d, err := db.NewReportDraft(store.Report{DomainID: dom.ID, OrgID: org.ID, Domain: dom.Name,
			OrgName: orgName, ExternalReportID: "r-1", DateBegin: begin, DateEnd: begin.Add(24 * time.Hour),
			ReceivedAt: storetest.Epoch(), PolicyPublished: store.PolicyPublished{Domain: dom.Name, P: "none", PCT: 100, ADKIM: "r", ASPF: "r"}})
		if err != nil {
			t.Fatal(err)
		}
		d.Add(&store.Record{SourceIP: "192.0.2.1", Count: 1, Disposition: "none", DKIM: "pass", SPF: "pass", DMARC: "pass", HeaderFrom: dom.Name})
		d.Finish()
		outs, err := db.NewIngester().Commit(&store.IngestBatch{Reports: []*store.ReportDraft{d}})
		if err != nil {
			t.Fatal(err)
		}
		return outs[0]
	}
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	if out := commit("google.com", day); !out.Stored {
		t.Fatalf("first report not stored: %+v", out)
	}
	if out := commit("google.com", day.Add(time.Hour)); out.Stored || out.Duplicate == nil {
		t.Fatalf("same identity with other dates stored again: %+v", out)
	}
	if out := commit("yahoo.com", day); !out.Stored {
		t.Fatalf("another reporter's report r-1 was taken for a duplicate: %+v", out)
	}
	if _, total, err := db.ListReports(org.ID, store.ReportFilter{Page: store.Page{Page: 1, Limit: 10}}); err != nil || total != 2 {
		t.Fatalf("reports stored: %d (%v), want 2", total, err)
	}
	if err := db.DeleteDomain(org.ID, dom.ID); err != nil {
		t.Fatal(err)
	}
	dom2 := storetest.MustDomain(t, db, org.ID, "example.com")
	dom = dom2
	if out := commit("google.com", day); !out.Stored {
		t.Fatalf("after the domain was deleted and added again, its old identity still blocks: %+v", out)
	}
}

// findDuplicate is the dedup check of ingest: Lookup.FindDuplicate in a
// lookup of its own.
func findDuplicate(db *store.DB, d *store.ReportDraft) (*store.Report, error) {
	var dup *store.Report
	err := db.Lookup(func(l *store.Lookup) error {
		var err error
		dup, err = l.FindDuplicate(d)
		return err
	})
	return dup, err
}
