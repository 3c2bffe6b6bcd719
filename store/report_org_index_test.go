package store_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// orgListing walks the whole organization listing with limit, by cursor
// and by page number, checks both agree, every page carries the same
// total, and the order is newest date_begin first; it returns the ids and
// the total.
func orgListing(t *testing.T, db *store.DB, orgID string, f store.ReportFilter, limit int) ([]string, int) {
	t.Helper()
	var byCursor, byPage []string
	total := -1
	f.Page = store.Page{Page: 1, Limit: limit}
	var prev time.Time
	for i := 0; ; i++ {
		p, err := db.ListReportsPage(orgID, f)
		if err != nil {
			t.Fatalf("cursor page %d: %v", i, err)
		}
		if total >= 0 && p.Total != total {
			t.Fatalf("total %d on cursor page %d, %d before", p.Total, i, total)
		}
		total = p.Total
		for _, r := range p.Reports {
			if !prev.IsZero() && r.DateBegin.After(prev) {
				t.Errorf("report %s begins %v after the one before it (%v)", r.ExternalReportID, r.DateBegin, prev)
			}
			prev = r.DateBegin
			byCursor = append(byCursor, r.ID)
		}
		if p.Next == nil {
			if len(p.Reports) == limit && len(byCursor) < total {
				t.Fatalf("no cursor after a full page, %d of %d listed", len(byCursor), total)
			}
			break
		}
		f.After = p.Next
	}
	f.After = nil
	for n := 1; ; n++ {
		f.Page.Page = n
		reps, tot, err := db.ListReports(orgID, f)
		if err != nil {
			t.Fatal(err)
		}
		if tot != total {
			t.Fatalf("page %d: total %d, by cursor %d", n, tot, total)
		}
		if len(reps) == 0 {
			break
		}
		for _, r := range reps {
			byPage = append(byPage, r.ID)
		}
	}
	if !slices.Equal(byCursor, byPage) {
		t.Errorf("by cursor %v\nby page   %v", byCursor, byPage)
	}
	if len(byCursor) != total {
		t.Errorf("listed %d reports, total %d", len(byCursor), total)
	}
	seen := map[string]bool{}
	for _, id := range byCursor {
		if seen[id] {
			t.Errorf("report %s listed twice", id)
		}
		seen[id] = true
	}
	return byCursor, total
}

// orgIndexEnv is an organization with three domains whose reports share
// dates, reporters and report ids (the same report id on the same day in
// two domains is two reports), and a second organization.
type orgIndexEnv struct {
	*reportEnv
	doms     []*store.Domain
	other    *store.Organization
	otherDom *store.Domain
	ids      map[string]string // report id -> domain id
}

func newOrgIndexEnv(t *testing.T, db *store.DB) *orgIndexEnv {
	t.Helper()
	org := storetest.MustOrganization(t, db, "acme", store.PlanUnlimited)
	e := &orgIndexEnv{reportEnv: &reportEnv{db: db, org: org, ing: db.NewIngester()}, ids: map[string]string{}}
	for _, name := range []string{"a.example", "b.example", "c.example"} {
		e.doms = append(e.doms, storetest.MustDomain(t, db, org.ID, name))
	}
	e.dom = e.doms[0]
	e.other = storetest.MustOrganization(t, db, "other", store.PlanUnlimited)
	e.otherDom = storetest.MustDomain(t, db, e.other.ID, "a.example")
	var drafts []*store.ReportDraft
	for i := range 45 {
		dom := e.doms[i%3]
		d := mustDraft(t, db, dom, fmt.Sprint("r", i/3), reportDay(1+i/9), 1)
		drafts = append(drafts, d)
		e.ids[d.ID()] = dom.ID
	}
	drafts = append(drafts, mustDraft(t, e.db, e.otherDom, "r0", reportDay(1), 1))
	e.commit(t, &store.IngestBatch{Reports: drafts})
	return e
}

