package store_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
	bolt "go.etcd.io/bbolt"
)

// failEnv is a store with two organizations: A with domains a1 and a2, B
// with b1 (the same name as a1).
type failEnv struct {
	db         *store.DB
	clock      *storetest.Clock
	ing        *store.Ingester
	orgA, orgB *store.Organization
	a1, a2, b1 *store.Domain
}

func newFailEnv(t *testing.T) *failEnv {
	t.Helper()
	clock := storetest.NewClock(storetest.Epoch())
	db := storetest.OpenWithClock(t, clock)
	e := &failEnv{db: db, clock: clock, ing: db.NewIngester()}
	e.orgA = storetest.MustOrganization(t, db, "alpha", store.PlanUnlimited)
	e.orgB = storetest.MustOrganization(t, db, "beta", store.PlanBusiness)
	e.a1 = storetest.MustDomain(t, db, e.orgA.ID, "alpha.example")
	e.a2 = storetest.MustDomain(t, db, e.orgA.ID, "second.example")
	e.b1 = storetest.MustDomain(t, db, e.orgB.ID, "alpha.example")
	return e
}

func sptr(s string) *string { return &s }

// failGeo is the geolocation the tests give an IP: by its last octet.
func failGeo(ip string) *store.Geo {
	switch {
	case strings.HasSuffix(ip, ".1"):
		return &store.Geo{CountryCode: sptr("GB"), CountryName: sptr("United Kingdom"), ASN: new(uint32(20712)), ASOrg: sptr("A&A")}
	case strings.HasSuffix(ip, ".2"):
		return &store.Geo{CountryCode: sptr("US"), CountryName: sptr("United States"), ASN: new(uint32(15169)), ASOrg: sptr("GOOGLE")}
	}
	return nil
}

// failReport is a failure report of dom from ip that arrived at arrival,
// naming checks as failed.
func failReport(dom *store.Domain, arrival time.Time, ip string, checks ...string) *store.FailureReportDetail {
	r := &store.FailureReport{DomainID: dom.ID, Domain: dom.Name, OrgID: dom.OrgID,
		ReceivedAt: storetest.Epoch(), ArrivalDate: arrival, Reporter: sptr("mx.reporter.example"),
		OriginalMailFrom: sptr("bounce@evil.test"), OriginalRcptTo: sptr("user@" + dom.Name),
		ReportedDomain: sptr(dom.Name), Subject: sptr("Invoice"), MessageID: sptr(store.NewID() + "@evil.test"),
		AuthFailure: checks, DeliveryResult: sptr("reject"),
		AuthenticationResults: store.FailureAuthResults{DMARC: sptr("fail"), SPF: sptr("fail"), DKIM: sptr("none")}}
	if ip != "" {
		r.SourceIP, r.Geo = sptr(ip), failGeo(ip)
	}
	return &store.FailureReportDetail{FailureReport: r}
}

func mustFailureDraft(t testing.TB, d *store.FailureReportDetail) *store.FailureDraft {
	t.Helper()
	f, err := store.NewFailureDraft(d)
	if err != nil {
		t.Fatalf("NewFailureDraft: %v", err)
	}
	return f
}

// commitFailures stores the reports in one commit and returns their drafts.
func (e *failEnv) commitFailures(t testing.TB, reps ...*store.FailureReportDetail) []*store.FailureDraft {
	t.Helper()
	var drafts []*store.FailureDraft
	for _, r := range reps {
		drafts = append(drafts, mustFailureDraft(t, r))
	}
	if _, err := e.ing.Commit(&store.IngestBatch{Failures: drafts}); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	return drafts
}

func day(d, h int) time.Time { return time.Date(2026, 11, d, h, 0, 0, 0, time.UTC) }

