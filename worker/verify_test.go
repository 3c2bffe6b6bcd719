package worker

import (
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// TestReverifyTurnsDomainsActive ensures pending and inactive domains turn
// active with verified_at once their DNS lists the reporting address,
// while the others stay as they are and active domains are not looked up.
func TestReverifyTurnsDomainsActive(t *testing.T) {
	e := newDNSEnv(t)
	pending := e.domain(t, "pending.example", store.DomainPending)
	inactive := e.domain(t, "inactive.example", store.DomainInactive)
	wrong := e.domain(t, "wrong.example", store.DomainPending)
	flaky := e.domain(t, "flaky.example", store.DomainPending)
	active := e.domain(t, "active.example", store.DomainActive)
	v := &Reverify{Store: e.db, Checker: &dnscheck.Checker{Resolver: e.res}}

	// Nothing published yet: nothing changes.
	if err := v.Run(t.Context(), e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if got := e.reload(t, pending); got.Status != store.DomainPending || got.VerifiedAt != nil {
		t.Fatalf("verified without a record: %+v", got)
	}

	for _, d := range []*store.Domain{pending, inactive, flaky} {
		e.publish(d, "v=DMARC1; p=none; rua=mailto:"+d.ReportingEmail)
	}
	e.publish(wrong, "v=DMARC1; p=none; rua=mailto:someone@example.net")
	e.ns.SetRcode("_dmarc."+flaky.Name, dns.RcodeServerFailure)
	activeQueries := e.ns.Queries("_dmarc." + active.Name)
	e.clock.Advance(15 * time.Minute)
	if err := v.Run(t.Context(), e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	for _, d := range []*store.Domain{pending, inactive} {
		got := e.reload(t, d)
		if got.Status != store.DomainActive || got.VerifiedAt == nil || !got.VerifiedAt.Equal(storetest.Epoch().Add(15*time.Minute)) {
			t.Errorf("%s after re-verification: %s, verified at %v", d.Name, got.Status, got.VerifiedAt)
		}
	}
	for _, d := range []*store.Domain{wrong, flaky} {
		if got := e.reload(t, d); got.Status != store.DomainPending {
			t.Errorf("%s turned %s", d.Name, got.Status)
		}
	}
	if n := e.ns.Queries("_dmarc." + active.Name); n != activeQueries {
		t.Errorf("an active domain was looked up %d times", n-activeQueries)
	}
}
