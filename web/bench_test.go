package web_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/httpapi"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
	"github.com/dmarcd/dmarcd/web"
)

// benchEnv is a store with many domains, each with a report on every day
// of the last 30, and a session to read the pages with.
type benchEnv struct {
	h      http.Handler
	api    http.Handler // the REST API over the same store, to compare
	key    string
	cookie string
	busy   string // the domain with the most sources
}

func newBenchEnv(b *testing.B, domains int) *benchEnv {
	b.Helper()
	clock := storetest.NewClock(storetest.Epoch())
	db := storetest.OpenWithClock(b, clock)
	org := storetest.MustOrganization(b, db, "bench", store.PlanUnlimited)
	key, secret := storetest.MustAPIKey(b, db, org.ID, store.ScopeFull)
	var busy *store.Domain
	for i := range domains {
		d := storetest.MustDomain(b, db, org.ID, fmt.Sprintf("d%04d.example", i))
		var batch store.IngestBatch
		for day := 1; day <= 30; day++ {
			sources := 5
			if i == 0 {
				sources = 400 // a busy domain
			}
			draft, err := store.NewReportDraft(store.Report{DomainID: d.ID, Domain: d.Name, OrgID: org.ID,
				OrgName: "google.com", ExternalReportID: fmt.Sprintf("%d-%d", i, day),
				DateBegin: clock.Now().Truncate(24*time.Hour).AddDate(0, 0, -day), ReceivedAt: clock.Now(),
				DateEnd:         clock.Now().Truncate(24*time.Hour).AddDate(0, 0, -day).Add(24*time.Hour - time.Second),
				PolicyPublished: store.PolicyPublished{Domain: d.Name, P: "none", PCT: 100, ADKIM: "r", ASPF: "r"}})
			if err != nil {
				b.Fatal(err)
			}
			for s := range sources {
				draft.Add(&store.Record{SourceIP: fmt.Sprintf("192.0.%d.%d", s/250, s%250+1), Count: int64(10 + s), Disposition: "none",
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
	ui, err := web.New(web.Config{Store: db, ReportingDomain: "reports.test", Now: clock.Now})
	if err != nil {
		b.Fatal(err)
	}
	token, _, err := db.CreateSession(key.ID, clock.Now())
	if err != nil {
		b.Fatal(err)
	}
	api := httpapi.New(httpapi.Config{Store: db, ReportingDomain: "reports.test", Now: clock.Now, RateLimit: 1 << 30})
	return &benchEnv{h: ui, api: api, key: secret, cookie: token, busy: busy.ID}
}

// benchPage serves path b.N times and reports the p99 server time and the
// page's size.
func (e *benchEnv) benchPage(b *testing.B, path string) {
	times := make([]time.Duration, 0, b.N)
	size := 0
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
	}
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
	b.Run("BusyDomain", func(b *testing.B) { e.benchPage(b, "/domains/"+e.busy) })
	b.Run("Reports", func(b *testing.B) { e.benchPage(b, "/reports") })
	b.Run("Alerts", func(b *testing.B) { e.benchPage(b, "/alerts") })
	b.Run("Keys", func(b *testing.B) { e.benchPage(b, "/settings/keys") })
	// The API at the same size, for comparison.
	b.Run("API/Domains", func(b *testing.B) { e.benchPage(b, "/api/v1/domains?limit=100") })
	b.Run("API/Reports", func(b *testing.B) { e.benchPage(b, "/api/v1/reports?limit=50") })
	b.Run("API/DomainStatistics", func(b *testing.B) { e.benchPage(b, "/api/v1/domains/"+e.busy+"/statistics") })
}