// TestCommitFailure ensures a committed failure report reads back whole,
// headers included, from its organization only.
func TestCommitFailure(t *testing.T) {
	e := newFailEnv(t)
	in := failReport(e.a1, day(20, 8), "192.0.2.1", "dmarc", "spf")
	in.DKIMDomain, in.DKIMSelector = sptr("evil.test"), sptr("s1")
	in.Headers = []store.FailureHeader{{Name: "From", Value: "a@alpha.example"}, {Name: "Subject", Value: "Invoice"}, {Name: "Received", Value: "x"}}
	f := e.commitFailures(t, in)[0]
	if out := f.Outcome(); !out.Stored || out.DuplicateID != "" || out.DomainGone {
		t.Fatalf("outcome %+v, want stored", out)
	}
	got, err := e.db.FindFailureReport(e.orgA.ID, f.Report().ID)
	if err != nil {
		t.Fatal(err)
	}
	want := *in.FailureReport
	want.ID, want.FeedbackType = f.Report().ID, "auth-failure"
	want.AuthFailureReported = want.AuthFailure // none given: the families
	if !reflect.DeepEqual(got.FailureReport, &want) {
		t.Errorf("report\n got %+v\nwant %+v", got.FailureReport, &want)
	}
	if !reflect.DeepEqual(got.Headers, in.Headers) || *got.DKIMDomain != "evil.test" || *got.DKIMSelector != "s1" {
		t.Errorf("headers %v dkim %v/%v", got.Headers, got.DKIMDomain, got.DKIMSelector)
	}
	for _, c := range []struct{ org, id string }{{e.orgB.ID, f.Report().ID}, {e.orgA.ID, store.NewID()}, {e.orgA.ID, "nope"}} {
		if _, err := e.db.FindFailureReport(c.org, c.id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("FindFailureReport(%s, %s) = %v, want ErrNotFound", c.org, c.id, err)
		}
	}
	noHeaders := e.commitFailures(t, failReport(e.a1, day(20, 9), "192.0.2.1", "dmarc"))[0]
	if got, _ := e.db.FindFailureReport(e.orgA.ID, noHeaders.Report().ID); got.Headers != nil || got.DKIMDomain != nil {
		t.Errorf("a report without headers reads back with %v / %v", got.Headers, got.DKIMDomain)
	}
}

// TestCommitFailureOutcomes ensures duplicates (same reporter, source IP,
// message id, arrival; also within one commit) are stored once, that
// another domain or another message id is no duplicate, and that a report
// of a deleted domain is not stored.
func TestCommitFailureOutcomes(t *testing.T) {
	e := newFailEnv(t)
	first := failReport(e.a1, day(20, 8), "192.0.2.1", "dmarc")
	again := func(change func(r *store.FailureReport)) *store.FailureReportDetail {
		r := *first.FailureReport
		change(&r)
		return &store.FailureReportDetail{FailureReport: &r}
	}
	stored := e.commitFailures(t, first)[0]
	gone := storetest.MustDomain(t, e.db, e.orgA.ID, "gone.example")
	goneRep := failReport(gone, day(20, 8), "192.0.2.9", "dmarc")
	goneDraft := mustFailureDraft(t, goneRep)
	if err := e.db.DeleteDomain(e.orgA.ID, gone.ID); err != nil {
		t.Fatal(err)
	}
	drafts := []*store.FailureDraft{
		mustFailureDraft(t, again(func(*store.FailureReport) {})),
		mustFailureDraft(t, again(func(r *store.FailureReport) { r.Subject = sptr("other subject, same message") })),
		mustFailureDraft(t, again(func(r *store.FailureReport) { r.MessageID = sptr("other@evil.test") })),
		mustFailureDraft(t, again(func(r *store.FailureReport) { r.SourceIP = sptr("192.0.2.2") })),
		mustFailureDraft(t, again(func(r *store.FailureReport) { r.Reporter = sptr("other.example") })),
		mustFailureDraft(t, again(func(r *store.FailureReport) { r.ArrivalDate = r.ArrivalDate.Add(time.Second) })),
		mustFailureDraft(t, again(func(r *store.FailureReport) { r.DomainID, r.Domain = e.a2.ID, e.a2.Name })),
		mustFailureDraft(t, again(func(r *store.FailureReport) { r.MessageID = sptr("other@evil.test") })), // dup of [2], same commit
		goneDraft,
	}
	if _, err := e.ing.Commit(&store.IngestBatch{Failures: drafts}); err != nil {
		t.Fatal(err)
	}
	want := []string{"dup:" + stored.Report().ID, "dup:" + stored.Report().ID, "stored", "stored", "stored", "stored", "stored", "dup:" + drafts[2].Report().ID, "gone"}
	for i, f := range drafts {
		o := f.Outcome()
		got := "stored"
		switch {
		case o.DomainGone:
			got = "gone"
		case o.DuplicateID != "":
			got = "dup:" + o.DuplicateID
		case !o.Stored:
			got = "nothing"
		}
		if got != want[i] {
			t.Errorf("draft %d: %s, want %s", i, got, want[i])
		}
	}
	_, total, err := e.db.ListFailureReports(e.orgA.ID, store.FailureFilter{Page: store.Page{Page: 1, Limit: 100}})
	if err != nil || total != 6 {
		t.Errorf("organization A has %d failure reports (%v), want 6", total, err)
	}
}

