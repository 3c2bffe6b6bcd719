package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/dmarc/tlsrpt"

	"github.com/dmarcd/dmarcd/httpapi"
	"github.com/dmarcd/dmarcd/senders"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
	"github.com/dmarcd/dmarcd/web"
	"github.com/dmarcd/dmarcd/worker"
)

// benchEnv is a store with many domains, each with a report on every day
// of the last 30, and a session to read the pages with.
type benchEnv struct {
	h      http.Handler
	api    http.Handler // the REST API over the same store, to compare
	key    string
	cookie string
	person string // the session of a person in two organizations
	busy   string // the domain with the most sources
	report string // a report of the busy domain
	tls    string // a TLS report of the busy domain
}

// envInt reads a positive integer knob of the benchmark, def when unset.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// newBenchEnv stores domains domains with a report on each of the last 30
// days: DMARCD_WEB_BENCH_RECORDS records a report (default 5), the busy
// domain DMARCD_WEB_BENCH_BUSY (default 400) distinct sources a day, each
// day with a TLS report; 1,000 domains x 30 days x 333 records is the 10
// million records of issue 9.
func newBenchEnv(b *testing.B, domains int) *benchEnv {
	b.Helper()
	perReport, busySources := envInt("DMARCD_WEB_BENCH_RECORDS", 5), envInt("DMARCD_WEB_BENCH_BUSY", 400)
	start := time.Now()
	var records int64
	clock := storetest.NewClock(storetest.Epoch())
	db := storetest.OpenWithClock(b, clock)
	org := storetest.MustOrganization(b, db, "bench", store.PlanUnlimited)
	key, secret := storetest.MustAPIKey(b, db, org.ID, store.ScopeFull)
	var busy *store.Domain
	for i := range domains {
		d := storetest.MustDomain(b, db, org.ID, fmt.Sprintf("d%04d.example", i))
		var batch store.IngestBatch
		for day := 1; day <= 30; day++ {
			sources := perReport
			if i == 0 {
				sources = busySources // a busy domain
			}
			records += int64(sources)
			draft, err := db.NewReportDraft(store.Report{DomainID: d.ID, Domain: d.Name, OrgID: org.ID,
				OrgName: "google.com", ExternalReportID: fmt.Sprintf("%d-%d", i, day),
				DateBegin: clock.Now().Truncate(24*time.Hour).AddDate(0, 0, -day), ReceivedAt: clock.Now(),
				DateEnd:         clock.Now().Truncate(24*time.Hour).AddDate(0, 0, -day).Add(24*time.Hour - time.Second),
				PolicyPublished: store.PolicyPublished{Domain: d.Name, P: "none", PCT: 100, ADKIM: "r", ASPF: "r"}})
			if err != nil {
				b.Fatal(err)
			}
			for s := range sources {
				draft.Add(&store.Record{SourceIP: fmt.Sprintf("10.%d.%d.%d", s/62500, s/250%250, s%250+1), Count: int64(10 + s%50), Disposition: []string{"none", "quarantine"}[s%7/6],
					DKIM: "pass", SPF: "fail", DMARC: []string{"pass", "fail"}[s%2], HeaderFrom: d.Name, Reasons: []store.Reason{},
					AuthResults: store.AuthResults{DKIM: []store.DKIMAuth{}, SPF: []store.SPFAuth{}}})
			}
			draft.Finish()
			batch.Reports = append(batch.Reports, draft)
		}
		if _, err := db.NewIngester().Commit(&batch); err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			busy = d
		}
	}
	b.Logf("stored %d domains, %d records in %s", domains, records, time.Since(start).Round(time.Millisecond))
	if os.Getenv("DMARCD_WEB_BENCH_SEAL") != "0" {
		// As serve's sealing job leaves them: the closed days sealed (their
		// records in blocks, roll-ups and report metadata compressed), the
		// last day and a half still in the write form.
		st, err := db.SealRecords(context.Background(), store.SealOptions{Now: clock.Now()})
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("sealed %d blocks of %d reports, %d reports open", st.Blocks, st.Reports, st.Open)
	}
	var tlsID string
	for day := 1; day <= 30; day++ {
		begin := clock.Now().Truncate(24*time.Hour).AddDate(0, 0, -day)
		tlsID, _ = storetest.MustTLSReport(b, db, busy, &tlsrpt.Report{OrganizationName: "Google Inc.",
			ReportID: fmt.Sprint("tls-", day), DateBegin: begin, DateEnd: begin.Add(24*time.Hour - time.Second),
			Policies: []tlsrpt.Policy{{Type: "sts", Domain: busy.Name, SuccessfulSessions: 5000, FailedSessions: int64(day),
				Failures: []tlsrpt.FailureDetail{{ResultType: "certificate-expired", SendingMTAIP: "192.0.2.1",
					ReceivingMXHostname: "mx1." + busy.Name, FailedSessions: int64(day)}}}}}, begin.Add(25*time.Hour))
	}
	reps, _, err := db.ListReports(org.ID, store.ReportFilter{DomainID: busy.ID, Page: store.Page{Page: 1, Limit: 1}})
	if err != nil || len(reps) == 0 {
		b.Fatal("no report of the busy domain", err)
	}
	// The sender-watch job has run, as serve runs it at start and hourly:
	// the overview reads the stages it stored.
	views := &senders.Views{DB: db, Known: senders.DefaultKnownSenders()}
	start = time.Now()
	if err := (&worker.SenderWatch{Store: db, Views: views}).Run(context.Background(), clock.Now()); err != nil {
		b.Fatal(err)
	}
	all, err := db.AllDomains()
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]string, 0, len(all))
	for _, d := range all {
		ids = append(ids, d.ID)
	}
	stages, err := db.SenderStages(ids)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("sender watch stored the stage of %d of %d domains in %s", len(stages), domains, time.Since(start).Round(time.Millisecond))
	a := app.New(app.Config{Store: db, ReportingDomain: "reports.test", Now: clock.Now})
	ui, err := web.New(web.Config{App: a, Store: db, Now: clock.Now, Senders: views})
	if err != nil {
		b.Fatal(err)
	}
	token, _, err := db.CreateSession(key.ID, clock.Now())
	if err != nil {
		b.Fatal(err)
	}
	api := httpapi.New(httpapi.Config{App: a, Store: db, Now: clock.Now, RateLimit: 1 << 30})
	// A person, owner here and viewer of a second organization: their
	// pages add the switcher to the permission check.
	_, link, err := a.AddMember(app.Operator(org), "owner@bench.example", "owner")
	if err != nil {
		b.Fatal(err)
	}
	person, _, err := a.AcceptInvitation("192.0.2.1", link, "a bench password")
	if err != nil {
		b.Fatal(err)
	}
	other := storetest.MustOrganization(b, db, "other", store.PlanUnlimited)
	_, link, err = a.AddMember(app.Operator(other), "owner@bench.example", "viewer")
	if err != nil {
		b.Fatal(err)
	}
	if _, _, err := a.AcceptInvitation("192.0.2.1", link, "a bench password"); err != nil {
		b.Fatal(err)
	}
	return &benchEnv{h: ui, api: api, key: secret, cookie: token, person: person, busy: busy.ID, report: reps[0].ID, tls: tlsID}
}

