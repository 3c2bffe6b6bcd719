package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// TestDomainDispositionDays checks the daily dispositions against what
// was stored, the zero days, tenant isolation and bad ranges.
func TestDomainDispositionDays(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch())
	db := storetest.OpenWithClock(t, clock)
	org := storetest.MustOrganization(t, db, "a", store.PlanUnlimited)
	other := storetest.MustOrganization(t, db, "b", store.PlanUnlimited)
	d := storetest.MustDomain(t, db, org.ID, "a.example")
	day := time.Date(2026, 11, 10, 0, 0, 0, 0, time.UTC)
	draft, err := db.NewReportDraft(store.Report{DomainID: d.ID, Domain: d.Name, OrgID: org.ID, OrgName: "r",
		ExternalReportID: "1", DateBegin: day, DateEnd: day.Add(time.Hour), ReceivedAt: day.Add(2 * time.Hour),
		PolicyPublished: store.PolicyPublished{Domain: d.Name, P: "none", PCT: 100}})
	if err != nil {
		t.Fatal(err)
	}
	for _, disp := range []struct {
		d string
		n int64
	}{{"none", 5}, {"quarantine", 7}, {"reject", 11}, {"pass", 2}} {
		draft.Add(&store.Record{SourceIP: "192.0.2.1", Count: disp.n, Disposition: disp.d, DKIM: "fail", SPF: "fail",
			HeaderFrom: d.Name, Reasons: []store.Reason{}, AuthResults: store.AuthResults{DKIM: []store.DKIMAuth{}, SPF: []store.SPFAuth{}}})
	}
	draft.Finish()
	if _, err := db.NewIngester().Commit(&store.IngestBatch{Reports: []*store.ReportDraft{draft}}); err != nil {
		t.Fatal(err)
	}
	days, err := db.DomainDispositionDays(org.ID, d.ID, day.AddDate(0, 0, -1), day.AddDate(0, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	if len(days) != 3 || days[0].Date != "2026-11-09" || days[2].Date != "2026-11-11" {
		t.Fatalf("days %+v", days)
	}
	if got := days[1].DispositionCount; got != (store.DispositionCount{None: 7, Quarantine: 7, Reject: 11}) {
		t.Errorf("2026-11-10: %+v", got)
	}
	if days[0].DispositionCount != (store.DispositionCount{}) {
		t.Errorf("empty day: %+v", days[0])
	}
	if _, err := db.DomainDispositionDays(other.ID, d.ID, day, day); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another organization's domain: %v", err)
	}
	if _, err := db.DomainDispositionDays(org.ID, d.ID, day, day.AddDate(0, 0, -1)); err == nil {
		t.Error("a range ending before it starts is accepted")
	}
}

// TestSweepSessions deletes expired sessions only, with their index.
func TestSweepSessions(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch())
	db := storetest.OpenWithClock(t, clock)
	org := storetest.MustOrganization(t, db, "a", store.PlanUnlimited)
	k, _ := storetest.MustAPIKey(t, db, org.ID, store.ScopeFull)
	t0 := clock.Now()
	old, _, err := db.CreateSession(k.ID, t0)
	if err != nil {
		t.Fatal(err)
	}
	fresh, _, err := db.CreateSession(k.ID, t0.Add(11*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	now := t0.Add(store.SessionIdleTimeout + time.Minute)
	n, err := db.SweepSessions(now)
	if err != nil || n != 1 {
		t.Fatalf("swept %d, %v; want 1", n, err)
	}
	if _, _, _, err := db.FindSession(old, now); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the expired session is still there: %v", err)
	}
	if _, _, _, err := db.FindSession(fresh, now); err != nil {
		t.Errorf("the live session was swept: %v", err)
	}
	if c, _ := db.CountSessions(k.ID); c != 1 {
		t.Errorf("%d index entries left, want 1", c)
	}
	if n, err := db.SweepSessions(now); err != nil || n != 0 {
		t.Errorf("second sweep: %d, %v", n, err)
	}
}