// TestNewFailureDraftInvalid ensures drafts that cannot be stored are refused.
func TestNewFailureDraftInvalid(t *testing.T) {
	e := newFailEnv(t)
	for _, c := range []struct {
		name   string
		change func(r *store.FailureReport)
	}{
		{"no domain", func(r *store.FailureReport) { r.DomainID = "" }},
		{"malformed org", func(r *store.FailureReport) { r.OrgID = "x" }},
		{"no receive time", func(r *store.FailureReport) { r.ReceivedAt = time.Time{} }},
		{"source IP not an IP", func(r *store.FailureReport) { r.SourceIP = sptr("mail.example") }},
		{"source IP with a zone", func(r *store.FailureReport) { r.SourceIP = sptr("fe80::1%eth0") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := failReport(e.a1, day(20, 8), "192.0.2.1", "dmarc")
			c.change(d.FailureReport)
			if _, err := store.NewFailureDraft(d); !errors.Is(err, store.ErrInvalid) {
				t.Errorf("err = %v, want ErrInvalid", err)
			}
		})
	}
	if _, err := store.NewFailureDraft(&store.FailureReportDetail{}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("empty detail: err = %v, want ErrInvalid", err)
	}
}

// TestNewFailureDraftNormalizes ensures the draft keeps what the API
// promises: arrival dates never after receipt, only dmarc/spf/dkim in
// auth_failure, null for empty text, canonical IPs, bounded text and
// headers.
func TestNewFailureDraftNormalizes(t *testing.T) {
	e := newFailEnv(t)
	d := failReport(e.a1, time.Time{}, "::ffff:192.0.2.1", "bodyhash", "dkim", "spf", "adsp", "dmarc", "dkim")
	d.Subject = sptr(strings.Repeat("é", 600)) // 1200 bytes
	d.DeliveryResult = sptr("")
	d.Headers = make([]store.FailureHeader, 1500)
	for i := range d.Headers {
		d.Headers[i] = store.FailureHeader{Name: "X-H", Value: fmt.Sprint(i)}
	}
	f := mustFailureDraft(t, d)
	r := f.Report()
	if !r.ArrivalDate.Equal(storetest.Epoch()) {
		t.Errorf("no arrival date: %v, want the receive time", r.ArrivalDate)
	}
	if !reflect.DeepEqual(r.AuthFailure, []string{"dmarc", "spf", "dkim"}) {
		t.Errorf("auth_failure %v", r.AuthFailure)
	}
	if *r.SourceIP != "192.0.2.1" || r.DeliveryResult != nil {
		t.Errorf("source IP %q, delivery result %v", *r.SourceIP, r.DeliveryResult)
	}
	if len(*r.Subject) > 1024 || !utf8.ValidString(*r.Subject) {
		t.Errorf("subject of %d bytes, valid UTF-8 %v", len(*r.Subject), utf8.ValidString(*r.Subject))
	}
	late := failReport(e.a1, storetest.Epoch().Add(48*time.Hour), "", "dkim")
	if r := mustFailureDraft(t, late).Report(); !r.ArrivalDate.Equal(storetest.Epoch()) || r.SourceIP != nil {
		t.Errorf("arrival after receipt: %v (source %v), want the receive time", r.ArrivalDate, r.SourceIP)
	}
	none := failReport(e.a1, day(1, 0), "192.0.2.1")
	if r := mustFailureDraft(t, none).Report(); r.AuthFailure == nil || len(r.AuthFailure) != 0 {
		t.Errorf("no failed check: %#v, want []", r.AuthFailure)
	}
	if _, err := e.ing.Commit(&store.IngestBatch{Failures: []*store.FailureDraft{f}}); err != nil {
		t.Fatal(err)
	}
	got, err := e.db.FindFailureReport(e.orgA.ID, f.Report().ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Headers) != 1000 || got.Headers[999].Value != "999" {
		t.Errorf("%d headers kept, want the first 1000", len(got.Headers))
	}
}

