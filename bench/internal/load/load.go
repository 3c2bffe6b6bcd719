// Package load drives HTTP GET load at one loopback URL from a fixed number
// of keep-alive connections, bounded in time and request count, and reports
// throughput and latency percentiles.
package load

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Config is one load run.
type Config struct {
	Name     string
	URL      string
	Header   http.Header
	Conns    int
	Duration time.Duration
	Warmup   time.Duration
	MaxReq   int64
}

// Result is what a run measured.
type Result struct {
	Name      string  `json:"name"`
	Requests  int64   `json:"requests"`
	Errors    int64   `json:"errors"`
	Non2xx    int64   `json:"non_2xx"`
	Seconds   float64 `json:"seconds"`
	RPS       float64 `json:"rps"`
	P50ms     float64 `json:"p50_ms"`
	P90ms     float64 `json:"p90_ms"`
	P99ms     float64 `json:"p99_ms"`
	MaxMs     float64 `json:"max_ms"`
	BodyBytes int64   `json:"body_bytes"`
}

// Run warms up, then measures. It refuses any host that is not loopback.
func Run(cfg Config) (Result, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Hostname() == "" {
		return Result{}, fmt.Errorf("load: bad URL %q", cfg.URL)
	}
	if ip := net.ParseIP(u.Hostname()); u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return Result{}, fmt.Errorf("load: %s is not a loopback address", u.Hostname())
	}
	if cfg.MaxReq <= 0 {
		cfg.MaxReq = 5_000_000
	}
	client := &http.Client{Transport: &http.Transport{
		MaxIdleConns: cfg.Conns, MaxIdleConnsPerHost: cfg.Conns, MaxConnsPerHost: cfg.Conns, DisableCompression: true,
	}}
	defer client.CloseIdleConnections()
	if cfg.Warmup > 0 {
		run(client, cfg, cfg.Warmup, false)
	}
	return run(client, cfg, cfg.Duration, true), nil
}

func run(client *http.Client, cfg Config, d time.Duration, measure bool) Result {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var reqs, errs, non2xx, size atomic.Int64
	lat := make([][]time.Duration, cfg.Conns)
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < cfg.Conns; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for ctx.Err() == nil && reqs.Add(1) <= cfg.MaxReq {
				req, _ := http.NewRequestWithContext(ctx, "GET", cfg.URL, nil)
				req.Header = cfg.Header.Clone()
				t0 := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						errs.Add(1)
					}
					continue
				}
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil {
					if ctx.Err() == nil {
						errs.Add(1)
					}
					continue // cut short by the end of the run: not a sample
				}
				if measure {
					lat[i] = append(lat[i], time.Since(t0))
				}
				size.Store(n)
				if resp.StatusCode/100 != 2 {
					non2xx.Add(1)
				}
			}
		}(i)
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	all := slices.Concat(lat...)
	slices.Sort(all)
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[int(float64(len(all)-1)*p)].Microseconds()) / 1000
	}
	return Result{Name: cfg.Name, Requests: int64(len(all)), Errors: errs.Load(), Non2xx: non2xx.Load(),
		Seconds: elapsed, RPS: float64(len(all)) / elapsed, P50ms: pct(0.50), P90ms: pct(0.90),
		P99ms: pct(0.99), MaxMs: pct(1), BodyBytes: size.Load()}
}
