package senders

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dmarcd/dmarcd/internal/dnstest"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// fakeClock is virtual time: Sleep advances it at once.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
	return ctx.Err()
}

func (c *fakeClock) Advance(d time.Duration) { _ = c.Sleep(context.Background(), d) }

// ingestSources commits one report for dom whose records come from ips.
func ingestSources(t testing.TB, db *store.DB, dom *store.Domain, extID string, begin time.Time, recs []*store.Record) {
	t.Helper()
	d, err := db.NewReportDraft(store.Report{DomainID: dom.ID, Domain: dom.Name, OrgID: dom.OrgID,
		OrgName: "google.com", ExternalReportID: extID, DateBegin: begin, DateEnd: begin.Add(24*time.Hour - time.Second),
		ReceivedAt: begin.Add(25 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		d.Add(r)
	}
	d.Finish()
	outs, err := db.NewIngester().Commit(&store.IngestBatch{Reports: []*store.ReportDraft{d}})
	if err != nil || !outs[0].Stored {
		t.Fatalf("commit: %v %+v", err, outs)
	}
}

func ipRecords(ips ...string) []*store.Record {
	var out []*store.Record
	for _, ip := range ips {
		out = append(out, &store.Record{SourceIP: ip, Count: 1, Disposition: "none", DKIM: "fail", SPF: "fail"})
	}
	return out
}

func reverse(t *testing.T, ip string) string {
	r, err := dns.ReverseAddr(ip)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRDNSJob resolves forward-confirmed, unconfirmed, missing and failing
// names through a real DNS server, caches each, and retries SERVFAIL
// later until it succeeds.
func TestRDNSJob(t *testing.T) {
	srv := dnstest.Start(t)
	srv.SetPTR(reverse(t, "192.0.2.1"), "mail.example.com")
	srv.SetA("mail.example.com", "192.0.2.1")
	srv.SetPTR(reverse(t, "2001:db8::5"), "v6.example.net")
	srv.SetA("v6.example.net", "2001:db8::5")
	srv.SetPTR(reverse(t, "192.0.2.2"), "liar.example.org") // resolves elsewhere
	srv.SetA("liar.example.org", "203.0.113.1")
	srv.SetPTR(reverse(t, "192.0.2.4"), "late.example.com")
	srv.SetA("late.example.com", "192.0.2.4")
	srv.SetRcode(reverse(t, "192.0.2.4"), dns.RcodeServerFailure)
	// 192.0.2.3: no PTR (NXDOMAIN).

	clock := &fakeClock{t: time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)}
	db := storetest.Open(t)
	org := storetest.MustOrganization(t, db, "acme", store.PlanUnlimited)
	dom := storetest.MustDomain(t, db, org.ID, "example.com")
	ingestSources(t, db, dom, "r1", time.Date(2026, 11, 19, 0, 0, 0, 0, time.UTC),
		ipRecords("192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4", "2001:db8::5"))
	j := NewRDNSJob(db, testResolver(t, srv), RDNSConfig{Clock: clock, Rate: 100})
	if n, err := j.RunOnce(context.Background()); err != nil || n != 5 {
		t.Fatalf("RunOnce: %d %v", n, err)
	}
	ips := []string{"192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4", "2001:db8::5"}
	got, _ := db.GetRDNS(ips)
	want := map[string]string{
		"192.0.2.1":   fmt.Sprint(store.RDNSConfirmed, " mail.example.com"),
		"2001:db8::5": fmt.Sprint(store.RDNSConfirmed, " v6.example.net"),
		"192.0.2.2":   fmt.Sprint(store.RDNSUnconfirmed, " liar.example.org"),
		"192.0.2.3":   fmt.Sprint(store.RDNSNotFound, " "),
		"192.0.2.4":   fmt.Sprint(store.RDNSTemporary, " "),
	}
	for ip, w := range want {
		if g := fmt.Sprint(got[ip].Status, " ", got[ip].Hostname); g != w {
			t.Errorf("%s: %s, want %s", ip, g, w)
		}
	}
	// Nothing new: nothing is looked up; the SERVFAIL waits for its retry.
	if n, _ := j.RunOnce(context.Background()); n != 0 {
		t.Errorf("second run looked up %d IPs", n)
	}
	srv.SetRcode(reverse(t, "192.0.2.4"), dns.RcodeSuccess)
	clock.Advance(DefaultRDNSRetry)
	nx := srv.Queries(reverse(t, "192.0.2.3"))
	if n, _ := j.RunOnce(context.Background()); n != 1 {
		t.Errorf("retry run looked up %d IPs, want 1", n)
	}
	if e, _ := db.GetRDNS([]string{"192.0.2.4"}); e["192.0.2.4"].Status != store.RDNSConfirmed {
		t.Errorf("after SERVFAIL cleared: %+v", e["192.0.2.4"])
	}
	// The same IPs sending again within the TTLs are not looked up again;
	// NXDOMAIN is remembered for NegativeTTL.
	ingestSources(t, db, dom, "r2", time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC), ipRecords(ips...))
	if n, _ := j.RunOnce(context.Background()); n != 0 {
		t.Errorf("fresh entries looked up again: %d", n)
	}
	clock.Advance(DefaultRDNSNegativeTTL)
	ingestSources(t, db, dom, "r3", time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC), ipRecords(ips...))
	if n, _ := j.RunOnce(context.Background()); n != 1 || srv.Queries(reverse(t, "192.0.2.3")) != nx+1 {
		t.Errorf("after the negative TTL: %d lookups, want only the NXDOMAIN one again", n)
	}
}