// TestListFailureReports ensures every filter, their combinations and
// pagination select the right reports, newest arrival first, and that an
// unknown filter value is refused.
func TestListFailureReports(t *testing.T) {
	e := newFailEnv(t)
	ds := e.commitFailures(t,
		failReport(e.a1, day(1, 10), "192.0.2.1", "dmarc"),               // 0
		failReport(e.a1, day(3, 10), "192.0.2.2", "dmarc", "spf"),        // 1
		failReport(e.a2, day(3, 12), "192.0.2.1", "dkim"),                // 2
		failReport(e.a1, day(5, 0), "", "dmarc", "dkim"),                 // 3
		failReport(e.a2, day(5, 0), "2001:db8::1", "spf"),                // 4: same second as 3, stored after
		failReport(e.b1, day(4, 0), "192.0.2.1", "dmarc", "spf", "dkim"), // 5: other organization
	)
	unix := func(t time.Time) *time.Time { return &t }
	for _, c := range []struct {
		name string
		f    store.FailureFilter
		want []int
	}{
		{"all", store.FailureFilter{}, []int{4, 3, 2, 1, 0}},
		{"domain a1", store.FailureFilter{DomainID: e.a1.ID}, []int{3, 1, 0}},
		{"domain a2", store.FailureFilter{DomainID: e.a2.ID}, []int{4, 2}},
		{"from", store.FailureFilter{DateFrom: unix(day(3, 12))}, []int{4, 3, 2}},
		{"to", store.FailureFilter{DateTo: unix(day(3, 12))}, []int{2, 1, 0}},
		{"to just before", store.FailureFilter{DateTo: unix(day(3, 12).Add(-time.Second))}, []int{1, 0}},
		{"from to", store.FailureFilter{DateFrom: unix(day(3, 0)), DateTo: unix(day(4, 0))}, []int{2, 1}},
		{"empty range", store.FailureFilter{DateFrom: unix(day(6, 0))}, []int{}},
		{"ip", store.FailureFilter{SourceIP: "192.0.2.1"}, []int{2, 0}},
		{"ipv6", store.FailureFilter{SourceIP: "2001:db8::1"}, []int{4}},
		{"unknown ip", store.FailureFilter{SourceIP: "192.0.2.3"}, []int{}},
		{"dmarc", store.FailureFilter{AuthFailure: "dmarc"}, []int{3, 1, 0}},
		{"spf", store.FailureFilter{AuthFailure: "spf"}, []int{4, 1}},
		{"dkim", store.FailureFilter{AuthFailure: "dkim"}, []int{3, 2}},
		{"dkim a1 from day 2", store.FailureFilter{AuthFailure: "dkim", DomainID: e.a1.ID, DateFrom: unix(day(2, 0))}, []int{3}},
		{"ip and dmarc", store.FailureFilter{SourceIP: "192.0.2.1", AuthFailure: "dmarc"}, []int{0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.f.Page = store.Page{Page: 1, Limit: 100}
			got, total, err := e.db.ListFailureReports(e.orgA.ID, c.f)
			if err != nil {
				t.Fatal(err)
			}
			var ids, want []string
			for _, r := range got {
				ids = append(ids, r.ID)
			}
			for _, i := range c.want {
				want = append(want, ds[i].Report().ID)
			}
			if total != len(c.want) || fmt.Sprint(ids) != fmt.Sprint(want) {
				t.Errorf("got %d %v, want %d %v", total, ids, len(c.want), want)
			}
		})
	}
	t.Run("pages", func(t *testing.T) {
		var ids []string
		for p := 1; p <= 3; p++ {
			got, total, err := e.db.ListFailureReports(e.orgA.ID, store.FailureFilter{Page: store.Page{Page: p, Limit: 2}})
			if err != nil || total != 5 {
				t.Fatalf("page %d: total %d, %v", p, total, err)
			}
			for _, r := range got {
				ids = append(ids, r.ID)
			}
		}
		want := []string{ds[4].Report().ID, ds[3].Report().ID, ds[2].Report().ID, ds[1].Report().ID, ds[0].Report().ID}
		if fmt.Sprint(ids) != fmt.Sprint(want) {
			t.Errorf("pages %v, want %v", ids, want)
		}
	})
	for _, c := range []struct {
		name string
		f    store.FailureFilter
		kind error
	}{
		{"other org's domain", store.FailureFilter{DomainID: e.b1.ID}, store.ErrNotFound},
		{"unknown domain", store.FailureFilter{DomainID: store.NewID()}, store.ErrNotFound},
		{"unknown check", store.FailureFilter{AuthFailure: "adsp"}, store.ErrInvalid},
		{"page 0", store.FailureFilter{Page: store.Page{Page: 0, Limit: 1}}, store.ErrInvalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.f.Page.Limit == 0 {
				c.f.Page = store.Page{Page: 1, Limit: 10}
			}
			if _, _, err := e.db.ListFailureReports(e.orgA.ID, c.f); !errors.Is(err, c.kind) {
				t.Errorf("err = %v, want %v", err, c.kind)
			}
		})
	}
}