// TestOrgReportIndex ensures the organization listing has every report of
// the organization and none of another, newest first, its total right on
// every page, cursors and page numbers agreeing, and the date and domain
// filters as before.
func TestOrgReportIndex(t *testing.T) {
	e := newOrgIndexEnv(t, storetest.Open(t))
	for _, limit := range []int{1, 4, 20, 100} {
		ids, total := orgListing(t, e.db, e.org.ID, store.ReportFilter{}, limit)
		if total != 45 || len(ids) != 45 {
			t.Fatalf("limit %d: %d listed of %d, want 45", limit, len(ids), total)
		}
		for _, id := range ids {
			if e.ids[id] == "" {
				t.Errorf("report %s is not the organization's", id)
			}
		}
	}
	if _, total := orgListing(t, e.db, e.other.ID, store.ReportFilter{}, 10); total != 1 {
		t.Errorf("other organization: total %d, want 1", total)
	}
	// Filters: date_begin from the 3rd (days 3..5, 27 reports), date_end
	// to the end of the 2nd (days 1..2, 18 reports), both (none).
	for name, tc := range map[string]struct {
		f    store.ReportFilter
		want int
	}{
		"from":        {store.ReportFilter{DateFrom: new(reportDay(3))}, 27},
		"to":          {store.ReportFilter{DateTo: new(reportDay(3).Add(-time.Second))}, 18},
		"both":        {store.ReportFilter{DateFrom: new(reportDay(3)), DateTo: new(reportDay(3))}, 0},
		"domain":      {store.ReportFilter{DomainID: e.doms[1].ID}, 15},
		"domain from": {store.ReportFilter{DomainID: e.doms[1].ID, DateFrom: new(reportDay(5))}, 3},
	} {
		for _, limit := range []int{2, 7} {
			if _, total := orgListing(t, e.db, e.org.ID, tc.f, limit); total != tc.want {
				t.Errorf("%s, limit %d: total %d, want %d", name, limit, total, tc.want)
			}
		}
	}
	// A cursor of the wrong length is invalid; a domain listing takes no
	// organization position.
	first, err := e.db.ListReportsPage(e.org.ID, store.ReportFilter{Page: store.Page{Page: 1, Limit: 2}})
	if err != nil || first.Next == nil {
		t.Fatal(err)
	}
	for name, f := range map[string]store.ReportFilter{
		"short":  {After: first.Next[:10]},
		"long":   {After: append(slices.Clone(first.Next), 0)},
		"domain": {DomainID: e.doms[0].ID, After: first.Next},
	} {
		f.Page = store.Page{Page: 1, Limit: 2}
		if _, err := e.db.ListReportsPage(e.org.ID, f); !isInvalid(err) {
			t.Errorf("%s cursor: %v, want ErrInvalid", name, err)
		}
	}
}

func isInvalid(err error) bool { return errors.Is(err, store.ErrInvalid) }

// TestOrgReportIndexCursorStable ensures reports stored while a client
// walks the listing by cursor neither repeat nor hide the others: newer
// ones are not listed, older ones are.
func TestOrgReportIndexCursorStable(t *testing.T) {
	e := newOrgIndexEnv(t, storetest.Open(t))
	p, err := e.db.ListReportsPage(e.org.ID, store.ReportFilter{Page: store.Page{Page: 1, Limit: 10}})
	if err != nil {
		t.Fatal(err)
	}
	newer := mustDraft(t, e.db, e.doms[2], "newer", reportDay(20), 1)
	older := mustDraft(t, e.db, e.doms[1], "older", time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC), 1)
	e.commit(t, &store.IngestBatch{Reports: []*store.ReportDraft{newer, older}})
	listed := map[string]int{}
	for _, r := range p.Reports {
		listed[r.ID]++
	}
	for f := (store.ReportFilter{Page: store.Page{Page: 1, Limit: 10}, After: p.Next}); f.After != nil; f.After = p.Next {
		if p, err = e.db.ListReportsPage(e.org.ID, f); err != nil {
			t.Fatal(err)
		}
		if p.Total != 47 {
			t.Errorf("total %d, want 47", p.Total)
		}
		for _, r := range p.Reports {
			listed[r.ID]++
		}
	}
	if listed[newer.ID()] != 0 || listed[older.ID()] != 1 || len(listed) != 46 {
		t.Errorf("newer listed %d times, older %d, %d distinct; want 0, 1, 46", listed[newer.ID()], listed[older.ID()], len(listed))
	}
	for id, n := range listed {
		if n != 1 {
			t.Errorf("report %s listed %d times", id, n)
		}
	}
}

