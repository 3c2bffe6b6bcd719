// Command loadgen sends GET requests to one loopback URL from a fixed number
// of keep-alive connections for a bounded time and request count, and
// prints throughput and latency percentiles as one JSON object.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/dmarcd/dmarcd/bench/internal/load"
)

func main() {
	var cfg load.Config
	header := flag.String("H", "", "extra header, 'Name: value'")
	flag.StringVar(&cfg.URL, "url", "", "URL to GET (loopback only)")
	flag.StringVar(&cfg.Name, "name", "", "label of this run in the output")
	flag.IntVar(&cfg.Conns, "c", 16, "concurrent connections")
	flag.DurationVar(&cfg.Duration, "d", 10*time.Second, "how long to send")
	flag.DurationVar(&cfg.Warmup, "warmup", 2*time.Second, "unmeasured warm-up before the run")
	flag.Int64Var(&cfg.MaxReq, "n", 5_000_000, "stop after this many requests")
	flag.Parse()
	cfg.Header = http.Header{}
	if *header != "" {
		k, v, ok := strings.Cut(*header, ":")
		if !ok {
			fmt.Fprintf(os.Stderr, "loadgen: bad -H %q\n", *header)
			os.Exit(2)
		}
		cfg.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	res, err := load.Run(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(2)
	}
	_ = json.NewEncoder(os.Stdout).Encode(res)
	if res.Errors > 0 || res.Non2xx > 0 {
		os.Exit(1)
	}
}