// TestFailureSummary ensures the summary covers the 7 UTC days ending now,
// with a row for each day (zeros included), per-check, per-domain and
// per-source counts, and nothing from before the window.
func TestFailureSummary(t *testing.T) {
	e := newFailEnv(t)
	now := day(22, 9).Add(30 * time.Minute)
	e.commitFailures(t,
		failReport(e.a1, day(15, 23), "192.0.2.1", "dmarc"), // before the window
		failReport(e.a1, day(16, 0), "192.0.2.1", "dmarc"),  // its first second
		failReport(e.a1, day(16, 5), "192.0.2.2", "dmarc", "spf"),
		failReport(e.a2, day(20, 5), "192.0.2.2", "dkim"),
		failReport(e.a2, day(22, 9), "192.0.2.2", "dmarc", "dkim"),
		failReport(e.a1, day(22, 9), "", "dmarc"),
		failReport(e.b1, day(21, 0), "192.0.2.1", "dmarc"), // other organization
	)
	s, err := e.db.FailureSummary(e.orgA.ID, now)
	if err != nil {
		t.Fatal(err)
	}
	if !s.WindowStart.Equal(day(16, 0)) || !s.WindowEnd.Equal(now) {
		t.Errorf("window %v .. %v", s.WindowStart, s.WindowEnd)
	}
	wantDays := "[{2026-11-16 2} {2026-11-17 0} {2026-11-18 0} {2026-11-19 0} {2026-11-20 1} {2026-11-21 0} {2026-11-22 2}]"
	if got := fmt.Sprint(s.ByDay); got != wantDays {
		t.Errorf("by_day %s\n  want %s", got, wantDays)
	}
	if s.Total != 5 || s.ByAuthFailure != (store.FailureCheckCounts{DMARC: 4, SPF: 1, DKIM: 2}) {
		t.Errorf("total %d by_auth_failure %+v", s.Total, s.ByAuthFailure)
	}
	if len(s.ByDomain) != 2 || s.ByDomain[0] != (store.FailureDomainCount{DomainID: e.a1.ID, Domain: e.a1.Name, Count: 3}) ||
		s.ByDomain[1] != (store.FailureDomainCount{DomainID: e.a2.ID, Domain: e.a2.Name, Count: 2}) {
		t.Errorf("by_domain %+v", s.ByDomain)
	}
	if len(s.TopSourceIPs) != 2 || s.TopSourceIPs[0].SourceIP != "192.0.2.2" || s.TopSourceIPs[0].Count != 3 ||
		*s.TopSourceIPs[0].CountryCode != "US" || s.TopSourceIPs[1].SourceIP != "192.0.2.1" || s.TopSourceIPs[1].Count != 1 {
		t.Errorf("top_source_ips %+v", s.TopSourceIPs)
	}
	empty, err := e.db.FailureSummary(e.orgA.ID, day(30, 0))
	if err != nil || empty.Total != 0 || len(empty.ByDay) != 7 || empty.ByDomain == nil || empty.TopSourceIPs == nil {
		t.Errorf("empty window: %+v %v", empty, err)
	}
}

