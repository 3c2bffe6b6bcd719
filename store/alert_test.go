package store_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/alert"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// alertEnv is a store with a settable clock, two organizations and a
// domain in each.
type alertEnv struct {
	db         *store.DB
	clock      *storetest.Clock
	orgA, orgB *store.Organization
	domA, domB *store.Domain
	ing        *store.Ingester
	seq        int
}

func newAlertEnv(t *testing.T) *alertEnv {
	t.Helper()
	clock := storetest.NewClock(storetest.Epoch())
	db := storetest.OpenWithClock(t, clock)
	e := &alertEnv{db: db, clock: clock, ing: db.NewIngester()}
	e.orgA = storetest.MustOrganization(t, db, "alpha", store.PlanUnlimited)
	e.orgB = storetest.MustOrganization(t, db, "beta", store.PlanUnlimited)
	e.domA = storetest.MustDomain(t, db, e.orgA.ID, "alpha.example")
	e.domB = storetest.MustDomain(t, db, e.orgB.ID, "beta.example")
	return e
}

// src is the mail of one source IP in a test report.
type src struct {
	ip         string
	pass, fail int64
}

// yesterday is the UTC day before the clock's, the usual report day.
func (e *alertEnv) yesterday() time.Time {
	return e.clock.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -1)
}

// ingest stores one report of dom covering the UTC day begin, with the
// sources given, and fails the test unless it is stored.
func (e *alertEnv) ingest(t *testing.T, dom *store.Domain, begin time.Time, sources ...src) *store.Report {
	t.Helper()
	e.seq++
	d, err := e.db.NewReportDraft(store.Report{DomainID: dom.ID, Domain: dom.Name, OrgID: dom.OrgID,
		OrgName: "google.com", OrgEmail: "noreply-dmarc-support@google.com", ExternalReportID: fmt.Sprintf("r%d", e.seq),
		DateBegin: begin, DateEnd: begin.Add(24*time.Hour - time.Second), ReceivedAt: e.clock.Now(),
		PolicyPublished: store.PolicyPublished{Domain: dom.Name, P: "none", PCT: 100, ADKIM: "r", ASPF: "r"}})
	if err != nil {
		t.Fatal(err)
	}
	us, asn, org := "US", uint32(15169), "GOOGLE"
	for _, s := range sources {
		geo := &store.Geo{CountryCode: &us, ASN: &asn, ASOrg: &org}
		if s.pass > 0 {
			d.Add(&store.Record{SourceIP: s.ip, Count: s.pass, Disposition: "none", DKIM: "pass", SPF: "pass",
				HeaderFrom: dom.Name, Geo: geo})
		}
		if s.fail > 0 {
			d.Add(&store.Record{SourceIP: s.ip, Count: s.fail, Disposition: "none", DKIM: "fail", SPF: "fail",
				HeaderFrom: dom.Name, Geo: geo})
		}
	}
	d.Finish()
	outs, err := e.ing.Commit(&store.IngestBatch{Reports: []*store.ReportDraft{d}})
	if err != nil || !outs[0].Stored {
		t.Fatalf("storing a report: %v %+v", err, outs)
	}
	rep := d.Report()
	return &rep
}

// alerts returns every alert of org, newest first.
func (e *alertEnv) alerts(t *testing.T, org *store.Organization, f store.AlertFilter) []*store.Alert {
	t.Helper()
	f.Page = store.Page{Page: 1, Limit: 1000}
	as, total, err := e.db.ListAlerts(org.ID, f)
	if err != nil {
		t.Fatal(err)
	}
	if total != len(as) {
		t.Fatalf("total %d, listed %d", total, len(as))
	}
	return as
}

// kinds renders alerts as "type/severity", oldest first.
func kinds(as []*store.Alert) []string {
	var out []string
	for _, a := range slices.Backward(as) {
		out = append(out, a.Type+"/"+a.Severity)
	}
	return out
}

