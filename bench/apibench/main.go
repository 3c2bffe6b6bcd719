// Command apibench measures GET /api/v1/domains of a real dmarcd (auth on,
// N domains, rate limit raised out of the way) against the bare net/http
// baseline answering the same bytes, in one run, over loopback. It starts
// both servers as separate processes, alternates the runs to spread any
// drift of the machine, and prints a table plus a JSON record.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/dmarcd/dmarcd/bench/internal/load"
	"github.com/dmarcd/dmarcd/bench/internal/server"
)

func main() {
	var (
		dmarcd   = flag.String("dmarcd", "./dmarcd", "dmarcd binary")
		bare     = flag.String("bare", "./bare", "baseline binary (bench/bare)")
		domains  = flag.Int("domains", 50, "domains to create")
		conns    = flag.Int("c", 16, "concurrent connections")
		duration = flag.Duration("d", 10*time.Second, "measured time of each run")
		rounds   = flag.Int("rounds", 2, "alternating rounds of (bare, dmarcd)")
		logLevel = flag.String("log-level", "info", "dmarcd --log-level (info logs every request, as in production)")
		out      = flag.String("out", "", "write the JSON record here too")
	)
	flag.Parse()
	if err := run(*dmarcd, *bare, *domains, *conns, *duration, *rounds, *logLevel, *out); err != nil {
		fmt.Fprintln(os.Stderr, "apibench:", err)
		os.Exit(1)
	}
}

type record struct {
	Date       string        `json:"date"`
	Domains    int           `json:"domains"`
	Conns      int           `json:"conns"`
	BodyBytes  int           `json:"body_bytes"`
	Runs       []load.Result `json:"runs"`
	DmarcdRPS  float64       `json:"dmarcd_rps"`
	BareRPS    float64       `json:"bare_rps"`
	Ratio      float64       `json:"ratio"`
	DmarcdP99  float64       `json:"dmarcd_p99_ms"`
	BareP99    float64       `json:"bare_p99_ms"`
	Target     string        `json:"target"`
	TargetsMet bool          `json:"targets_met"`
}

func run(dmarcdBin, bareBin string, nDomains, conns int, d time.Duration, rounds int, logLevel, out string) error {
	dir, err := os.MkdirTemp("", "dmarcd-apibench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := server.Start(dmarcdBin, dir, logLevel, 1000000000)
	if err != nil {
		return err
	}
	defer srv.Stop()
	base, secret := srv.API, srv.Key
	for i := 0; i < nDomains; i++ {
		body := fmt.Sprintf(`{"name": "bench%03d.example"}`, i)
		if _, err := server.Call("POST", base+"/api/v1/domains", secret, body, http.StatusCreated); err != nil {
			return err
		}
	}
	listURL := fmt.Sprintf("%s/api/v1/domains?limit=%d", base, min(nDomains, 100))
	body, err := server.Call("GET", listURL, secret, "", http.StatusOK)
	if err != nil {
		return err
	}
	bodyFile := filepath.Join(dir, "body.json")
	if err := os.WriteFile(bodyFile, body, 0o600); err != nil {
		return err
	}

	b := exec.Command(bareBin, "-body", bodyFile)
	bout, _ := b.StdoutPipe()
	if err := b.Start(); err != nil {
		return err
	}
	defer func() { _ = b.Process.Kill(); _ = b.Wait() }()
	bareAddr, err := bufio.NewReader(bout).ReadString('\n')
	if err != nil {
		return fmt.Errorf("bare did not start: %w", err)
	}
	bareURL := "http://" + strings.TrimSpace(bareAddr) + "/api/v1/domains"

	rec := record{Date: time.Now().UTC().Format(time.RFC3339), Domains: nDomains, Conns: conns, BodyBytes: len(body),
		Target: "dmarcd >= 60% of bare, dmarcd p99 < 5 ms"}
	hdr := http.Header{"X-Api-Key": {secret}}
	var dRPS, bRPS, dP99, bP99 []float64
	for i := 0; i < rounds; i++ {
		for _, c := range []load.Config{
			{Name: "bare", URL: bareURL, Conns: conns, Duration: d, Warmup: time.Second},
			{Name: "dmarcd", URL: listURL, Header: hdr, Conns: conns, Duration: d, Warmup: time.Second},
		} {
			res, err := load.Run(c)
			if err != nil {
				return err
			}
			if res.Errors > 0 || res.Non2xx > 0 {
				return fmt.Errorf("%s: %d errors, %d non-2xx answers", c.Name, res.Errors, res.Non2xx)
			}
			if res.BodyBytes != int64(len(body)) {
				return fmt.Errorf("%s answered %d bytes, want %d", c.Name, res.BodyBytes, len(body))
			}
			rec.Runs = append(rec.Runs, res)
			fmt.Printf("%-7s round %d: %8.0f req/s  p50 %.2f ms  p90 %.2f ms  p99 %.2f ms\n",
				c.Name, i+1, res.RPS, res.P50ms, res.P90ms, res.P99ms)
			if c.Name == "bare" {
				bRPS, bP99 = append(bRPS, res.RPS), append(bP99, res.P99ms)
			} else {
				dRPS, dP99 = append(dRPS, res.RPS), append(dP99, res.P99ms)
			}
		}
	}
	rec.DmarcdRPS, rec.BareRPS = mean(dRPS), mean(bRPS)
	rec.DmarcdP99, rec.BareP99 = mean(dP99), mean(bP99)
	rec.Ratio = rec.DmarcdRPS / rec.BareRPS
	rec.TargetsMet = rec.Ratio >= 0.60 && rec.DmarcdP99 < 5
	fmt.Printf("\nGET /api/v1/domains, %d domains, %d-byte body, %d connections, %s per run\n", nDomains, len(body), conns, d)
	fmt.Printf("bare    %8.0f req/s  p99 %.2f ms\n", rec.BareRPS, rec.BareP99)
	fmt.Printf("dmarcd  %8.0f req/s  p99 %.2f ms  (%.0f%% of bare)\n", rec.DmarcdRPS, rec.DmarcdP99, 100*rec.Ratio)
	fmt.Printf("target: %s -> %v\n", rec.Target, rec.TargetsMet)
	if out != "" {
		j, _ := json.MarshalIndent(rec, "", "  ")
		if err := os.WriteFile(out, append(j, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