// TestFailureStatistics ensures the statistics match the reports listed
// with the same filter, over whole days (roll-ups) as over ranges that cut
// days (reports read), and group by country, ASN and domain.
func TestFailureStatistics(t *testing.T) {
	e := newFailEnv(t)
	var reps []*store.FailureReportDetail
	checks := [][]string{{"dmarc"}, {"dmarc", "spf"}, {"dkim"}, {"spf", "dkim"}}
	for i := range 60 {
		dom := e.a1
		if i%3 == 0 {
			dom = e.a2
		}
		ip := fmt.Sprintf("192.0.2.%d", i%4)
		reps = append(reps, failReport(dom, day(1, 0).Add(time.Duration(i)*7*time.Hour+time.Duration(i)*time.Minute), ip, checks[i%4]...))
	}
	e.commitFailures(t, reps...)
	at := func(d, h, m int) *time.Time { return new(time.Date(2026, 11, d, h, m, 0, 0, time.UTC)) }
	for _, c := range []struct {
		name     string
		domain   string
		from, to *time.Time
	}{
		{"all", "", nil, nil},
		{"domain", e.a2.ID, nil, nil},
		{"whole days", "", at(3, 0, 0), new(at(6, 0, 0).Add(-time.Second))},
		{"cut days", "", at(3, 5, 30), at(9, 17, 45)},
		{"within one day", "", at(4, 1, 0), at(4, 22, 0)},
		{"from only, cut", e.a1.ID, at(10, 13, 0), nil},
		{"to only, cut", "", nil, at(2, 13, 0)},
		{"to midnight", "", nil, at(3, 0, 0)},
		{"nothing", "", at(30, 0, 0), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, err := e.db.FailureStatistics(e.orgA.ID, store.FailureStatsFilter{DomainID: c.domain, DateFrom: c.from, DateTo: c.to})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]int64{}
			for _, check := range []string{"", "dmarc", "spf", "dkim"} {
				_, n, err := e.db.ListFailureReports(e.orgA.ID, store.FailureFilter{DomainID: c.domain, DateFrom: c.from, DateTo: c.to,
					AuthFailure: check, Page: store.Page{Page: 1, Limit: 1}})
				if err != nil {
					t.Fatal(err)
				}
				want[check] = int64(n)
			}
			got := store.FailureCheckCounts{DMARC: want["dmarc"], SPF: want["spf"], DKIM: want["dkim"]}
			if st.Total != want[""] || st.ByAuthFailure != got {
				t.Errorf("total %d %+v, listing says %d %+v", st.Total, st.ByAuthFailure, want[""], got)
			}
			var byCountry, byASN, byDomain, bySource int64
			for _, g := range st.ByCountry {
				byCountry += g.Count
			}
			for _, g := range st.ByASN {
				byASN += g.Count
			}
			for _, g := range st.ByDomain {
				byDomain += g.Count
			}
			for _, g := range st.TopSourceIPs {
				bySource += g.Count
			}
			if byCountry != st.Total || byASN != st.Total || byDomain != st.Total || bySource != st.Total {
				t.Errorf("groups sum to %d %d %d %d, want %d", byCountry, byASN, byDomain, bySource, st.Total)
			}
		})
	}
	st, err := e.db.FailureStatistics(e.orgA.ID, store.FailureStatsFilter{})
	if err != nil {
		t.Fatal(err)
	}
	// 15 reports per IP; .1 is GB, .2 US, .0 and .3 unknown (nil): most first.
	if len(st.ByCountry) != 3 || st.ByCountry[0].CountryCode != nil || st.ByCountry[0].Count != 30 ||
		*st.ByCountry[1].CountryCode != "GB" || st.ByCountry[1].Count != 15 || *st.ByCountry[2].CountryName != "United States" {
		t.Errorf("by_country %+v", st.ByCountry)
	}
	if len(st.ByASN) != 3 || st.ByASN[0].ASN != nil || *st.ByASN[1].ASN != 15169 || *st.ByASN[2].ASOrg != "A&A" {
		t.Errorf("by_asn %+v", st.ByASN)
	}
	if len(st.ByDomain) != 2 || st.ByDomain[0].DomainID != e.a1.ID || st.ByDomain[0].Count != 40 {
		t.Errorf("by_domain %+v", st.ByDomain)
	}
	for _, f := range []store.FailureStatsFilter{
		{DomainID: e.b1.ID}, {DomainID: store.NewID()},
	} {
		if _, err := e.db.FailureStatistics(e.orgA.ID, f); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%+v: err = %v, want ErrNotFound", f, err)
		}
	}
	if _, err := e.db.FailureStatistics(e.orgA.ID, store.FailureStatsFilter{DateFrom: at(5, 0, 0), DateTo: at(4, 0, 0)}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("reversed range: err = %v, want ErrInvalid", err)
	}
}