func details(t *testing.T, a *store.Alert) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(a.Details, &m); err != nil {
		t.Fatalf("details of %s are not a JSON object: %v: %s", a.Type, err, a.Details)
	}
	return m
}

// TestFailureRateAlerts ensures a report stream crossing the thresholds
// raises exactly one warning and then one critical alert per UTC day, with
// details explaining them, and nothing below the thresholds.
func TestFailureRateAlerts(t *testing.T) {
	e := newAlertEnv(t)
	day := e.yesterday()
	steps := []struct {
		name       string
		pass, fail int64
		want       []string // all alerts so far, oldest first
	}{
		{"5% failing", 95, 5, nil},
		{"90% but only 9 failing", 1, 9, nil},
		{"exactly 10% and 10 failing", 90, 10, []string{"dmarc_failure_rate/warning"}},
		{"30%, warning already raised today", 70, 30, []string{"dmarc_failure_rate/warning"}},
		{"50%: escalates to critical", 50, 50, []string{"dmarc_failure_rate/warning", "dmarc_failure_rate/critical"}},
		{"90% again", 10, 90, []string{"dmarc_failure_rate/warning", "dmarc_failure_rate/critical"}},
		{"20% after critical", 80, 20, []string{"dmarc_failure_rate/warning", "dmarc_failure_rate/critical"}},
	}
	for _, s := range steps {
		e.ingest(t, e.domA, day, src{"192.0.2.1", s.pass, s.fail})
		if got := kinds(e.alerts(t, e.orgA, store.AlertFilter{})); !slices.Equal(got, s.want) {
			t.Fatalf("after %s: alerts %v, want %v", s.name, got, s.want)
		}
	}
	as := e.alerts(t, e.orgA, store.AlertFilter{})
	crit, warn := as[0], as[1]
	d := details(t, crit)
	if d["dmarc_fail"] != 50.0 || d["messages"] != 100.0 || d["failure_rate"] != 0.5 || d["threshold"] != 0.5 ||
		d["reporter"] != "google.com" || d["report_id"] == "" || d["min_failing"] != 10.0 {
		t.Errorf("critical details: %s", crit.Details)
	}
	srcs, _ := d["top_failing_sources"].([]any)
	if len(srcs) != 1 || srcs[0].(map[string]any)["source_ip"] != "192.0.2.1" || srcs[0].(map[string]any)["country_code"] != "US" {
		t.Errorf("critical failing sources: %s", crit.Details)
	}
	if *crit.DomainID != e.domA.ID || crit.Status != store.AlertPending || crit.CreatedAt != storetest.Epoch() ||
		!strings.Contains(crit.Message, "50 of 100") || !strings.Contains(crit.Title, "alpha.example") {
		t.Errorf("critical alert: %+v", crit)
	}
	if details(t, warn)["threshold"] != 0.1 {
		t.Errorf("warning details: %s", warn.Details)
	}

	// The next UTC day (the day the alert is raised) starts afresh.
	e.clock.Advance(24 * time.Hour)
	e.ingest(t, e.domA, e.yesterday(), src{"192.0.2.1", 80, 20})
	if got := kinds(e.alerts(t, e.orgA, store.AlertFilter{})); len(got) != 3 || got[2] != "dmarc_failure_rate/warning" {
		t.Fatalf("next day: %v", got)
	}
	if got := e.alerts(t, e.orgB, store.AlertFilter{}); len(got) != 0 {
		t.Errorf("organization B got alerts: %v", kinds(got))
	}
}