// recordingResolver notes the (virtual) time of every PTR lookup.
type recordingResolver struct {
	RDNSResolver
	clock *fakeClock
	mu    sync.Mutex
	at    []time.Time
}

func (r *recordingResolver) LookupPTR(ctx context.Context, ip netip.Addr) ([]string, error) {
	r.mu.Lock()
	r.at = append(r.at, r.clock.Now())
	r.mu.Unlock()
	return r.RDNSResolver.LookupPTR(ctx, ip)
}

// TestRDNSRate ensures 10,000 new IPs (a spoofing wave) are looked up at
// the configured rate and no faster, on an injected clock.
func TestRDNSRate(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 DNS queries")
	}
	srv := dnstest.Start(t)
	clock := &fakeClock{t: time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)}
	db := storetest.Open(t)
	org := storetest.MustOrganization(t, db, "acme", store.PlanUnlimited)
	dom := storetest.MustDomain(t, db, org.ID, "example.com")
	const n = 10000
	ips := make([]string, n)
	for i := range ips {
		ips[i] = fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)
	}
	ingestSources(t, db, dom, "wave", time.Date(2026, 11, 19, 0, 0, 0, 0, time.UTC), ipRecords(ips...))
	rec := &recordingResolver{RDNSResolver: testResolver(t, srv), clock: clock}
	j := NewRDNSJob(db, rec, RDNSConfig{Clock: clock}) // default rate, 20/s
	start := clock.Now()
	got, err := j.RunOnce(context.Background())
	if err != nil || got != n || len(rec.at) != n {
		t.Fatalf("RunOnce: %d lookups (%d recorded), %v", got, len(rec.at), err)
	}
	slices.SortFunc(rec.at, func(a, b time.Time) int { return a.Compare(b) })
	interval := time.Second / DefaultRDNSRate
	for i, at := range rec.at {
		if min := start.Add(time.Duration(i) * interval); at.Before(min) {
			t.Fatalf("lookup %d at +%v, before +%v: faster than %d/s", i, at.Sub(start), min.Sub(start), DefaultRDNSRate)
		}
	}
	if took, want := rec.at[n-1].Sub(start), time.Duration(n-1)*interval; took > want+time.Second {
		t.Errorf("last lookup at +%v, want about +%v: slower than the rate", took, want)
	}
	if c, _ := db.GetRDNS(ips[:1]); c[ips[0]].Status != store.RDNSNotFound {
		t.Errorf("entry %+v", c[ips[0]])
	}
}

// stopClock is a fakeClock that ends the job's context at its nth Sleep.
type stopClock struct {
	fakeClock
	n      int
	cancel context.CancelFunc
}

func (c *stopClock) Sleep(ctx context.Context, d time.Duration) error {
	if c.n--; c.n <= 0 {
		c.cancel()
	}
	return c.fakeClock.Sleep(ctx, d)
}

// TestRDNSResolvedHook ensures Run calls Resolved after a run that looked
// IPs up, and not after runs with nothing to look up.
func TestRDNSResolvedHook(t *testing.T) {
	srv := dnstest.Start(t)
	srv.SetPTR(reverse(t, "192.0.2.1"), "mail.example.com")
	srv.SetA("mail.example.com", "192.0.2.1")
	db := storetest.Open(t)
	org := storetest.MustOrganization(t, db, "acme", store.PlanUnlimited)
	dom := storetest.MustDomain(t, db, org.ID, "example.com")
	ingestSources(t, db, dom, "r1", time.Date(2026, 11, 19, 0, 0, 0, 0, time.UTC), ipRecords("192.0.2.1"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clock := &stopClock{fakeClock: fakeClock{t: time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)}, n: 3, cancel: cancel}
	calls := 0
	j := NewRDNSJob(db, testResolver(t, srv), RDNSConfig{Clock: clock, Rate: 100, Resolved: func() { calls++ }})
	if err := j.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Errorf("Resolved called %d times over 3 runs, one with a lookup", calls)
	}
}