// TestFailureTopSourcesCapped ensures a day with more sources than the
// roll-up keeps still counts every report in the totals.
func TestFailureTopSourcesCapped(t *testing.T) {
	e := newFailEnv(t)
	var reps []*store.FailureReportDetail
	n := store.MaxDaySources + 50
	for i := range n {
		reps = append(reps, failReport(e.a1, day(22, 1), fmt.Sprintf("10.%d.%d.9", i/256, i%256), "dmarc"))
	}
	reps = append(reps, failReport(e.a1, day(22, 2), "10.0.0.9", "dmarc"))
	e.commitFailures(t, reps...)
	s, err := e.db.FailureSummary(e.orgA.ID, day(22, 9))
	if err != nil {
		t.Fatal(err)
	}
	if s.Total != int64(n+1) || len(s.TopSourceIPs) != store.FailureTopSources || s.TopSourceIPs[0].SourceIP != "10.0.0.9" || s.TopSourceIPs[0].Count != 2 {
		t.Errorf("total %d, top %+v", s.Total, s.TopSourceIPs)
	}
}

// TestDeleteFailureReportsBefore ensures retention deletes exactly the
// reports that arrived before the cutoff, across organizations and in
// several transactions, and takes them out of the summary and statistics.
func TestDeleteFailureReportsBefore(t *testing.T) {
	e := newFailEnv(t)
	var reps []*store.FailureReportDetail
	for i := range 2600 {
		dom := []*store.Domain{e.a1, e.a2, e.b1}[i%3]
		reps = append(reps, failReport(dom, day(1, 0).Add(time.Duration(i)*10*time.Minute), fmt.Sprintf("192.0.2.%d", i%5), "dmarc"))
	}
	e.commitFailures(t, reps...)
	cutoff := day(1, 0).Add(2200 * 10 * time.Minute).Add(time.Second) // keeps reports 2201..2599
	n, err := e.db.DeleteFailureReportsBefore(cutoff)
	if err != nil || n != 2201 {
		t.Fatalf("deleted %d (%v), want 2201", n, err)
	}
	var left int
	for _, org := range []string{e.orgA.ID, e.orgB.ID} {
		_, total, err := e.db.ListFailureReports(org, store.FailureFilter{Page: store.Page{Page: 1, Limit: 1}})
		if err != nil {
			t.Fatal(err)
		}
		before, _, _ := e.db.ListFailureReports(org, store.FailureFilter{DateTo: new(cutoff.Add(-time.Second)), Page: store.Page{Page: 1, Limit: 1}})
		if len(before) != 0 {
			t.Errorf("a report from before the cutoff is left: %v", before[0].ArrivalDate)
		}
		st, err := e.db.FailureStatistics(org, store.FailureStatsFilter{})
		if err != nil || st.Total != int64(total) {
			t.Errorf("statistics count %d, %d reports are left (%v)", st.Total, total, err)
		}
		left += total
	}
	if left != 399 {
		t.Errorf("%d reports left, want 399", left)
	}
	if n, err := e.db.DeleteFailureReportsBefore(cutoff); n != 0 || err != nil {
		t.Errorf("second run deleted %d (%v)", n, err)
	}
}

