package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dmarcd/dmarcd/alert"
	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/internal/dnstest"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// dnsEnv is a real store, a real DNS server on loopback and a resolver
// asking it.
type dnsEnv struct {
	db    *store.DB
	clock *storetest.Clock
	ns    *dnstest.Server
	res   *dnscheck.Resolver
	org   *store.Organization
}

func newDNSEnv(t *testing.T) *dnsEnv {
	t.Helper()
	clock := storetest.NewClock(storetest.Epoch())
	e := &dnsEnv{db: storetest.OpenWithClock(t, clock), clock: clock, ns: dnstest.Start(t)}
	var err error
	e.res, err = dnscheck.NewResolver(dnscheck.Config{Servers: []string{e.ns.Addr}, Timeout: 300 * time.Millisecond, Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	e.org = storetest.MustOrganization(t, e.db, "acme", store.PlanUnlimited)
	return e
}

// domain creates a domain with the given status.
func (e *dnsEnv) domain(t *testing.T, name string, status store.DomainStatus) *store.Domain {
	t.Helper()
	d := storetest.MustDomain(t, e.db, e.org.ID, name)
	if status == store.DomainPending {
		return d
	}
	d, err := e.db.UpdateDomain(e.org.ID, d.ID, func(d *store.Domain) error {
		d.Status = status
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// publish sets the _dmarc TXT record of d; "" removes the name.
func (e *dnsEnv) publish(d *store.Domain, record string) {
	if record == "" {
		e.ns.Remove("_dmarc." + d.Name)
		return
	}
	e.ns.SetTXT("_dmarc."+d.Name, []string{record})
}

func (e *dnsEnv) watch() *DNSWatch {
	return &DNSWatch{Store: e.db, Resolver: e.res, Interval: 10 * time.Minute}
}

func (e *dnsEnv) alerts(t *testing.T) []*store.Alert {
	t.Helper()
	as, _, err := e.db.ListAlerts(e.org.ID, store.AlertFilter{Page: store.Page{Page: 1, Limit: 100}})
	if err != nil {
		t.Fatal(err)
	}
	return as
}

func (e *dnsEnv) reload(t *testing.T, d *store.Domain) *store.Domain {
	t.Helper()
	got, err := e.db.FindDomainByID(d.ID)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestDNSWatchRaisesTheMostSpecificAlert ensures each kind of change of a
// domain's record raises exactly one alert of the right type and severity,
// with the old and new record, and sets the domain inactive when its
// reporting address is gone.
func TestDNSWatchRaisesTheMostSpecificAlert(t *testing.T) {
	e := newDNSEnv(t)
	w := e.watch()
	rec := func(format string, d *store.Domain) string { return strings.ReplaceAll(format, "%s", d.ReportingEmail) }
	for i, tc := range []struct {
		name, from, to string // %s stands for the reporting address
		typ, severity  string // "" for no alert
		inactive       bool
	}{
		{"unchanged", "v=DMARC1; p=reject; rua=mailto:%s", "v=DMARC1; p=reject; rua=mailto:%s", "", "", false},
		{"p lowered", "v=DMARC1; p=reject; rua=mailto:%s", "v=DMARC1; p=quarantine; rua=mailto:%s",
			alert.TypePolicyWeakened, alert.SeverityWarning, false},
		{"pct lowered", "v=DMARC1; p=reject; pct=100; rua=mailto:%s", "v=DMARC1; p=reject; pct=20; rua=mailto:%s",
			alert.TypePolicyWeakened, alert.SeverityWarning, false},
		{"p raised", "v=DMARC1; p=none; rua=mailto:%s", "v=DMARC1; p=reject; rua=mailto:%s",
			alert.TypeDNSRecordChanged, alert.SeverityInfo, false},
		{"other tag", "v=DMARC1; p=reject; rua=mailto:%s", "v=DMARC1; p=reject; rua=mailto:%s; fo=1",
			alert.TypeDNSRecordChanged, alert.SeverityInfo, false},
		{"address removed", "v=DMARC1; p=none; rua=mailto:%s,mailto:x@example.net", "v=DMARC1; p=none; rua=mailto:x@example.net",
			alert.TypeReportingAddressRemoved, alert.SeverityCritical, true},
		{"address removed and p lowered", "v=DMARC1; p=reject; rua=mailto:%s", "v=DMARC1; p=none",
			alert.TypeReportingAddressRemoved, alert.SeverityCritical, true},
		{"record gone", "v=DMARC1; p=reject; rua=mailto:%s", "",
			alert.TypeDNSRecordMissing, alert.SeverityCritical, true},
		{"only a non-DMARC TXT left", "v=DMARC1; p=reject; rua=mailto:%s", "google-site-verification=abc",
			alert.TypeDNSRecordMissing, alert.SeverityCritical, true},
		{"record broken", "v=DMARC1; p=reject; rua=mailto:%s", "v=DMARC1; p=rejct; rua=mailto:%s",
			alert.TypeDNSRecordChanged, alert.SeverityWarning, true},
		// Back, but inactive until re-verification says otherwise.
		{"record back", "", "v=DMARC1; p=none; rua=mailto:%s",
			alert.TypeDNSRecordChanged, alert.SeverityInfo, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status := store.DomainActive
			if tc.from == "" {
				status = store.DomainInactive
			}
			d := e.domain(t, fmt.Sprintf("d%d.example", i), status)
			e.publish(d, rec(tc.from, d))
			before := len(e.alerts(t))
			if err := w.Check(t.Context(), d.ID); err != nil {
				t.Fatal(err)
			}
			if n := len(e.alerts(t)); n != before {
				t.Fatalf("the first check raised %d alerts", n-before)
			}
			e.publish(d, rec(tc.to, d))
			if err := w.Check(t.Context(), d.ID); err != nil {
				t.Fatal(err)
			}
			as := e.alerts(t)
			if tc.typ == "" {
				if len(as) != before {
					t.Fatalf("no change raised %s", as[0].Type)
				}
				return
			}
			if len(as) != before+1 {
				t.Fatalf("the change raised %d alerts, want 1", len(as)-before)
			}
			a := as[0]
			if a.Type != tc.typ || a.Severity != tc.severity || *a.DomainID != d.ID {
				t.Errorf("alert %s/%s, want %s/%s", a.Type, a.Severity, tc.typ, tc.severity)
			}
			var det struct {
				RecordName string  `json:"record_name"`
				Old        *string `json:"old_record"`
				New        *string `json:"new_record"`
			}
			if err := json.Unmarshal(a.Details, &det); err != nil {
				t.Fatal(err)
			}
			wantNew := rec(tc.to, d)
			if tc.typ == alert.TypeDNSRecordMissing {
				wantNew = ""
			}
			if det.RecordName != "_dmarc."+d.Name || str(det.Old) != rec(tc.from, d) || str(det.New) != wantNew {
				t.Errorf("details %s", a.Details)
			}
			if got := e.reload(t, d).Status; (got == store.DomainInactive) != tc.inactive {
				t.Errorf("status %s, want inactive %v", got, tc.inactive)
			}
			// Checking again without a change raises nothing more.
			if err := w.Check(t.Context(), d.ID); err != nil {
				t.Fatal(err)
			}
			if n := len(e.alerts(t)); n != before+1 {
				t.Errorf("an unchanged record raised again: %d alerts", n-before)
			}
		})
	}
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// TestDNSWatchFirstCheck ensures the first check of an active domain whose
// address is already gone raises reporting_address_removed, that of an
// inactive one only remembers, and a pending domain is not looked up.
func TestDNSWatchFirstCheck(t *testing.T) {
	e := newDNSEnv(t)
	act := e.domain(t, "active.example", store.DomainActive)
	inact := e.domain(t, "inactive.example", store.DomainInactive)
	pending := e.domain(t, "pending.example", store.DomainPending)
	for _, d := range []*store.Domain{act, inact, pending} {
		e.publish(d, "v=DMARC1; p=reject")
	}
	for _, d := range []*store.Domain{act, inact, pending} {
		if err := e.watch().Check(t.Context(), d.ID); err != nil {
			t.Fatal(err)
		}
	}
	as := e.alerts(t)
	if len(as) != 1 || as[0].Type != alert.TypeReportingAddressRemoved || *as[0].DomainID != act.ID {
		t.Fatalf("alerts %v", as)
	}
	if e.reload(t, act).Status != store.DomainInactive || e.reload(t, inact).LastDNSRecord != "v=DMARC1; p=reject" {
		t.Errorf("domains after the first check: %+v %+v", e.reload(t, act), e.reload(t, inact))
	}
	if n := e.ns.Queries("_dmarc." + pending.Name); n != 0 || e.reload(t, pending).LastDNSRecord != "" {
		t.Errorf("pending domain looked up %d times", n)
	}
}

// TestDNSWatchOutageIsNoChange ensures SERVFAIL and timeouts raise nothing
// and store nothing, and the next good answer is compared with the record
// seen before the outage.
func TestDNSWatchOutageIsNoChange(t *testing.T) {
	e := newDNSEnv(t)
	d := e.domain(t, "flaky.example", store.DomainActive)
	good := "v=DMARC1; p=reject; rua=mailto:" + d.ReportingEmail
	e.publish(d, good)
	w := e.watch()
	if err := w.Check(t.Context(), d.ID); err != nil {
		t.Fatal(err)
	}
	for _, fail := range []func(){
		func() { e.ns.SetRcode("_dmarc."+d.Name, dns.RcodeServerFailure) },
		func() { e.ns.SetRcode("_dmarc."+d.Name, dns.RcodeRefused) },
		func() { e.ns.SetRcode("_dmarc."+d.Name, dns.RcodeSuccess); e.ns.SetDrop("_dmarc."+d.Name, true) },
	} {
		fail()
		if err := w.Check(t.Context(), d.ID); err != nil {
			t.Fatal(err)
		}
		if as := e.alerts(t); len(as) != 0 {
			t.Fatalf("an outage raised %s", as[0].Type)
		}
		if got := e.reload(t, d); got.Status != store.DomainActive || got.LastDNSRecord != good {
			t.Fatalf("an outage changed the domain: %+v", got)
		}
	}
	e.ns.SetDrop("_dmarc."+d.Name, false)
	e.publish(d, "v=DMARC1; p=none; rua=mailto:"+d.ReportingEmail)
	if err := w.Check(t.Context(), d.ID); err != nil {
		t.Fatal(err)
	}
	if as := e.alerts(t); len(as) != 1 || as[0].Type != alert.TypePolicyWeakened {
		t.Fatalf("after the outage: %v", as)
	}
}

// TestDNSWatchSpreadsChecksOverTheInterval ensures that with 10 domains
// and a 10-tick interval each run checks one domain, and each domain once
// per interval.
func TestDNSWatchSpreadsChecksOverTheInterval(t *testing.T) {
	e := newDNSEnv(t)
	var doms []*store.Domain
	for i := range 10 {
		d := e.domain(t, fmt.Sprintf("s%d.example", i), store.DomainActive)
		e.publish(d, "v=DMARC1; p=none; rua=mailto:"+d.ReportingEmail)
		doms = append(doms, d)
	}
	w := e.watch() // 10 minutes
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	queries := func() []int {
		var n []int
		for _, d := range doms {
			n = append(n, e.ns.Queries("_dmarc."+d.Name))
		}
		return n
	}
	prev := queries()
	seen := map[int]int{}
	for tick := range 20 {
		if err := w.Run(t.Context(), t0.Add(time.Duration(tick)*time.Minute)); err != nil {
			t.Fatal(err)
		}
		cur := queries()
		var checked []int
		for i := range cur {
			if cur[i] != prev[i] {
				checked = append(checked, i)
				seen[i]++
			}
		}
		prev = cur
		if len(checked) != 1 {
			t.Fatalf("tick %d checked domains %v, want one", tick, checked)
		}
	}
	for i := range doms {
		if seen[i] != 2 {
			t.Errorf("domain %d checked %d times in two intervals, want 2", i, seen[i])
		}
	}
	// A run after a long pause (a whole interval) checks every domain once.
	before := queries()
	if err := w.Run(t.Context(), t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	after := queries()
	for i := range after {
		if after[i]-before[i] != 1 {
			t.Errorf("after a pause domain %d checked %d times", i, after[i]-before[i])
		}
	}
}

// TestDueSlice ensures the phases cover each item exactly once per interval
// whatever the window boundaries, before and after 1970 too.
func TestDueSlice(t *testing.T) {
	for _, tc := range []struct {
		name  string
		n     int
		every time.Duration
		start time.Time
	}{
		{"7 items in 13 steps", 7, time.Second, time.Unix(1_800_000_000, 123)},
		{"1000 items in 360 steps", 1000, time.Minute, time.Unix(1_800_000_007, 0)},
		{"3 items, many steps", 3, time.Second, time.Unix(-5_000, 77)},
		{"no items", 0, time.Second, time.Unix(0, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			interval := 360 * tc.every
			if tc.n == 7 {
				interval = 13 * tc.every
			}
			count := make([]int, tc.n)
			from := tc.start
			for to := from.Add(tc.every); !to.After(tc.start.Add(3 * interval)); to = to.Add(tc.every) {
				for _, i := range dueSlice(tc.n, interval, from, to) {
					count[i]++
				}
				from = to
			}
			for i, c := range count {
				if c != 3 {
					t.Errorf("item %d due %d times in 3 intervals", i, c)
				}
			}
			if got := dueSlice(tc.n, interval, from, from.Add(interval)); len(got) != tc.n || !slices.IsSorted(got) {
				t.Errorf("a whole interval: %v", got)
			}
			if got := dueSlice(tc.n, interval, from, from); len(got) != 0 {
				t.Errorf("an empty window: %v", got)
			}
		})
	}
}

// TestDNSWatchEvery ensures the run period is a 360th of the interval
// within its bounds.
func TestDNSWatchEvery(t *testing.T) {
	for interval, want := range map[time.Duration]time.Duration{
		6 * time.Hour:   time.Minute,
		time.Hour:       10 * time.Second,
		time.Second:     100 * time.Millisecond,
		0:               time.Minute,
		720 * time.Hour: time.Minute,
	} {
		if got := (&DNSWatch{Interval: interval}).Every(); got != want {
			t.Errorf("interval %v: every %v, want %v", interval, got, want)
		}
	}
}

// TestDNSWatchStoreFailureIsAnError ensures a store that fails makes the
// run fail, so that the scheduler logs and counts it, while a run
// cancelled by shutdown is no failure.
func TestDNSWatchStoreFailureIsAnError(t *testing.T) {
	e := newDNSEnv(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := (&DNSWatch{Store: e.db, Resolver: e.res}).Run(ctx, storetest.Epoch()); err != nil {
		t.Errorf("cancelled run: %v", err)
	}
	closed, err := store.Open(filepath.Join(t.TempDir(), "closed.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	if err := (&DNSWatch{Store: closed, Resolver: e.res}).Run(t.Context(), storetest.Epoch()); err == nil {
		t.Error("a run over a closed store succeeded")
	}
}

// TestDNSWatchFirstCheckComparesWithRegistration ensures the first look
// flags a record weaker than the one seen when the domain was registered
// (policy_weakened), and stays silent when it is as strong.
func TestDNSWatchFirstCheckComparesWithRegistration(t *testing.T) {
	e := newDNSEnv(t)
	mk := func(name string) *store.Domain {
		d := e.domain(t, name, store.DomainActive)
		d, err := e.db.UpdateDomain(e.org.ID, d.ID, func(d *store.Domain) error {
			d.RegisteredDNSRecord = "v=DMARC1; p=reject; rua=mailto:" + d.ReportingEmail
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	weaker, same := mk("weaker.example"), mk("same.example")
	e.publish(weaker, "v=DMARC1; p=none; rua=mailto:"+weaker.ReportingEmail)
	e.publish(same, "v=DMARC1; p=reject; rua=mailto:"+same.ReportingEmail)
	for _, d := range []*store.Domain{weaker, same} {
		if err := e.watch().Check(t.Context(), d.ID); err != nil {
			t.Fatal(err)
		}
	}
	as := e.alerts(t)
	if len(as) != 1 || as[0].Type != alert.TypePolicyWeakened || *as[0].DomainID != weaker.ID {
		t.Fatalf("alerts %+v, want one policy_weakened for %s", as, weaker.Name)
	}
	var det struct {
		OldPolicy *struct{ P string } `json:"old_policy"`
		NewPolicy *struct{ P string } `json:"new_policy"`
	}
	if err := json.Unmarshal(as[0].Details, &det); err != nil || det.OldPolicy == nil || det.OldPolicy.P != "reject" || det.NewPolicy.P != "none" {
		t.Errorf("details %s (%v)", as[0].Details, err)
	}
	if got := e.reload(t, same).LastDNSRecord; got != "v=DMARC1; p=reject; rua=mailto:"+same.ReportingEmail {
		t.Errorf("same.example remembered %q", got)
	}
}

// TestDNSWatchEscapedRecordIsNoChange ensures a record remembered in the
// zone-file escaping dmarcd read TXT records in before issue 24 (\" for a
// quote, \\ for a backslash) is the same record as its text as
// published: no alert, and the record is remembered as published.
func TestDNSWatchEscapedRecordIsNoChange(t *testing.T) {
	e := newDNSEnv(t)
	d := e.domain(t, "escaped.example", store.DomainActive)
	published := "v=DMARC1; p=reject; rua=mailto:" + d.ReportingEmail + `; x-note="ops"`
	escaped := "v=DMARC1; p=reject; rua=mailto:" + d.ReportingEmail + `; x-note=\"ops\"`
	if _, err := e.db.RecordDNSCheck(store.DNSCheck{DomainID: d.ID, Record: escaped}); err != nil {
		t.Fatal(err)
	}
	e.publish(d, published)
	if err := e.watch().Check(t.Context(), d.ID); err != nil {
		t.Fatal(err)
	}
	if as := e.alerts(t); len(as) != 0 {
		t.Errorf("alerts for a record only escaped differently: %+v", as[0])
	}
	if got := e.reload(t, d); got.LastDNSRecord != published || got.Status != store.DomainActive {
		t.Errorf("remembered %q (status %s), want %q", got.LastDNSRecord, got.Status, published)
	}
	// A real change after that still raises its alert.
	e.publish(d, "v=DMARC1; p=reject; rua=mailto:"+d.ReportingEmail)
	if err := e.watch().Check(t.Context(), d.ID); err != nil {
		t.Fatal(err)
	}
	if as := e.alerts(t); len(as) != 1 || as[0].Type != alert.TypeDNSRecordChanged {
		t.Errorf("alerts after a change: %v", as)
	}
}
