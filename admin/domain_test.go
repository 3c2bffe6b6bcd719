package admin

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/internal/dnstest"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// serveDomains serves a Local whose application layer has DNS, as serve
// wires it, over a real socket and a real DNS server.
func serveDomains(t *testing.T) (*store.DB, *dnstest.Server, *Client) {
	t.Helper()
	db := storetest.Open(t)
	ns := dnstest.Start(t)
	res, err := dnscheck.NewResolver(dnscheck.Config{Servers: []string{ns.Addr}, Timeout: 300 * time.Millisecond, Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	a := app.New(app.Config{Store: db, DNS: &dnscheck.Checker{Resolver: res, SuggestTimeout: time.Second},
		ReportingDomain: "reports.example.net", PublicURL: "https://dmarc.example.net"})
	c, _ := serveLocal(t, &Local{DB: db, App: a})
	return db, ns, c
}

// TestDomainsOverSocket ensures 'dmarcd domain' operations work over the
// socket with the API's rules (issue 24 item 15): adding answers the
// records POST /domains answers, a name that can never be registered and
// a failed verification keep their kind and reason, the only organization
// is the default, and a name two organizations have must be told apart.
func TestDomainsOverSocket(t *testing.T) {
	db, ns, c := serveDomains(t)
	ctx := context.Background()
	acme := storetest.MustOrganization(t, db, "acme", store.PlanUnlimited)

	d, err := c.AddDomain(ctx, "", "Example.COM.")
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "example.com" || d.Organization != "acme" || d.OrganizationID != acme.ID || d.Status != store.DomainPending ||
		!strings.HasSuffix(d.ReportingEmail, "@reports.example.net") {
		t.Fatalf("added %+v", d)
	}
	var names []string
	for _, r := range d.DNSRecords {
		names = append(names, r.Name)
	}
	if want := "_dmarc.example.com example.com._report._dmarc.reports.example.net _smtp._tls.example.com"; strings.Join(names, " ") != want ||
		d.DNSRecords[0].Value != d.DMARCRecord || !strings.Contains(d.DNSRecords[2].Value, "https://dmarc.example.net/tlsrpt/") {
		t.Errorf("records %+v", d.DNSRecords)
	}
	if _, err := c.AddDomain(ctx, "acme", "a-domain.localhost"); !errors.Is(err, store.ErrInvalid) ||
		!strings.Contains(err.Error(), "a-domain.localhost: .localhost is reserved") {
		t.Errorf("a reserved name: %v", err)
	}
	if _, err := c.AddDomain(ctx, "", "example.com"); !errors.Is(err, store.ErrConflict) {
		t.Errorf("the same name again: %v", err)
	}

	if _, err := c.VerifyDomain(ctx, "", "example.com"); !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "not verified") {
		t.Errorf("verify without a record: %v", err)
	}
	ns.SetTXT("_dmarc.example.com", []string{d.DMARCRecord})
	v, err := c.VerifyDomain(ctx, "acme", d.ID)
	if err != nil || v.Status != store.DomainActive || v.VerifiedAt == nil || v.Organization != "acme" {
		t.Fatalf("verify by id: %+v, %v", v, err)
	}

	storetest.MustOrganization(t, db, "globex", store.PlanUnlimited)
	if _, err := c.AddDomain(ctx, "", "other.example"); !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "acme, globex") {
		t.Errorf("no --org with two organizations: %v", err)
	}
	if _, err := c.AddDomain(ctx, "globex", "example.com"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.VerifyDomain(ctx, "", "example.com"); !errors.Is(err, store.ErrConflict) {
		t.Errorf("verify a name two organizations have: %v", err)
	}
	all, err := c.ListDomains(ctx, "")
	if err != nil || len(all) != 2 || all[0].Organization != "acme" || all[1].Organization != "globex" {
		t.Fatalf("list: %+v, %v", all, err)
	}
	if one, err := c.ListDomains(ctx, "globex"); err != nil || len(one) != 1 || one[0].Status != store.DomainPending {
		t.Errorf("list --org globex: %+v, %v", one, err)
	}
	del, err := c.DeleteDomain(ctx, "globex", "example.com")
	if err != nil || del.Organization != "globex" {
		t.Fatalf("delete: %+v, %v", del, err)
	}
	if _, err := c.DeleteDomain(ctx, "globex", "example.com"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("delete again: %v", err)
	}
	if _, err := db.FindDomain(acme.ID, d.ID); err != nil {
		t.Errorf("acme's example.com went with globex's: %v", err)
	}
}