// assetRE finds the embedded assets a page loads.
var assetRE = regexp.MustCompile(`(?:href|src)="(/static/[^"]+)"`)

// benchPage serves path b.N times and reports the p99 and the first
// (cold caches) server time, the page's size, and its weight with the
// assets it loads.
func (e *benchEnv) benchPage(b *testing.B, path string) {
	times := make([]time.Duration, 0, b.N)
	size := 0
	body := ""
	b.ResetTimer()
	for b.Loop() {
		req := httptest.NewRequest("GET", path, nil)
		req.AddCookie(&http.Cookie{Name: web.CookieName, Value: e.cookie})
		req.Header.Set("X-API-Key", e.key)
		rec := httptest.NewRecorder()
		h := e.h
		if strings.HasPrefix(path, "/api/") {
			h = e.api
		}
		start := time.Now()
		h.ServeHTTP(rec, req)
		times = append(times, time.Since(start))
		if rec.Code != 200 {
			b.Fatalf("GET %s: %d", path, rec.Code)
		}
		size = rec.Body.Len()
		body = rec.Body.String()
	}
	if len(times) > 0 {
		b.ReportMetric(float64(times[0].Microseconds())/1000, "first-ms")
	}
	weight := size
	for _, m := range assetRE.FindAllStringSubmatch(body, -1) {
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, httptest.NewRequest("GET", m[1], nil))
		weight += rec.Body.Len()
	}
	b.ReportMetric(float64(weight)/1024, "weight-KiB")
	slices.Sort(times)
	if len(times) > 0 {
		b.ReportMetric(float64(times[len(times)*99/100].Microseconds())/1000, "p99-ms")
	}
	b.ReportMetric(float64(size)/1024, "page-KiB")
}

// BenchmarkPages measures the server time of the heaviest pages over 1,000
// domains with 30 days of reports each (see README, Web interface).
func BenchmarkPages(b *testing.B) {
	e := newBenchEnv(b, 1000)
	b.Run("Overview", func(b *testing.B) { e.benchPage(b, "/") })
	b.Run("OverviewByMessages", func(b *testing.B) { e.benchPage(b, "/?sort=messages") })
	b.Run("BusyDomain", func(b *testing.B) { e.benchPage(b, "/domains/"+e.busy) })
	b.Run("BusySources", func(b *testing.B) { e.benchPage(b, "/domains/"+e.busy+"/sources") })
	b.Run("Reports", func(b *testing.B) { e.benchPage(b, "/reports") })
	b.Run("Report", func(b *testing.B) { e.benchPage(b, "/reports/"+e.report) })
	b.Run("TLSReports", func(b *testing.B) { e.benchPage(b, "/tls-reports") })
	b.Run("TLSReport", func(b *testing.B) { e.benchPage(b, "/tls-reports/"+e.tls) })
	b.Run("Failures", func(b *testing.B) { e.benchPage(b, "/forensic") })
	b.Run("Alerts", func(b *testing.B) { e.benchPage(b, "/alerts") })
	b.Run("Settings", func(b *testing.B) { e.benchPage(b, "/settings") })
	asPerson := *e
	asPerson.cookie = e.person
	b.Run("SettingsPerson", func(b *testing.B) { asPerson.benchPage(b, "/settings") })
	b.Run("OverviewPerson", func(b *testing.B) { asPerson.benchPage(b, "/") })
	b.Run("Orgs", func(b *testing.B) { asPerson.benchPage(b, "/orgs") })
	b.Run("Keys", func(b *testing.B) { e.benchPage(b, "/settings/keys") })
	b.Run("Webhooks", func(b *testing.B) { e.benchPage(b, "/settings/webhooks") })
	// The API at the same size, for comparison.
	b.Run("API/Domains", func(b *testing.B) { e.benchPage(b, "/api/v1/domains?limit=100") })
	b.Run("API/Reports", func(b *testing.B) { e.benchPage(b, "/api/v1/reports?limit=50") })
	b.Run("API/DomainStatistics", func(b *testing.B) { e.benchPage(b, "/api/v1/domains/"+e.busy+"/statistics") })
}
