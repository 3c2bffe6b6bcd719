package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

func mustStoreReport(t *testing.T, db *store.DB, d *store.Domain) {
	t.Helper()
	begin := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	draft, err := db.NewReportDraft(store.Report{DomainID: d.ID, Domain: d.Name, OrgID: d.OrgID, OrgName: "google.com",
		ExternalReportID: store.NewID(), DateBegin: begin, DateEnd: begin.Add(time.Hour), ReceivedAt: begin.Add(2 * time.Hour),
		PolicyPublished: store.PolicyPublished{Domain: d.Name, P: "none", PCT: 100, ADKIM: "r", ASPF: "r"}})
	if err != nil {
		t.Fatal(err)
	}
	draft.Add(&store.Record{SourceIP: "192.0.2.1", Count: 1, Disposition: "none", DKIM: "pass", SPF: "pass", DMARC: "pass", HeaderFrom: d.Name})
	draft.Finish()
	q := &store.QuarantineItem{Entry: store.QuarantineEntry{Source: "import", Name: "x.eml", Reason: "test", OrgID: d.OrgID}, Raw: []byte("junk")}
	if outs, err := db.NewIngester().Commit(&store.IngestBatch{Reports: []*store.ReportDraft{draft}, Quarantine: []*store.QuarantineItem{q}}); err != nil || !outs[0].Stored {
		t.Fatalf("%v %+v", err, outs)
	}
}

// TestDeleteOrganization ensures an organization goes with its domains,
// reports, keys and quarantine entries, another organization keeps all of
// its own, and the file stays consistent.
func TestDeleteOrganization(t *testing.T) {
	db := storetest.Open(t)
	acme := storetest.MustOrganization(t, db, "acme", store.PlanUnlimited)
	globex := storetest.MustOrganization(t, db, "globex", store.PlanUnlimited)
	var domains []*store.Domain
	for _, org := range []*store.Organization{acme, globex} {
		d := storetest.MustDomain(t, db, org.ID, "example.com")
		mustStoreReport(t, db, d)
		domains = append(domains, d)
	}
	_, acmeKey := storetest.MustAPIKey(t, db, acme.ID, store.ScopeFull)
	_, globexKey := storetest.MustAPIKey(t, db, globex.ID, store.ScopeFull)

	del, err := db.DeleteOrganization(acme.ID)
	if err != nil {
		t.Fatal(err)
	}
	if del.Domains != 1 || del.Keys != 1 || del.Quarantined != 1 || del.Organization.Name != "acme" {
		t.Errorf("deletion = %+v", del)
	}
	if _, err := db.FindOrganization("acme"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("organization still found: %v", err)
	}
	if _, _, err := db.Authenticate(acmeKey); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("acme's key still authenticates: %v", err)
	}
	if _, err := db.FindDomainByReportingEmail(domains[0].ReportingEmail); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("acme's reporting address still routes: %v", err)
	}
	if _, _, err := db.Authenticate(globexKey); err != nil {
		t.Errorf("globex's key: %v", err)
	}
	if reps, n, err := db.ListReports(globex.ID, store.ReportFilter{Page: store.Page{Page: 1, Limit: 10}}); err != nil || n != 1 || len(reps) != 1 {
		t.Errorf("globex's reports: %d %v", n, err)
	}
	if q, n, _ := db.ListQuarantine(store.Page{Page: 1, Limit: 10}); n != 1 || q[0].OrgID != globex.ID {
		t.Errorf("quarantine left: %d", n)
	}
	// The name is free again.
	if _, err := db.CreateOrganization("ACME", store.PlanStarter); err != nil {
		t.Errorf("recreating the name: %v", err)
	}
	if _, err := db.DeleteOrganization(acme.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second delete: %v", err)
	}
	if err := db.Check(); err != nil {
		t.Error(err)
	}
}

// TestRenameOrganization ensures a rename keeps the id, frees the old name
// and refuses another organization's name.
func TestRenameOrganization(t *testing.T) {
	db := storetest.Open(t)
	acme := storetest.MustOrganization(t, db, "acme", store.PlanUnlimited)
	storetest.MustOrganization(t, db, "globex", store.PlanUnlimited)
	if _, err := db.RenameOrganization(acme.ID, "Globex"); !errors.Is(err, store.ErrConflict) {
		t.Errorf("taking globex's name: %v", err)
	}
	if _, err := db.RenameOrganization(acme.ID, " "); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("empty name: %v", err)
	}
	got, err := db.RenameOrganization(acme.ID, "Acme Corp")
	if err != nil || got.ID != acme.ID || got.Name != "Acme Corp" {
		t.Fatalf("%+v %v", got, err)
	}
	if _, err := db.FindOrganization("acme"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("old name still found: %v", err)
	}
	if o, err := db.FindOrganization("acme corp"); err != nil || o.ID != acme.ID {
		t.Errorf("new name: %v %v", o, err)
	}
	if _, err := db.RenameOrganization(acme.ID, "ACME CORP"); err != nil {
		t.Errorf("a change of case: %v", err)
	}
}
