package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// benchEnv is the API over a real store with 50 domains, and the bare
// net/http handler answering the same bytes: the pair the issue compares.
func benchEnv(b *testing.B) (api, bare *httptest.Server, key string, body []byte) {
	b.Helper()
	db := storetest.Open(b)
	org := storetest.MustOrganization(b, db, "bench", store.PlanUnlimited)
	_, key = storetest.MustAPIKey(b, db, org.ID, store.ScopeFull)
	for i := 0; i < 50; i++ {
		storetest.MustDomain(b, db, org.ID, fmt.Sprintf("bench%02d.example", i))
	}
	s := New(Config{Store: db, RateLimit: 1 << 30})
	api = httptest.NewServer(s)
	b.Cleanup(api.Close)
	body = get(b, api.Client(), api.URL+"/api/v1/domains?limit=50", key)
	n := strconv.Itoa(len(body))
	bare = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", n)
		_, _ = w.Write(body)
	}))
	b.Cleanup(bare.Close)
	return api, bare, key, body
}

func get(b *testing.B, c *http.Client, url, key string) []byte {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("X-API-Key", key)
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return body
}

// BenchmarkListDomainsAPI and BenchmarkListDomainsBare measure requests per
// second over loopback with 16 parallel clients; compare their req/s.
func BenchmarkListDomainsAPI(b *testing.B) {
	api, _, key, body := benchEnv(b)
	runParallelGets(b, api, api.URL+"/api/v1/domains?limit=50", key, len(body))
}

func BenchmarkListDomainsBare(b *testing.B) {
	_, bare, key, body := benchEnv(b)
	runParallelGets(b, bare, bare.URL+"/api/v1/domains?limit=50", key, len(body))
}

func runParallelGets(b *testing.B, srv *httptest.Server, url, key string, size int) {
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	c := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	b.SetParallelism(8) // with GOMAXPROCS=2: 16 clients
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if got := get(b, c, url, key); len(got) != size {
				b.Errorf("body of %d bytes, want %d", len(got), size)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

// BenchmarkListDomainsHandler measures the handler alone, without the
// network: auth, rate limit, store read and encoding.
func BenchmarkListDomainsHandler(b *testing.B) {
	db := storetest.Open(b)
	org := storetest.MustOrganization(b, db, "bench", store.PlanUnlimited)
	_, key := storetest.MustAPIKey(b, db, org.ID, store.ScopeFull)
	for i := 0; i < 50; i++ {
		storetest.MustDomain(b, db, org.ID, fmt.Sprintf("bench%02d.example", i))
	}
	s := New(Config{Store: db, RateLimit: 1 << 30})
	req := httptest.NewRequest("GET", "/api/v1/domains?limit=50", nil)
	req.Header.Set("X-API-Key", key)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
	}
}
