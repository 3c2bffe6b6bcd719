package httpapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// bigReportEnv serves a store holding one report of n records, varied like
// sampleRecords, and returns the server, a key and the report id.
func bigReportEnv(b *testing.B, n int, sealed ...bool) (srv *httptest.Server, key, id string) {
	b.Helper()
	db := storetest.Open(b)
	org := storetest.MustOrganization(b, db, "bench", store.PlanUnlimited)
	_, key = storetest.MustAPIKey(b, db, org.ID, store.ScopeRead)
	d := storetest.MustDomain(b, db, org.ID, "alpha.example")
	samples := sampleRecords()
	records := make([]*store.Record, n)
	for i := range records {
		rec := *samples[i%len(samples)]
		rec.SourceIP = fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
		rec.Count = int64(i%17 + 1)
		records[i] = &rec
	}
	rep := mustReport(b, db, d, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), "google.com", records)
	if len(sealed) > 0 && sealed[0] {
		if _, err := db.SealRecords(context.Background(), store.SealOptions{All: true}); err != nil {
			b.Fatal(err)
		}
	}
	srv = httptest.NewServer(New(Config{Store: db, RateLimit: 1 << 30}))
	b.Cleanup(srv.Close)
	return srv, key, rep.ID
}

// runGets fetches url b.N times, reading each body to the end.
func runGets(b *testing.B, srv *httptest.Server, url, key string) {
	b.Helper()
	c := srv.Client()
	var size int64
	b.ReportAllocs()
	for b.Loop() {
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("X-API-Key", key)
		res, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %d %v", url, res.StatusCode, err)
		}
		size = n
	}
	b.SetBytes(size)
}

// BenchmarkReportStatistics measures the statistics of a 100,000-record
// report over loopback; the target is under 5 ms per request.
func BenchmarkReportStatistics(b *testing.B) {
	srv, key, id := bigReportEnv(b, 100_000)
	runGets(b, srv, srv.URL+"/api/v1/reports/"+id+"/statistics", key)
}

// BenchmarkCSVExport measures the CSV export of a 100,000-record report
// over loopback, body read to the end; the target is under 300 ms.
func BenchmarkCSVExport(b *testing.B) {
	srv, key, id := bigReportEnv(b, 100_000)
	runGets(b, srv, srv.URL+"/api/v1/reports/"+id+"/export/csv", key)
}

// BenchmarkCSVExportSealed is BenchmarkCSVExport with the records sealed.
func BenchmarkCSVExportSealed(b *testing.B) {
	srv, key, id := bigReportEnv(b, 100_000, true)
	runGets(b, srv, srv.URL+"/api/v1/reports/"+id+"/export/csv", key)
}

// BenchmarkGetReportSealed is BenchmarkGetReport with the records sealed.
func BenchmarkGetReportSealed(b *testing.B) {
	srv, key, id := bigReportEnv(b, 100_000, true)
	runGets(b, srv, srv.URL+"/api/v1/reports/"+id, key)
}

// BenchmarkGetReport measures the streamed JSON of a 100,000-record report.
func BenchmarkGetReport(b *testing.B) {
	srv, key, id := bigReportEnv(b, 100_000)
	runGets(b, srv, srv.URL+"/api/v1/reports/"+id, key)
}
