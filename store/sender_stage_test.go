package store_test

import (
	"maps"
	"testing"

	"github.com/dmarcd/dmarcd/alert"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// TestSenderStages ensures the stored stages come back for the domains
// asked, and a domain never evaluated or unknown is absent.
func TestSenderStages(t *testing.T) {
	db := storetest.Open(t)
	org := storetest.MustOrganization(t, db, "acme", store.PlanUnlimited)
	a := storetest.MustDomain(t, db, org.ID, "a.example")
	b := storetest.MustDomain(t, db, org.ID, "b.example")
	c := storetest.MustDomain(t, db, org.ID, "c.example")
	for dom, stage := range map[*store.Domain]string{a: alert.StageReadyForReject, b: alert.StageReadyForQuarantine} {
		if _, err := db.RecordSenderCheck(store.SenderCheck{DomainID: dom.ID, Next: alert.SenderState{Stage: stage}}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := db.SenderStages([]string{a.ID, c.ID, "nope"})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{a.ID: alert.StageReadyForReject}; !maps.Equal(got, want) {
		t.Errorf("SenderStages = %v, want %v", got, want)
	}
}
