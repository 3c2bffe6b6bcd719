package store_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/dmarc/tlsrpt"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// tlsReport builds a parsed report of org for day d of November 2026: an
// sts policy with succ/fail sessions and one failure detail per result
// type given, each of 1 session from 192.0.2.<i> to mx<i>.example.
func tlsReport(org, id string, d int, succ, fail int64, results ...string) *tlsrpt.Report {
	begin := time.Date(2026, 11, d, 0, 0, 0, 0, time.UTC)
	p := tlsrpt.Policy{Type: tlsrpt.PolicySTS, Domain: "alpha.example", Strings: []string{"version: STSv1", "mode: enforce"},
		SuccessfulSessions: succ, FailedSessions: fail}
	for i, rt := range results {
		p.Failures = append(p.Failures, tlsrpt.FailureDetail{ResultType: rt, FailedSessions: 1,
			SendingMTAIP: fmt.Sprintf("192.0.2.%d", i+1), ReceivingMXHostname: fmt.Sprintf("mx%d.example", i+1)})
	}
	return &tlsrpt.Report{OrganizationName: org, ReportID: id, DateBegin: begin, DateEnd: begin.Add(24*time.Hour - time.Second),
		Policies: []tlsrpt.Policy{p, {Type: tlsrpt.PolicyNoPolicyFound, Domain: "alpha.example", SuccessfulSessions: 5}}}
}

// tlsStored is what storing a TLS report did: the id of the report
// stored, or of the one already stored under its identity (Duplicate).
type tlsStored struct {
	ID        string
	Duplicate bool
}

func mustStoreTLS(t testing.TB, db *store.DB, dom *store.Domain, r *tlsrpt.Report) tlsStored {
	t.Helper()
	id, dup := storetest.MustTLSReport(t, db, dom, r, time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC))
	return tlsStored{ID: id, Duplicate: dup}
}

