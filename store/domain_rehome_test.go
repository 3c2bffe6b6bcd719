package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// TestRehomeUnverified ensures an unverified domain's address follows the
// reporting domain with its local part kept, in the record suggested and
// in the lookup SMTP uses, while a verified domain keeps its address.
func TestRehomeUnverified(t *testing.T) {
	db := storetest.Open(t)
	org := storetest.MustOrganization(t, db, "acme", store.PlanUnlimited)
	pending := storetest.MustDomain(t, db, org.ID, "pending.example")
	verified := storetest.MustDomain(t, db, org.ID, "verified.example")
	if _, err := db.UpdateDomain(org.ID, verified.ID, func(d *store.Domain) error {
		now := time.Now()
		d.Status, d.VerifiedAt = store.DomainActive, &now
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	moved, err := db.RehomeUnverified("Reports.Example.NET.")
	if err != nil {
		t.Fatal(err)
	}
	local, _, _ := strings.Cut(pending.ReportingEmail, "@")
	want := local + "@reports.example.net"
	if len(moved) != 1 || moved[0].DomainID != pending.ID || moved[0].From != pending.ReportingEmail || moved[0].To != want {
		t.Fatalf("moved = %+v, want only %s to %s", moved, pending.Name, want)
	}
	got, err := db.FindDomain(org.ID, pending.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ReportingEmail != want || got.DMARCRecord != "v=DMARC1; p=none; rua=mailto:"+want {
		t.Errorf("pending domain = %q, %q; want the address %s everywhere", got.ReportingEmail, got.DMARCRecord, want)
	}
	if d, err := db.FindDomainByReportingEmail(strings.ToUpper(want)); err != nil || d.ID != pending.ID {
		t.Errorf("lookup of the new address = %v, %v", d, err)
	}
	if _, err := db.FindDomainByReportingEmail(pending.ReportingEmail); err == nil {
		t.Errorf("the old address %s still finds a domain", pending.ReportingEmail)
	}
	if d, _ := db.FindDomain(org.ID, verified.ID); d.ReportingEmail != verified.ReportingEmail {
		t.Errorf("verified domain moved to %s", d.ReportingEmail)
	}
	// Idempotent: a second start with the same domain moves nothing.
	if again, err := db.RehomeUnverified("reports.example.net"); err != nil || len(again) != 0 {
		t.Errorf("second rehome = %+v, %v; want nothing", again, err)
	}
	if _, err := db.RehomeUnverified("a@b"); err == nil {
		t.Error("an address as reporting domain was accepted")
	}
}
