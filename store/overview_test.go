package store_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// TestDomainDaysMatchesStatistics ensures the overview's light read of the
// roll-ups gives each domain the same days as DomainStatistics, and
// nothing of another organization.
func TestDomainDaysMatchesStatistics(t *testing.T) {
	e := newReportEnv(t)
	second := storetest.MustDomain(t, e.db, e.org.ID, "second.example")
	other := storetest.MustOrganization(t, e.db, "other", store.PlanStarter)
	third := storetest.MustDomain(t, e.db, other.ID, "third.example")
	e.commit(t, &store.IngestBatch{Reports: []*store.ReportDraft{
		mustDraft(t, e.db, e.dom, "a", reportDay(20), 40), mustDraft(t, e.db, e.dom, "b", reportDay(18), 7),
		mustDraft(t, e.db, second, "c", reportDay(20), 3), mustDraft(t, e.db, third, "d", reportDay(20), 9)}})
	from, to := time.Date(2026, 10, 25, 0, 0, 0, 0, time.UTC), storetest.Epoch()
	days, err := e.db.DomainDays(e.org.ID, from, to)
	if err != nil {
		t.Fatal(err)
	}
	ds, _, _ := e.db.ListDomains(e.org.ID, store.Page{Page: 1, Limit: 100})
	if len(days) != len(ds) {
		t.Fatalf("%d domains, want %d", len(days), len(ds))
	}
	seen := false
	for _, d := range ds {
		st, err := e.db.DomainStatistics(e.org.ID, d.ID, from, to)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(days[d.ID], st.ByDay) {
			t.Errorf("%s: DomainDays\n%+v\nDomainStatistics\n%+v", d.Name, days[d.ID], st.ByDay)
		}
		for _, x := range st.ByDay {
			seen = seen || x.Messages > 0
		}
	}
	if !seen {
		t.Error("no messages in the window: the test proves nothing")
	}
	if _, err := e.db.DomainDays(e.org.ID, to, from); err == nil {
		t.Error("reversed range accepted")
	}
	if _, err := e.db.DomainDays(store.NewID(), from, to); err == nil {
		t.Error("unknown organization accepted")
	}
}