// TestNewFailingSourceAlerts ensures a failing source unseen for the window
// raises one info alert with its geo, while known, passing and baseline
// sources raise none, and a source seen again after the window is new.
func TestNewFailingSourceAlerts(t *testing.T) {
	e := newAlertEnv(t)
	day := e.yesterday()
	newSources := func() []string {
		var ips []string
		for _, a := range e.alerts(t, e.orgA, store.AlertFilter{}) {
			if a.Type == alert.TypeNewFailingSource {
				ips = append(ips, details(t, a)["source_ip"].(string))
			}
		}
		slices.Sort(ips)
		return ips
	}
	// The domain's first report is its baseline: b fails, nothing raised.
	e.ingest(t, e.domA, day, src{"192.0.2.1", 50, 0}, src{"192.0.2.2", 0, 2})
	if got := newSources(); len(got) != 0 {
		t.Fatalf("baseline raised %v", got)
	}
	// c is new and failing, d new and passing, a known and now failing.
	e.ingest(t, e.domA, day, src{"192.0.2.1", 10, 1}, src{"192.0.2.3", 0, 3}, src{"192.0.2.4", 7, 0})
	if got := newSources(); !slices.Equal(got, []string{"192.0.2.3"}) {
		t.Fatalf("new failing sources %v, want [192.0.2.3]", got)
	}
	a := e.alerts(t, e.orgA, store.AlertFilter{})[0]
	d := details(t, a)
	if a.Severity != alert.SeverityInfo || d["dmarc_fail"] != 3.0 || d["country_code"] != "US" || d["asn"] != 15169.0 ||
		d["as_org"] != "GOOGLE" || d["window_days"] != 30.0 || d["report"].(map[string]any)["reporter"] != "google.com" {
		t.Errorf("alert %+v details %s", a, a.Details)
	}
	if !strings.Contains(a.Message, "192.0.2.3 (US, AS15169 GOOGLE)") {
		t.Errorf("message %q", a.Message)
	}
	// c again, from another reporter the same day: known now.
	e.ingest(t, e.domA, day, src{"192.0.2.3", 0, 5})
	// Another domain's index is its own: c is new there, but that is its baseline.
	e.ingest(t, e.domB, day, src{"192.0.2.3", 0, 5})
	if got := newSources(); len(got) != 1 {
		t.Fatalf("sources known or of another domain raised alerts: %v", got)
	}

	// 32 days later b (last seen on day) fails again: new after the
	// window; a fails too but was seen in a report of 12 days before.
	e.clock.Advance(20 * 24 * time.Hour)
	e.ingest(t, e.domA, e.yesterday(), src{"192.0.2.1", 5, 0})
	e.clock.Advance(12 * 24 * time.Hour)
	e.ingest(t, e.domA, e.yesterday(), src{"192.0.2.1", 0, 4}, src{"192.0.2.2", 0, 1})
	if got := newSources(); !slices.Equal(got, []string{"192.0.2.2", "192.0.2.3"}) {
		t.Fatalf("after the window: %v, want b (and c from before)", got)
	}
}

// TestNewFailingSourceCapAndStaleReports ensures the per-day cap holds a
// spoofing wave to a few alerts, and an old report (an archive import)
// raises nothing but still teaches the index its sources.
func TestNewFailingSourceCapAndStaleReports(t *testing.T) {
	e := newAlertEnv(t)
	rules := alert.DefaultRules()
	rules.MaxNewSourceAlerts = 3
	if err := e.db.SetAlertRules(rules); err != nil {
		t.Fatal(err)
	}
	day := e.yesterday()
	e.ingest(t, e.domA, day, src{"192.0.2.1", 100, 0})
	var wave []src
	for i := range 20 {
		wave = append(wave, src{fmt.Sprintf("198.51.100.%d", i), 0, 100})
	}
	e.ingest(t, e.domA, day, wave...)
	got := kinds(e.alerts(t, e.orgA, store.AlertFilter{Severity: alert.SeverityInfo}))
	if len(got) != 3 {
		t.Fatalf("wave of 20 new sources raised %v, want 3 new_failing_source", got)
	}
	// The failure rate rule still speaks once for the wave (100%).
	if crit := e.alerts(t, e.orgA, store.AlertFilter{Severity: alert.SeverityCritical}); len(crit) != 1 {
		t.Errorf("critical alerts %v", kinds(crit))
	}

	// A report that ended 8 days ago raises nothing, even at 100 % failing.
	old := day.AddDate(0, 0, -8)
	e.ingest(t, e.domB, old, src{"203.0.113.1", 1, 0})
	e.ingest(t, e.domB, old, src{"203.0.113.9", 0, 500})
	if got := e.alerts(t, e.orgB, store.AlertFilter{}); len(got) != 0 {
		t.Fatalf("old report raised %v", kinds(got))
	}
	// ... but its sources were learnt: 203.0.113.9 failing today is known.
	e.ingest(t, e.domB, day, src{"203.0.113.9", 99, 1})
	if got := e.alerts(t, e.orgB, store.AlertFilter{}); len(got) != 0 {
		t.Fatalf("source learnt from an old report raised %v", kinds(got))
	}
}