// TestOrgReportIndexTotals ensures the stored total follows ingest (a
// duplicate is not counted), domain deletion, retention and organization
// deletion, and always equals what a date-filtered (counting) scan finds.
func TestOrgReportIndexTotals(t *testing.T) {
	e := newOrgIndexEnv(t, storetest.Open(t))
	check := func(when string, want int) {
		t.Helper()
		_, total := orgListing(t, e.db, e.org.ID, store.ReportFilter{}, 8)
		_, counted := orgListing(t, e.db, e.org.ID, store.ReportFilter{DateFrom: new(time.Unix(0, 0))}, 8)
		if total != want || counted != want {
			t.Errorf("%s: total %d, counted %d, want %d", when, total, counted, want)
		}
	}
	check("after ingest", 45)
	outs := e.commit(t, &store.IngestBatch{Reports: []*store.ReportDraft{mustDraft(t, e.db, e.doms[0], "r0", reportDay(1), 1)}})
	if outs[0].Duplicate == nil {
		t.Fatalf("outcome %+v, want a duplicate", outs[0])
	}
	check("after a duplicate", 45)
	if err := e.db.DeleteDomain(e.org.ID, e.doms[2].ID); err != nil {
		t.Fatal(err)
	}
	check("after deleting a domain", 30)
	// Retention: reports that ended before the 3rd go: days 1 and 2, 6
	// a day in the two domains left, and the other organization's one.
	if n, err := e.db.DeleteReportsBefore(reportDay(3)); err != nil || n != 13 {
		t.Fatalf("DeleteReportsBefore: %d, %v; want 13", n, err)
	}
	if _, total := orgListing(t, e.db, e.other.ID, store.ReportFilter{}, 8); total != 0 {
		t.Errorf("other organization after retention: total %d, want 0", total)
	}
	e.commit(t, &store.IngestBatch{Reports: []*store.ReportDraft{mustDraft(t, e.db, e.otherDom, "o", reportDay(4), 1)}})
	check("after retention", 18)
	e.commit(t, &store.IngestBatch{Reports: []*store.ReportDraft{mustDraft(t, e.db, e.doms[1], "again", reportDay(1), 1)}})
	check("after a new report", 19)
	// One commit of two organizations' new reports and a duplicate: the
	// commit adds each organization's new reports to its count once.
	e.commit(t, &store.IngestBatch{Reports: []*store.ReportDraft{mustDraft(t, e.db, e.doms[0], "b1", reportDay(5), 1),
		mustDraft(t, e.db, e.otherDom, "b2", reportDay(5), 1), mustDraft(t, e.db, e.doms[1], "b3", reportDay(5), 1),
		mustDraft(t, e.db, e.doms[1], "again", reportDay(1), 1)}})
	check("after a batch of two organizations", 21)
	if _, err := e.db.DeleteOrganization(e.org.ID); err != nil {
		t.Fatal(err)
	}
	if _, total := orgListing(t, e.db, e.org.ID, store.ReportFilter{}, 8); total != 0 {
		t.Errorf("deleted organization: total %d", total)
	}
	if _, total := orgListing(t, e.db, e.other.ID, store.ReportFilter{}, 8); total != 2 {
		t.Errorf("other organization: total %d, want 2", total)
	}
	if err := e.db.Check(); err != nil {
		t.Error(err)
	}
}

// TestOrgReportIndexMigration ensures a file of schema version 2 (no
// organization index) gets it built on Open, with the totals and order a
// fresh file has, and that reports of a domain no longer there are left out.
func TestOrgReportIndexMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dmarcd.db")
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := newOrgIndexEnv(t, db)
	want, _ := orgListing(t, db, e.org.ID, store.ReportFilter{}, 7)
	orgID, otherID := e.org.ID, e.other.ID
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Make it a version 2 file, with a stray entry of a gone domain in
	// the domain index.
	raw, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = raw.Update(func(tx *bolt.Tx) error {
		// Schema 2 had neither the counts nor the organization index
		// (which schema 10 dropped again).
		if err := tx.DeleteBucket([]byte("report_counts")); err != nil {
			return err
		}
		if tx.Bucket([]byte("reports_by_org")) != nil {
			return errors.New("a fresh file has the organization index of schema 3 to 9")
		}
		gone := make([]byte, 0, 36+8+16)
		gone = append(gone, "00000000-0000-7000-8000-000000000000"...)
		gone = binary.BigEndian.AppendUint64(gone, uint64(reportDay(2).Unix()))
		gone = append(gone, make([]byte, 16)...)
		if err := tx.Bucket([]byte("reports_by_domain")).Put(gone, []byte("00000000-0000-7000-8000-000000000001")); err != nil {
			return err
		}
		return store.PutSchemaVersion(tx, 2)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if v, err := store.SchemaVersionOf(db); err != nil || v != store.SchemaVersion {
		t.Fatalf("schema version %d, %v", v, err)
	}
	got, total := orgListing(t, db, orgID, store.ReportFilter{}, 7)
	if !slices.Equal(got, want) || total != 45 {
		t.Errorf("after migration: %d reports of %d, want the 45 listed before", len(got), total)
	}
	if _, total := orgListing(t, db, otherID, store.ReportFilter{}, 7); total != 1 {
		t.Errorf("other organization after migration: total %d, want 1", total)
	}
}