// TestStoreTLSReport ensures a stored report reads back whole, a second
// copy (same reporter, id and domain) is a duplicate, and the same report
// for another domain or from another reporter is stored again.
func TestStoreTLSReport(t *testing.T) {
	e := newFailEnv(t)
	r := tlsReport("Google Inc.", "r1", 20, 100, 2, "certificate-expired", "made-up-type")
	first := mustStoreTLS(t, e.db, e.a1, r)
	if first.Duplicate || !store.ValidID(first.ID) {
		t.Fatalf("first = %+v", first)
	}
	got, err := e.db.FindTLSReport(e.orgA.ID, first.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.OrganizationName != "Google Inc." || got.ReportID != "r1" || got.DomainID != e.a1.ID || got.SuccessfulSessions != 105 ||
		got.FailedSessions != 2 || got.ContactInfo != nil || !got.DateBegin.Equal(r.DateBegin) || len(got.Policies) != 2 {
		t.Fatalf("got %+v", got.TLSReport)
	}
	p := got.Policies[0]
	if p.PolicyType != "sts" || len(p.PolicyString) != 2 || p.MXHost == nil || len(p.FailureDetails) != 2 ||
		p.FailureDetails[1].ResultType != "made-up-type" || *p.FailureDetails[0].SendingMTAIP != "192.0.2.1" ||
		p.FailureDetails[0].ReceivingMXHelo != nil {
		t.Fatalf("policy %+v", p)
	}
	dup := mustStoreTLS(t, e.db, e.a1, tlsReport("Google Inc.", "r1", 21, 1, 1))
	if !dup.Duplicate || dup.ID != first.ID {
		t.Fatalf("duplicate = %+v", dup)
	}
	if o := mustStoreTLS(t, e.db, e.a2, r); o.Duplicate {
		t.Fatal("same report for another domain is a duplicate")
	}
	if o := mustStoreTLS(t, e.db, e.a1, tlsReport("Microsoft", "r1", 20, 1, 0)); o.Duplicate {
		t.Fatal("same id from another reporter is a duplicate")
	}
	l, err := e.db.ListTLSReports(e.orgA.ID, store.TLSFilter{Page: store.Page{Page: 1, Limit: 10}})
	if err != nil || l.Total != 3 {
		t.Fatalf("list: %+v, %v", l, err)
	}
	if err := e.db.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestListTLSReports ensures lists are newest date_begin first, filter by
// domain and dates, page, follow cursors without gaps or repeats while
// reports arrive, and hide other organizations.
func TestListTLSReports(t *testing.T) {
	e := newFailEnv(t)
	for d := 1; d <= 9; d++ {
		mustStoreTLS(t, e.db, e.a1, tlsReport("G", fmt.Sprint("a", d), d, 1, 0))
	}
	mustStoreTLS(t, e.db, e.a2, tlsReport("G", "b", 5, 1, 0))
	mustStoreTLS(t, e.db, e.b1, tlsReport("G", "c", 5, 1, 0))
	list := func(f store.TLSFilter) *store.TLSList {
		t.Helper()
		f.Page.Page = max(f.Page.Page, 1)
		if f.Page.Limit == 0 {
			f.Page.Limit = 100
		}
		l, err := e.db.ListTLSReports(e.orgA.ID, f)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	all := list(store.TLSFilter{})
	if all.Total != 10 || all.Reports[0].ReportID != "a9" || all.Reports[9].ReportID != "a1" || all.NextCursor != "" {
		t.Fatalf("all: total %d first %s", all.Total, all.Reports[0].ReportID)
	}
	if l := list(store.TLSFilter{DomainID: e.a2.ID}); l.Total != 1 || l.Reports[0].ReportID != "b" {
		t.Errorf("domain filter: %+v", l)
	}
	from, to := time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 5, 23, 59, 59, 0, time.UTC)
	if l := list(store.TLSFilter{DomainID: e.a1.ID, DateFrom: &from, DateTo: &to}); l.Total != 3 || l.Reports[0].ReportID != "a5" || l.Reports[2].ReportID != "a3" {
		t.Errorf("date filter: total %d", l.Total)
	}
	early := to.Add(-time.Second) // a5 ends at 23:59:59, so it is out
	if l := list(store.TLSFilter{DomainID: e.a1.ID, DateFrom: &from, DateTo: &early}); l.Total != 2 {
		t.Errorf("date_to on date_end: total %d", l.Total)
	}
	// b and a5 share date_begin: the one stored last comes first.
	if l := list(store.TLSFilter{Page: store.Page{Page: 2, Limit: 4}}); len(l.Reports) != 4 || l.Reports[0].ReportID != "b" || l.Reports[1].ReportID != "a5" || l.NextCursor == "" {
		t.Errorf("page 2: %+v", l)
	}
	if l := list(store.TLSFilter{Page: store.Page{Page: 9, Limit: 4}}); len(l.Reports) != 0 || l.Total != 10 {
		t.Errorf("page past the end: %+v", l)
	}
	// Cursors: 3 at a time, with a new newest report arriving mid-way.
	var seen []string
	cur := ""
	for i := 0; ; i++ {
		l := list(store.TLSFilter{DomainID: e.a1.ID, Cursor: cur, Page: store.Page{Limit: 3}})
		for _, r := range l.Reports {
			seen = append(seen, r.ReportID)
		}
		if i == 0 {
			mustStoreTLS(t, e.db, e.a1, tlsReport("G", "new", 30, 1, 0))
		}
		if cur = l.NextCursor; cur == "" {
			break
		}
	}
	if fmt.Sprint(seen) != "[a9 a8 a7 a6 a5 a4 a3 a2 a1]" {
		t.Errorf("cursor walk %v", seen)
	}
	if _, err := e.db.ListTLSReports(e.orgA.ID, store.TLSFilter{Cursor: "garbage!", Page: store.Page{Limit: 3}}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("bad cursor: %v", err)
	}
	if _, err := e.db.ListTLSReports(e.orgA.ID, store.TLSFilter{DomainID: e.b1.ID, Page: store.Page{Page: 1, Limit: 3}}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("other org's domain: %v", err)
	}
	if _, err := e.db.ListTLSReports(e.orgA.ID, store.TLSFilter{}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("zero page: %v", err)
	}
	if l, _ := e.db.ListTLSReports(e.orgB.ID, store.TLSFilter{Page: store.Page{Page: 1, Limit: 100}}); l.Total != 1 || l.Reports[0].ReportID != "c" {
		t.Errorf("org B sees %+v", l)
	}
	id := all.Reports[0].ID
	if _, err := e.db.FindTLSReport(e.orgB.ID, id); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("other org's report: %v", err)
	}
	if _, err := e.db.FindTLSReport(e.orgA.ID, "x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("malformed id: %v", err)
	}
}

// TestTLSStatistics ensures the roll-ups add up by day, result type,
// policy type, MX and IP, within the range only.
func TestTLSStatistics(t *testing.T) {
	e := newFailEnv(t)
	mustStoreTLS(t, e.db, e.a1, tlsReport("G", "1", 20, 100, 2, "certificate-expired", "starttls-not-supported"))
	mustStoreTLS(t, e.db, e.a1, tlsReport("M", "2", 20, 50, 1, "certificate-expired"))
	mustStoreTLS(t, e.db, e.a1, tlsReport("G", "3", 22, 10, 0))
	mustStoreTLS(t, e.db, e.a1, tlsReport("G", "4", 25, 1000, 1000, "dane-required")) // outside
	mustStoreTLS(t, e.db, e.a2, tlsReport("G", "5", 20, 7, 7, "tlsa-invalid"))        // other domain
	st, err := e.db.TLSStatistics(e.orgA.ID, e.a1.ID, time.Date(2026, 11, 19, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if st.ReportCount != 3 || st.SuccessfulSessions != 175 || st.FailedSessions != 3 || len(st.ByDay) != 4 {
		t.Fatalf("totals %+v", st)
	}
	if d := st.ByDay[1]; d.Date != "2026-11-20" || d.SuccessfulSessions != 160 || d.FailedSessions != 3 || d.Reports != 2 {
		t.Errorf("day %+v", d)
	}
	if fmt.Sprint(st.ByResultType) != "[{certificate-expired 2} {starttls-not-supported 1}]" {
		t.Errorf("by result %v", st.ByResultType)
	}
	if fmt.Sprint(st.ByPolicyType) != "[{no-policy-found 15 0} {sts 160 3}]" {
		t.Errorf("by policy %v", st.ByPolicyType)
	}
	if fmt.Sprint(st.TopReceivingMX) != "[{mx1.example 2} {mx2.example 1}]" || fmt.Sprint(st.TopSendingIPs) != "[{192.0.2.1 2} {192.0.2.2 1}]" {
		t.Errorf("top %v %v", st.TopReceivingMX, st.TopSendingIPs)
	}
	if _, err := e.db.TLSStatistics(e.orgB.ID, e.a1.ID, time.Now(), time.Now()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("other org: %v", err)
	}
	if _, err := e.db.TLSStatistics(e.orgA.ID, e.a1.ID, time.Now(), time.Now().Add(-48*time.Hour)); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("reversed range: %v", err)
	}
}

// TestTLSRetentionAndCascade ensures retention deletes reports that ended
// before the cutoff with their share of the roll-ups (a re-sent report is
// then stored again), and deleting a domain deletes all of its TLS data.
func TestTLSRetentionAndCascade(t *testing.T) {
	e := newFailEnv(t)
	mustStoreTLS(t, e.db, e.a1, tlsReport("G", "old", 1, 10, 1, "certificate-expired"))
	mustStoreTLS(t, e.db, e.a1, tlsReport("M", "old2", 1, 5, 0))
	mustStoreTLS(t, e.db, e.a1, tlsReport("G", "new", 20, 10, 1, "certificate-expired"))
	mustStoreTLS(t, e.db, e.b1, tlsReport("G", "old", 1, 10, 1))
	n, err := e.db.DeleteTLSReportsBefore(time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC))
	if err != nil || n != 3 {
		t.Fatalf("deleted %d, %v", n, err)
	}
	st, err := e.db.TLSStatistics(e.orgA.ID, e.a1.ID, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
	if err != nil || st.ReportCount != 1 || st.ByDay[0].Reports != 0 || st.FailedSessions != 1 {
		t.Fatalf("after retention %+v, %v", st, err)
	}
	if o := mustStoreTLS(t, e.db, e.a1, tlsReport("G", "old", 1, 10, 1)); o.Duplicate {
		t.Error("deleted report still deduplicated")
	}
	if err := e.db.DeleteDomain(e.orgA.ID, e.a1.ID); err != nil {
		t.Fatal(err)
	}
	l, err := e.db.ListTLSReports(e.orgA.ID, store.TLSFilter{Page: store.Page{Page: 1, Limit: 10}})
	if err != nil || l.Total != 0 {
		t.Fatalf("after cascade %+v, %v", l, err)
	}
	a1again := storetest.MustDomain(t, e.db, e.orgA.ID, "alpha.example")
	st, err = e.db.TLSStatistics(e.orgA.ID, a1again.ID, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
	if err != nil || st.ReportCount != 0 {
		t.Fatalf("new domain stats %+v, %v", st, err)
	}
	if err := e.db.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestTLSFailureRateAlert ensures a stored TLS report over the failure
// threshold raises tls_failure_rate in its own commit, a duplicate or a
// report under the threshold raises nothing more, and the alert names the
// domain and the report.
func TestTLSFailureRateAlert(t *testing.T) {
	e := newFailEnv(t) // the clock stands at 2026-11-22 09:30 UTC
	alerts := func() []*store.Alert {
		t.Helper()
		as, _, err := e.db.ListAlerts(e.orgA.ID, store.AlertFilter{Page: store.Page{Page: 1, Limit: 100}})
		if err != nil {
			t.Fatal(err)
		}
		return as
	}
	mustStoreTLS(t, e.db, e.a1, tlsReport("Google Inc.", "ok", 21, 995, 5, "certificate-expired"))
	if as := alerts(); len(as) != 0 {
		t.Fatalf("under the threshold: %+v", as[0])
	}
	bad := tlsReport("Google Inc.", "bad", 21, 145, 30, "certificate-expired", "starttls-not-supported")
	first := mustStoreTLS(t, e.db, e.a1, bad)
	as := alerts()
	if len(as) != 1 {
		t.Fatalf("%d alerts, want 1", len(as))
	}
	a := as[0]
	if a.Type != "tls_failure_rate" || a.Severity != "warning" || a.DomainID == nil || *a.DomainID != e.a1.ID ||
		!strings.Contains(string(a.Details), first.ID) {
		t.Fatalf("alert %+v details %s", a, a.Details)
	}
	mustStoreTLS(t, e.db, e.a1, bad) // a duplicate
	mustStoreTLS(t, e.db, e.a1, tlsReport("Microsoft", "bad2", 21, 145, 30))
	if n := len(alerts()); n != 1 {
		t.Fatalf("%d alerts after a duplicate and a second warning the same day, want 1", n)
	}
	mustStoreTLS(t, e.db, e.a1, tlsReport("Microsoft", "worse", 21, 10, 30))
	if as := alerts(); len(as) != 2 || as[0].Severity != "critical" {
		t.Fatalf("a critical rate after a warning: %d alerts", len(as))
	}
}