// TestAlertRulesDisabled ensures disabled rules raise nothing and learn
// nothing.
func TestAlertRulesDisabled(t *testing.T) {
	e := newAlertEnv(t)
	if err := e.db.SetAlertRules(alert.Rules{Disabled: true}); err != nil {
		t.Fatal(err)
	}
	e.ingest(t, e.domA, e.yesterday(), src{"192.0.2.1", 0, 100})
	if got := e.alerts(t, e.orgA, store.AlertFilter{}); len(got) != 0 {
		t.Fatalf("disabled rules raised %v", kinds(got))
	}
	if n := store.SourceEntries(e.db); n != 0 {
		t.Errorf("disabled rules learnt %d sources", n)
	}
}

// TestSetAlertRulesRejectsBadSettings ensures each bad threshold is refused
// with ErrInvalid and leaves the rules in use unchanged.
func TestSetAlertRulesRejectsBadSettings(t *testing.T) {
	db := storetest.Open(t)
	for _, tc := range []struct {
		name string
		set  func(r *alert.Rules)
	}{
		{"zero warning", func(r *alert.Rules) { r.FailureRateWarning = 0 }},
		{"warning over 1", func(r *alert.Rules) { r.FailureRateWarning, r.FailureRateCritical = 1.5, 2 }},
		{"critical below warning", func(r *alert.Rules) { r.FailureRateCritical = 0.05 }},
		{"critical over 1", func(r *alert.Rules) { r.FailureRateCritical = 1.01 }},
		{"NaN warning", func(r *alert.Rules) { r.FailureRateWarning = math.NaN() }},
		{"no failing minimum", func(r *alert.Rules) { r.MinFailing = 0 }},
		{"no window", func(r *alert.Rules) { r.NewSourceDays = 0 }},
		{"window of ages", func(r *alert.Rules) { r.NewSourceDays = 100000 }},
		{"no report age", func(r *alert.Rules) { r.MaxReportAge = 0 }},
		{"no cap", func(r *alert.Rules) { r.MaxNewSourceAlerts = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := alert.DefaultRules()
			tc.set(&r)
			if err := db.SetAlertRules(r); !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("SetAlertRules: %v, want ErrInvalid", err)
			}
			if db.AlertRules() != alert.DefaultRules() {
				t.Errorf("rules changed to %+v", db.AlertRules())
			}
		})
	}
}

