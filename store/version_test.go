package store_test

import (
	"testing"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// TestDomainsVersion ensures every domain write of an organization changes
// its version, reads and other organizations' writes do not, and a failed
// write still leaves no cache valid.
func TestDomainsVersion(t *testing.T) {
	db := storetest.Open(t)
	a := storetest.MustOrganization(t, db, "a", store.PlanUnlimited)
	b := storetest.MustOrganization(t, db, "b", store.PlanUnlimited)
	v := db.DomainsVersion(a.ID)
	changed := func(what string) {
		t.Helper()
		now := db.DomainsVersion(a.ID)
		if now == v {
			t.Errorf("%s did not change the version", what)
		}
		v = now
	}
	same := func(what string) {
		t.Helper()
		if now := db.DomainsVersion(a.ID); now != v {
			t.Errorf("%s changed the version", what)
		}
	}
	d := storetest.MustDomain(t, db, a.ID, "one.example")
	changed("CreateDomain")
	if _, _, err := db.ListDomains(a.ID, store.Page{Page: 1, Limit: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.FindDomain(a.ID, d.ID); err != nil {
		t.Fatal(err)
	}
	same("reading")
	storetest.MustDomain(t, db, b.ID, "one.example")
	same("another organization's write")
	if _, err := db.UpdateDomain(a.ID, d.ID, func(d *store.Domain) error { d.Status = store.DomainActive; return nil }); err != nil {
		t.Fatal(err)
	}
	changed("UpdateDomain")
	if err := db.CreateDomain(&store.Domain{OrgID: a.ID, Name: "one.example", ReportingEmail: "x@r.example", DMARCRecord: "v=DMARC1; p=none"}); err == nil {
		t.Fatal("duplicate created")
	}
	changed("a failed CreateDomain") // conservative: callers only lose a cache entry
	if err := db.DeleteDomain(a.ID, d.ID); err != nil {
		t.Fatal(err)
	}
	changed("DeleteDomain")
}