// TestDeleteDomainDeletesFailures ensures deleting a domain takes its
// failure reports, their headers and counts with it, and nothing else.
func TestDeleteDomainDeletesFailures(t *testing.T) {
	e := newFailEnv(t)
	d := failReport(e.a1, day(21, 0), "192.0.2.1", "dmarc")
	d.Headers = []store.FailureHeader{{Name: "From", Value: "x"}}
	gone := e.commitFailures(t, d, failReport(e.a1, day(22, 0), "192.0.2.2", "spf"), failReport(e.a2, day(22, 0), "192.0.2.2", "dkim"))
	if err := e.db.DeleteDomain(e.orgA.ID, e.a1.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.FindFailureReport(e.orgA.ID, gone[0].Report().ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a report of the deleted domain is still found: %v", err)
	}
	list, total, err := e.db.ListFailureReports(e.orgA.ID, store.FailureFilter{Page: store.Page{Page: 1, Limit: 10}})
	if err != nil || total != 1 || list[0].ID != gone[2].Report().ID {
		t.Errorf("left %d %v", total, err)
	}
	st, err := e.db.FailureStatistics(e.orgA.ID, store.FailureStatsFilter{})
	if err != nil || st.Total != 1 || len(st.ByDomain) != 1 || st.ByDomain[0].DomainID != e.a2.ID {
		t.Errorf("statistics after delete: %+v %v", st, err)
	}
	// The same report sent again for a new domain of that name is stored anew.
	again := storetest.MustDomain(t, e.db, e.orgA.ID, "alpha.example")
	d.DomainID = again.ID
	if f := e.commitFailures(t, d)[0]; !f.Outcome().Stored {
		t.Errorf("re-sent report: %+v", f.Outcome())
	}
}

// TestCommitFailureIdentity ensures a report with an Identity (one without
// Arrival-Date) is found again by it whatever its arrival date, that
// another identity is another report, that the identity and the reported
// Auth-Failure values read back, and that retention's delete frees the
// identity.
func TestCommitFailureIdentity(t *testing.T) {
	e := newFailEnv(t)
	first := failReport(e.a1, day(20, 8), "192.0.2.1", "dkim")
	first.Identity, first.AuthFailureReported = "date 1658210268", []string{"BodyHash", " bodyhash", "revoked"}
	stored := e.commitFailures(t, first)[0]
	got, err := e.db.FindFailureReport(e.orgA.ID, stored.Report().ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Identity != "date 1658210268" || !reflect.DeepEqual(got.AuthFailureReported, []string{"bodyhash", "revoked"}) ||
		!reflect.DeepEqual(got.AuthFailure, []string{"dkim"}) {
		t.Errorf("read back identity %q reported %v families %v", got.Identity, got.AuthFailureReported, got.AuthFailure)
	}
	later := *first.FailureReport
	later.ArrivalDate = day(21, 9) // received again, a day later
	other := later
	other.Identity = "date 1658299999"
	drafts := e.commitFailures(t, &store.FailureReportDetail{FailureReport: &later}, &store.FailureReportDetail{FailureReport: &other})
	if o := drafts[0].Outcome(); o.DuplicateID != stored.Report().ID {
		t.Errorf("same identity, another arrival: %+v, want a duplicate of %s", o, stored.Report().ID)
	}
	if o := drafts[1].Outcome(); !o.Stored {
		t.Errorf("another identity: %+v, want stored", o)
	}
	if n, err := e.db.DeleteFailureReportsBefore(day(21, 0)); err != nil || n != 1 {
		t.Fatalf("DeleteFailureReportsBefore: %d, %v", n, err)
	}
	_ = store.BoltOf(e.db).View(func(tx *bolt.Tx) error {
		if n := tx.Bucket([]byte("failure_dedup")).Stats().KeyN; n != 1 {
			t.Errorf("%d dedup entries after deleting one of two reports, want 1", n)
		}
		return nil
	})
	if o := e.commitFailures(t, first)[0].Outcome(); !o.Stored {
		t.Errorf("after its report was deleted the identity still blocks: %+v", o)
	}
}
