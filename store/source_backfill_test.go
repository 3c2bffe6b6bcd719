package store_test

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// backfillEnv is a file with reports of one domain over three days.
type backfillEnv struct {
	path     string
	db       *store.DB
	org      *store.Organization
	dom      *store.Domain
	want     map[string]store.SourceRollup
	wantDays map[time.Time]bool
	wantIPs  []string
}

func newBackfillEnv(t *testing.T) *backfillEnv {
	t.Helper()
	e := &backfillEnv{path: filepath.Join(t.TempDir(), "dmarcd.db")}
	e.open(t)
	e.org = storetest.MustOrganization(t, e.db, "acme", store.PlanUnlimited)
	e.dom = storetest.MustDomain(t, e.db, e.org.ID, "example.com")
	ing := e.db.NewIngester()
	for i := range 6 {
		d := mustDraft(t, e.db, e.dom, fmt.Sprint("r", i), reportDay(3+i%3), 150+50*i)
		d.Finish()
		if _, err := ing.Commit(&store.IngestBatch{Reports: []*store.ReportDraft{d}}); err != nil {
			t.Fatal(err)
		}
	}
	e.want, e.wantDays = e.sources(t)
	e.wantIPs = e.pending(t)
	if len(e.want) == 0 || len(e.wantDays) != 3 || len(e.wantIPs) != len(e.want) {
		t.Fatalf("setup: %d sources on %d days, %d pending", len(e.want), len(e.wantDays), len(e.wantIPs))
	}
	return e
}

func (e *backfillEnv) open(t *testing.T) {
	t.Helper()
	db, err := store.Open(e.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.db = db
	t.Cleanup(func() { _ = db.Close() })
}

func (e *backfillEnv) reopen(t *testing.T) {
	t.Helper()
	if err := e.db.Close(); err != nil {
		t.Fatal(err)
	}
	e.open(t)
	if v, err := store.SchemaVersionOf(e.db); err != nil || v != store.SchemaVersion {
		t.Fatalf("schema version %d %v after reopening", v, err)
	}
}

// sources sums the roll-ups by IP (Evidence sorted, to compare).
func (e *backfillEnv) sources(t *testing.T) (map[string]store.SourceRollup, map[time.Time]bool) {
	t.Helper()
	got, days := sumSources(t, e.db, e.org.ID, e.dom.ID, reportDay(1), reportDay(10))
	out := map[string]store.SourceRollup{}
	for ip, s := range got {
		slices.SortFunc(s.Evidence, func(a, b store.Evidence) int {
			return cmpStrings(a.Kind+" "+a.Domain, b.Kind+" "+b.Domain)
		})
		out[ip] = *s
	}
	return out, days
}

func cmpStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (e *backfillEnv) pending(t *testing.T) []string {
	t.Helper()
	p, err := e.db.PendingSourceIPs(100)
	if err != nil {
		t.Fatal(err)
	}
	return p.IPs
}

func (e *backfillEnv) check(t *testing.T) {
	t.Helper()
	got, days := e.sources(t)
	if !reflect.DeepEqual(got, e.want) || !reflect.DeepEqual(days, e.wantDays) {
		t.Errorf("after the backfill: %d sources on %v days, want %d on %v", len(got), days, len(e.want), e.wantDays)
		for ip, w := range e.want {
			if g := got[ip]; !reflect.DeepEqual(g, w) {
				t.Errorf("%s: %+v\nwant %+v", ip, g, w)
				break
			}
		}
	}
	if ips := e.pending(t); !slices.Equal(ips, e.wantIPs) {
		t.Errorf("pending reverse DNS: %d IPs, want %d", len(ips), len(e.wantIPs))
	}
	if err := e.db.Check(); err != nil {
		t.Error(err)
	}
}

// TestBackfillSourceRollups ensures opening a file of a version before
// the per-source roll-ups builds them from the stored records, exactly as
// ingest would have (counts, first and last seen, auth results, sources
// queued for reverse DNS).
func TestBackfillSourceRollups(t *testing.T) {
	e := newBackfillEnv(t)
	if err := store.MakeOldFile(e.db, false); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.sources(t); len(got) != 0 {
		t.Fatalf("old file still has %d sources", len(got))
	}
	e.reopen(t)
	e.check(t)
	// Nothing runs twice: opening again changes nothing.
	e.reopen(t)
	e.check(t)
}

// TestBackfillResumes ensures a backfill stopped after some batches (a
// crash, a stop) resumes where it stopped, counting no report twice.
func TestBackfillResumes(t *testing.T) {
	e := newBackfillEnv(t)
	if err := store.MakeOldFile(e.db, false); err != nil {
		t.Fatal(err)
	}
	// Batches of about 300 records: a report is never split, so each of
	// the first two batches holds at least one whole report.
	n, err := store.BackfillSteps(e.db, 2, 300)
	if err != nil || n < 2 || n >= 6 {
		t.Fatalf("two batches read %d reports (%v), want 2 to 5 of 6", n, err)
	}
	if got, _ := e.sources(t); len(got) == 0 {
		t.Fatal("the first batches wrote nothing")
	}
	e.reopen(t)
	e.check(t)
}

// TestBackfillReplacesPartialRollups ensures a file of a development
// version, whose newer reports already have roll-ups, is rebuilt rather
// than counted twice.
func TestBackfillReplacesPartialRollups(t *testing.T) {
	e := newBackfillEnv(t)
	if err := store.MakeOldFile(e.db, true); err != nil {
		t.Fatal(err)
	}
	e.reopen(t)
	e.check(t)
}