// TestFailureReportAlertsOncePerHour ensures failure reports raise at most one
// alert per domain per UTC clock hour, with the source IP and its geo.
func TestFailureReportAlertsOncePerHour(t *testing.T) {
	e := newAlertEnv(t)
	cc := "NL"
	ref := func(dom *store.Domain, ip string) store.FailureRef {
		return store.FailureRef{ID: store.NewID(), OrgID: dom.OrgID, DomainID: dom.ID, SourceIP: ip,
			Geo: &store.Geo{CountryCode: &cc}, ArrivalDate: e.clock.Now().Add(-time.Minute)}
	}
	if err := store.RaiseForFailures(e.db, []store.FailureRef{ref(e.domA, "198.51.100.9"), ref(e.domA, "198.51.100.10"), ref(e.domB, "")}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(29 * time.Minute) // 09:59
	if err := store.RaiseForFailures(e.db, []store.FailureRef{ref(e.domA, "198.51.100.11")}); err != nil {
		t.Fatal(err)
	}
	as := e.alerts(t, e.orgA, store.AlertFilter{})
	if len(as) != 1 || as[0].Type != alert.TypeFailureReportReceived || as[0].Severity != alert.SeverityInfo {
		t.Fatalf("within one hour: %v", kinds(as))
	}
	d := details(t, as[0])
	if d["source_ip"] != "198.51.100.9" || d["geo"].(map[string]any)["country_code"] != "NL" || d["forensic_report_id"] == "" {
		t.Errorf("details %s", as[0].Details)
	}
	if b := e.alerts(t, e.orgB, store.AlertFilter{}); len(b) != 1 || details(t, b[0])["source_ip"] != nil {
		t.Errorf("organization B: %v", kinds(b))
	}
	e.clock.Advance(time.Minute) // 10:00, the next clock hour
	if err := store.RaiseForFailures(e.db, []store.FailureRef{ref(e.domA, "198.51.100.12"), {DomainID: store.NewID()}}); err != nil {
		t.Fatal(err)
	}
	if as := e.alerts(t, e.orgA, store.AlertFilter{}); len(as) != 2 {
		t.Fatalf("next hour: %v", kinds(as))
	}
}

// TestListAlertsFiltersAndPages ensures each filter, their combination and
// pagination select the right alerts newest first, within the organization.
func TestListAlertsFiltersAndPages(t *testing.T) {
	e := newAlertEnv(t)
	domA2 := storetest.MustDomain(t, e.db, e.orgA.ID, "second.example")
	day := e.yesterday()
	e.ingest(t, e.domA, day, src{"192.0.2.1", 80, 20}) // warning
	e.clock.Advance(time.Second)
	e.ingest(t, domA2, day, src{"192.0.2.1", 20, 80}) // critical
	e.clock.Advance(time.Second)
	e.ingest(t, e.domB, day, src{"192.0.2.1", 20, 80}) // org B
	e.clock.Advance(time.Second)
	e.ingest(t, e.domA, day, src{"192.0.2.1", 20, 80}) // critical
	all := e.alerts(t, e.orgA, store.AlertFilter{})
	if got := kinds(all); !slices.Equal(got, []string{"dmarc_failure_rate/warning", "dmarc_failure_rate/critical", "dmarc_failure_rate/critical"}) {
		t.Fatalf("all: %v", got)
	}
	if _, err := e.db.DismissAlert(e.orgA.ID, all[1].ID); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		f    store.AlertFilter
		want []*store.Alert
	}{
		{"severity", store.AlertFilter{Severity: alert.SeverityCritical}, []*store.Alert{all[0], all[1]}},
		{"status", store.AlertFilter{Status: store.AlertPending}, []*store.Alert{all[0], all[2]}},
		{"dismissed", store.AlertFilter{Status: store.AlertDismissed}, []*store.Alert{all[1]}},
		{"domain", store.AlertFilter{DomainID: e.domA.ID}, []*store.Alert{all[0], all[2]}},
		{"domain and severity", store.AlertFilter{DomainID: e.domA.ID, Severity: alert.SeverityWarning}, []*store.Alert{all[2]}},
		{"sent", store.AlertFilter{Status: store.AlertSent}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := e.alerts(t, e.orgA, tc.f)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d alerts, want %d", len(got), len(tc.want))
			}
			for i := range got {
				if got[i].ID != tc.want[i].ID {
					t.Errorf("alert %d is %s, want %s", i, got[i].ID, tc.want[i].ID)
				}
			}
		})
	}
	page, total, err := e.db.ListAlerts(e.orgA.ID, store.AlertFilter{Page: store.Page{Page: 2, Limit: 2}})
	if err != nil || total != 3 || len(page) != 1 || page[0].ID != all[2].ID {
		t.Fatalf("page 2: %v total %d err %v", page, total, err)
	}
	for _, f := range []store.AlertFilter{
		{Severity: "loud", Page: store.Page{Page: 1, Limit: 1}},
		{Status: "gone", Page: store.Page{Page: 1, Limit: 1}},
		{Page: store.Page{Page: 0, Limit: 1}},
	} {
		if _, _, err := e.db.ListAlerts(e.orgA.ID, f); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("filter %+v: %v, want ErrInvalid", f, err)
		}
	}
	if _, _, err := e.db.ListAlerts(e.orgA.ID, store.AlertFilter{DomainID: e.domB.ID, Page: store.Page{Page: 1, Limit: 1}}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another organization's domain: %v, want ErrNotFound", err)
	}
}

