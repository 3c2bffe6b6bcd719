package metrics

import (
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestExposition ensures counters, histograms and gauges are written in the
// Prometheus text format with escaped labels and cumulative buckets.
func TestExposition(t *testing.T) {
	r := NewRegistry()
	c := r.Counter("dmarcd_requests_total", "Requests.", "route", "status")
	c.With("/a", "200").Inc()
	c.With("/a", "200").Add(2)
	c.With(`/b"x`, "404").Inc()
	h := r.Histogram("dmarcd_latency_seconds", "Latency.", []float64{0.1, 1}, "route")
	h.With("/a").Observe(0.05)
	h.With("/a").Observe(0.5)
	h.With("/a").Observe(5)
	r.GaugeFunc("dmarcd_depth", "Depth.", func() float64 { return 7 })
	r.CounterFunc("dmarcd_scans_total", "Scans.", func() float64 { return 12 })

	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	got := rec.Body.String()
	for _, want := range []string{
		"# TYPE dmarcd_requests_total counter\n",
		`dmarcd_requests_total{route="/a",status="200"} 3` + "\n",
		`dmarcd_requests_total{route="/b\"x",status="404"} 1` + "\n",
		"# TYPE dmarcd_latency_seconds histogram\n",
		`dmarcd_latency_seconds_bucket{route="/a",le="0.1"} 1` + "\n",
		`dmarcd_latency_seconds_bucket{route="/a",le="1"} 2` + "\n",
		`dmarcd_latency_seconds_bucket{route="/a",le="+Inf"} 3` + "\n",
		`dmarcd_latency_seconds_sum{route="/a"} 5.55` + "\n",
		`dmarcd_latency_seconds_count{route="/a"} 3` + "\n",
		"# TYPE dmarcd_depth gauge\ndmarcd_depth 7\n",
		"# TYPE dmarcd_scans_total counter\ndmarcd_scans_total 12\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("exposition lacks %q\n%s", want, got)
		}
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type = %q", ct)
	}
	if strings.Index(got, "dmarcd_depth") > strings.Index(got, "dmarcd_latency_seconds") {
		t.Error("families are not sorted by name")
	}
}

// TestConcurrentUse ensures series creation and updates are race-free and
// lose no increments.
func TestConcurrentUse(t *testing.T) {
	r := NewRegistry()
	c := r.Counter("n_total", "N.", "k")
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 1000; j++ {
				c.With("x").Inc()
			}
		}()
	}
	wg.Wait()
	if got := c.With("x").Value(); got != 8000 {
		t.Fatalf("counter = %d, want 8000", got)
	}
}

// TestDuplicateName ensures registering a name twice is caught.
func TestDuplicateName(t *testing.T) {
	r := NewRegistry()
	r.Counter("a_total", "A.")
	defer func() {
		if recover() == nil {
			t.Fatal("no panic on duplicate metric")
		}
	}()
	r.Counter("a_total", "A.")
}