// TestDismissAndMarkSent ensures dismissal is idempotent and keeps its
// first time, sent applies to pending alerts only, and another
// organization's alert is not found.
func TestDismissAndMarkSent(t *testing.T) {
	e := newAlertEnv(t)
	e.ingest(t, e.domA, e.yesterday(), src{"192.0.2.1", 80, 20})
	e.ingest(t, e.domA, e.yesterday(), src{"192.0.2.1", 20, 80})
	as := e.alerts(t, e.orgA, store.AlertFilter{})
	crit, warn := as[0], as[1]

	sentAt := storetest.Epoch().Add(90 * time.Second)
	if err := e.db.MarkAlertSent(warn.ID, sentAt.Add(500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if err := e.db.MarkAlertSent(warn.ID, sentAt.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	got := storetest.Alert(t, e.db, e.orgA.ID, warn.ID)
	if got == nil || got.Status != store.AlertSent || got.SentAt == nil || !got.SentAt.Equal(sentAt) {
		t.Fatalf("after MarkAlertSent: %+v", got)
	}

	e.clock.Advance(time.Minute)
	first, err := e.db.DismissAlert(e.orgA.ID, crit.ID)
	if err != nil || first.Status != store.AlertDismissed || first.DismissedAt == nil || !first.DismissedAt.Equal(e.clock.Now()) {
		t.Fatalf("dismiss: %+v %v", first, err)
	}
	e.clock.Advance(time.Minute)
	again, err := e.db.DismissAlert(e.orgA.ID, crit.ID)
	if err != nil || !again.DismissedAt.Equal(*first.DismissedAt) {
		t.Fatalf("dismiss again: %+v %v", again, err)
	}
	if err := e.db.MarkAlertSent(crit.ID, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if got := storetest.Alert(t, e.db, e.orgA.ID, crit.ID); got.Status != store.AlertDismissed || got.SentAt == nil {
		t.Errorf("a dismissed alert delivered: %+v", got)
	}
	if _, err := e.db.DismissAlert(e.orgB.ID, warn.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("dismissing another organization's alert: %v", err)
	}
	if got := storetest.Alert(t, e.db, e.orgB.ID, warn.ID); got != nil {
		t.Errorf("another organization lists the alert: %+v", got)
	}
	for _, id := range []string{"", "nope", store.NewID()} {
		if err := e.db.MarkAlertSent(id, e.clock.Now()); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("MarkAlertSent(%q): %v", id, err)
		}
	}
}

// TestOnAlertSeesCommittedAlerts ensures the hook sees each alert once,
// after its commit, and nothing of a failed commit.
func TestOnAlertSeesCommittedAlerts(t *testing.T) {
	e := newAlertEnv(t)
	var seen []string
	e.db.OnAlert(func(a *store.Alert) { seen = append(seen, a.Type+"/"+a.Severity) })
	e.ingest(t, e.domA, e.yesterday(), src{"192.0.2.1", 20, 80})
	if !slices.Equal(seen, []string{"dmarc_failure_rate/critical"}) {
		t.Fatalf("hook saw %v", seen)
	}
	e.db.OnAlert(nil)
	e.ingest(t, e.domB, e.yesterday(), src{"192.0.2.1", 20, 80})
	if len(seen) != 1 {
		t.Errorf("removed hook still called: %v", seen)
	}
}

// TestDomainDeletionTakesItsAlerts ensures deleting a domain deletes its
// alerts and its source index, and leaves other domains' alone.
func TestDomainDeletionTakesItsAlerts(t *testing.T) {
	e := newAlertEnv(t)
	e.ingest(t, e.domA, e.yesterday(), src{"192.0.2.1", 20, 80})
	e.ingest(t, e.domB, e.yesterday(), src{"192.0.2.1", 20, 80})
	if err := e.db.DeleteDomain(e.orgA.ID, e.domA.ID); err != nil {
		t.Fatal(err)
	}
	if got := e.alerts(t, e.orgA, store.AlertFilter{}); len(got) != 0 {
		t.Errorf("alerts of the deleted domain remain: %v", kinds(got))
	}
	if got := e.alerts(t, e.orgB, store.AlertFilter{}); len(got) != 1 {
		t.Errorf("other organization's alerts: %v", kinds(got))
	}
	if n := store.SourceEntries(e.db); n != 1 {
		t.Errorf("%d source entries left, want the other domain's 1", n)
	}
}

// TestRecordDNSCheck ensures a check's outcome is written only over the
// state it compared with, deactivates an active domain when asked, and
// raises its alert with the domain filled in.
func TestRecordDNSCheck(t *testing.T) {
	e := newAlertEnv(t)
	if _, err := e.db.UpdateDomain(e.orgA.ID, e.domA.ID, func(d *store.Domain) error {
		d.Status = store.DomainActive
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if a, err := e.db.RecordDNSCheck(store.DNSCheck{DomainID: e.domA.ID, Record: "v=DMARC1; p=reject"}); err != nil || a != nil {
		t.Fatalf("seeding: %v %v", a, err)
	}
	_, err := e.db.RecordDNSCheck(store.DNSCheck{DomainID: e.domA.ID, Seen: "", Record: "v=DMARC1; p=none"})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("writing over a state not compared with: %v, want ErrConflict", err)
	}
	raised := &alert.Candidate{Type: alert.TypeReportingAddressRemoved, Severity: alert.SeverityCritical,
		Title: "t", Message: "m", Details: map[string]string{"old_record": "v=DMARC1; p=reject"}}
	a, err := e.db.RecordDNSCheck(store.DNSCheck{DomainID: e.domA.ID, Seen: "v=DMARC1; p=reject",
		Record: "v=DMARC1; p=none", Alert: raised, Deactivate: true})
	if err != nil || a == nil || a.OrgID != e.orgA.ID || *a.DomainID != e.domA.ID || a.Status != store.AlertPending ||
		!a.CreatedAt.Equal(storetest.Epoch()) || string(a.Details) != `{"old_record":"v=DMARC1; p=reject"}` {
		t.Fatalf("change: %+v %v", a, err)
	}
	dom, _ := e.db.FindDomain(e.orgA.ID, e.domA.ID)
	if dom.Status != store.DomainInactive || dom.LastDNSRecord != "v=DMARC1; p=none" {
		t.Errorf("domain after the change: %+v", dom)
	}
	if got := e.alerts(t, e.orgA, store.AlertFilter{}); len(got) != 1 || got[0].ID != a.ID {
		t.Errorf("alerts: %v", kinds(got))
	}
	bad := &alert.Candidate{Type: "weird", Severity: alert.SeverityInfo}
	if _, err := e.db.RecordDNSCheck(store.DNSCheck{DomainID: e.domA.ID, Seen: "v=DMARC1; p=none", Record: "x", Alert: bad}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("unknown alert type: %v, want ErrInvalid", err)
	}
	if dom, _ := e.db.FindDomain(e.orgA.ID, e.domA.ID); dom.LastDNSRecord != "v=DMARC1; p=none" {
		t.Errorf("a refused check wrote %q", dom.LastDNSRecord)
	}
	if _, err := e.db.RecordDNSCheck(store.DNSCheck{DomainID: store.NewID()}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown domain: %v", err)
	}
}
