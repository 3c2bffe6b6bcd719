// Command storagebench measures what a record costs on disk (issue 25):
// for each shape it generates reports with internal/reportgen, imports
// them with `dmarcd import` into a running `dmarcd serve`, waits until
// the server is idle (its background jobs done), then divides the data
// folder's allocated bytes (st_blocks × 512 of every file under it, as du
// counts) by the records stored. It measures again after a clean stop
// and after `dmarcd compact`, and reads the server's peak RSS (VmHWM).
// The figures print beside the baseline and targets, and as JSON
// lines with -json.
//
//	storagebench -dmarcd bench/out/bin/dmarcd -shape 2000x50,20000x5,1x1000000
package main

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dmarcd/dmarcd/bench/internal/jsonl"
	"github.com/dmarcd/dmarcd/bench/internal/server"
	"github.com/dmarcd/dmarcd/internal/reportgen"
)

// result is one figure, as a JSON line (the other bench tools' form).
type result struct {
	Scenario string  `json:"scenario"`
	Metric   string  `json:"metric"`
	Value    float64 `json:"value"`
	Unit     string  `json:"unit"`
	Baseline float64 `json:"baseline,omitempty"`
	Ratio    float64 `json:"ratio,omitempty"`
	Target   string  `json:"target,omitempty"`
	Pass     *bool   `json:"pass,omitempty"`
	Note     string  `json:"note,omitempty"`
}

// known are the figures (measured at c14d99c) and targets, in
// bytes a record; compacted is 0 where none was published.
var known = map[string]struct {
	today, compacted, target float64
	rssMB                    float64 // target peak RSS, 0: none
}{
	"2000x50":   {250, 210, 32, 0},
	"20000x5":   {592, 0, 48, 0},
	"1x1000000": {126, 0, 24, 64},
}

func main() {
	var (
		bin      = flag.String("dmarcd", "bench/out/bin/dmarcd", "dmarcd binary")
		shapes   = flag.String("shape", "2000x50,20000x5,1x1000000", "reports x records of each scenario, comma-separated")
		geoDir   = flag.String("geo", "testdata/geo", "directory of the MaxMind test databases the server geolocates with (\"\": none)")
		idle     = flag.Duration("idle", 3*time.Second, "the server is idle once it used under 2% of a CPU and the data folder did not change for this long")
		maxWait  = flag.Duration("max-wait", 15*time.Minute, "give up waiting for the server to be idle after this long")
		waitURL  = flag.String("wait-url", "", "also wait until GET of this API path (e.g. a sealing status) answers 200 with a body containing -wait-for")
		waitFor  = flag.String("wait-for", "", "the text -wait-url's answer must contain")
		compact  = flag.Bool("compact", true, "after stopping the server, run dmarcd compact and measure again")
		keep     = flag.String("keep", "", "keep each shape's data folder under this directory")
		jsonOut  = flag.String("json", "", "also write the results as JSON lines to this file")
		retainOn = flag.String("retention", "0", "--retention of the server and the import (0: keep everything, as the generated reports are old)")
	)
	flag.Parse()
	var all []result
	for _, sh := range strings.Split(*shapes, ",") {
		n, m, ok := parseShape(sh)
		if !ok {
			fmt.Fprintf(os.Stderr, "storagebench: bad shape %q (want NxM)\n", sh)
			os.Exit(2)
		}
		res, err := scenario(config{bin: *bin, geoDir: *geoDir, idle: *idle, maxWait: *maxWait, waitURL: *waitURL,
			waitFor: *waitFor, compact: *compact, keep: *keep, retention: *retainOn}, n, m)
		if err != nil {
			fmt.Fprintln(os.Stderr, "storagebench:", err)
			os.Exit(1)
		}
		all = append(all, res...)
	}
	for _, r := range all {
		line := fmt.Sprintf("%-10s %-34s %10.1f %-10s", r.Scenario, r.Metric, r.Value, r.Unit)
		if r.Baseline > 0 {
			line += fmt.Sprintf(" today %6.0f  ratio %.2f", r.Baseline, r.Ratio)
		}
		if r.Target != "" {
			line += fmt.Sprintf("  target %s: %s", r.Target, map[bool]string{true: "yes", false: "NO"}[*r.Pass])
		}
		fmt.Println(line)
		if r.Note != "" {
			fmt.Println("    " + r.Note)
		}
	}
	if *jsonOut != "" {
		if err := jsonl.Write(*jsonOut, all); err != nil {
			fmt.Fprintln(os.Stderr, "storagebench:", err)
			os.Exit(1)
		}
	}
}

type config struct {
	bin, geoDir      string
	idle, maxWait    time.Duration
	waitURL, waitFor string
	compact          bool
	keep, retention  string
}

func parseShape(s string) (int, int, bool) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), "x")
	n, err1 := strconv.Atoi(a)
	m, err2 := strconv.Atoi(b)
	return n, m, ok && err1 == nil && err2 == nil && n > 0 && m > 0
}

func scenario(c config, n, m int) ([]result, error) {
	name := fmt.Sprintf("%dx%d", n, m)
	dir, err := os.MkdirTemp("", "storagebench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	files := filepath.Join(dir, "files")
	t0 := time.Now()
	input, err := writeFiles(files, n, m)
	if err != nil {
		return nil, err
	}
	logf("%s: %d files written (%.1f MB) in %s", name, n, float64(input)/1e6, time.Since(t0).Round(time.Millisecond))
	var extra []string
	if c.geoDir != "" {
		extra = append(extra, "--geoip-city", filepath.Join(c.geoDir, "GeoIP2-City-Test.mmdb"), "--geoip-asn", filepath.Join(c.geoDir, "GeoLite2-ASN-Test.mmdb"))
	}
	srv, err := server.StartWith(c.bin, dir, "info", 1000000, append([]string{"--retention", c.retention}, extra...)...)
	if err != nil {
		return nil, err
	}
	stopped := false
	defer func() {
		if !stopped {
			srv.Shutdown()
		}
	}()
	if _, err := server.Call("POST", srv.API+"/api/v1/domains", srv.Key, `{"name": "example.com"}`, http.StatusCreated); err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	empty, _ := allocated(data)
	t0 = time.Now()
	cmd := exec.Command(c.bin, "import", "--data-dir", data, "--json", "--retention", c.retention, files)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: dmarcd import: %w", name, err)
	}
	var sum struct {
		Records int `json:"records"`
	}
	if err := json.Unmarshal(out, &sum); err != nil {
		return nil, fmt.Errorf("%s: import summary: %w", name, err)
	}
	if sum.Records != n*m {
		return nil, fmt.Errorf("%s: %d records imported, want %d", name, sum.Records, n*m)
	}
	logf("%s: %d records imported in %s", name, sum.Records, time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	if err := waitIdle(srv, data, c); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	logf("%s: server idle after %s", name, time.Since(t0).Round(time.Millisecond))
	running, err := allocated(data)
	if err != nil {
		return nil, err
	}
	rss := peakRSS(srv.PID())
	srv.Shutdown()
	stopped = true
	afterStop, err := allocated(data)
	if err != nil {
		return nil, err
	}
	recs := float64(sum.Records)
	k := known[name]
	note := fmt.Sprintf("%d reports of %d records, geolocated: %v; data folder %.1f MB (empty: %.1f MB); input %.1f MB",
		n, m, c.geoDir != "", float64(running)/1e6, float64(empty)/1e6, float64(input)/1e6)
	res := []result{
		withToday(result{Scenario: name, Metric: "bytes a record, server idle", Value: float64(running) / recs, Unit: "B/record", Note: note}, k.today, k.target),
		{Scenario: name, Metric: "bytes a record, server stopped", Value: float64(afterStop) / recs, Unit: "B/record"},
	}
	rssRes := result{Scenario: name, Metric: "server peak RSS (VmHWM)", Value: float64(rss) / (1 << 20), Unit: "MB"}
	if k.rssMB > 0 {
		rssRes.Target, rssRes.Pass = fmt.Sprintf("< %.0f", k.rssMB), check(rssRes.Value < k.rssMB)
	}
	res = append(res, rssRes)
	if c.compact {
		t0 = time.Now()
		cmd := exec.Command(c.bin, "compact", "--data-dir", data)
		cmd.Stdout, cmd.Stderr = nil, os.Stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("%s: dmarcd compact: %w", name, err)
		}
		compacted, err := allocated(data)
		if err != nil {
			return nil, err
		}
		logf("%s: compacted in %s", name, time.Since(t0).Round(time.Millisecond))
		res = append(res, withToday(result{Scenario: name, Metric: "bytes a record, after dmarcd compact", Value: float64(compacted) / recs, Unit: "B/record"}, k.compacted, 0))
	}
	if c.keep != "" {
		dst := filepath.Join(c.keep, name)
		_ = os.RemoveAll(dst)
		if err := os.MkdirAll(c.keep, 0o755); err == nil {
			if err := os.Rename(data, dst); err != nil {
				logf("keep: %v", err)
			}
		}
	}
	return res, nil
}

func withToday(r result, today, target float64) result {
	if today > 0 {
		r.Baseline, r.Ratio = today, r.Value/today
	}
	if target > 0 {
		r.Target, r.Pass = fmt.Sprintf("<= %.0f", target), check(r.Value <= target)
	}
	return r
}

// waitIdle waits until the server used under 2% of a CPU and the data
// folder kept its allocated size for c.idle, and (with -wait-url) the
// URL's answer contains c.waitFor.
func waitIdle(srv *server.Dmarcd, data string, c config) error {
	deadline := time.Now().Add(c.maxWait)
	const tick = 500 * time.Millisecond
	var quiet time.Duration
	cpu := srv.CPU()
	size, _ := allocated(data)
	for time.Now().Before(deadline) {
		time.Sleep(tick)
		nowCPU := srv.CPU()
		nowSize, _ := allocated(data)
		if nowCPU-cpu < 0.02*tick.Seconds() && nowSize == size {
			quiet += tick
		} else {
			quiet = 0
		}
		cpu, size = nowCPU, nowSize
		if quiet < c.idle {
			continue
		}
		if c.waitURL == "" {
			return nil
		}
		body, err := server.Call("GET", srv.API+c.waitURL, srv.Key, "", http.StatusOK)
		if err == nil && strings.Contains(string(body), c.waitFor) {
			return nil
		}
		quiet = 0
	}
	return fmt.Errorf("server not idle after %s", c.maxWait)
}

// allocated returns the bytes the file system allocated to the files
// under dir (st_blocks are 512-byte units whatever the block size).
func allocated(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		}
		return nil
	})
	return total, err
}

// peakRSS returns the VmHWM of a process in bytes, 0 when unknown.
func peakRSS(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// writeFiles writes n generated reports of m records as importbench does
// (the days of 300 in order; small reports cycled through xml, gz and
// zip as mail brings them); a report of more than 100,000 records is
// streamed gzipped. It returns the bytes written.
func writeFiles(dir string, n, m int) (int64, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	start := time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC)
	var total int64
	for i := range n {
		opts := reportgen.Options{Begin: start.AddDate(0, 0, i*300/n)}
		name := fmt.Sprintf("r%06d.xml", i)
		if m > 100_000 {
			path := filepath.Join(dir, name+".gz")
			if err := writeGzip(path, int64(i), m, opts); err != nil {
				return 0, err
			}
			if st, err := os.Stat(path); err == nil {
				total += st.Size()
			}
			continue
		}
		xml := reportgen.Generate(int64(i), m, opts)
		data := xml
		if m < 20 {
			switch i % 3 {
			case 1:
				name, data = name+".gz", reportgen.Gzip(xml)
			case 2:
				name, data = fmt.Sprintf("r%06d.zip", i), reportgen.Zip(name, xml)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return 0, err
		}
		total += int64(len(data))
	}
	return total, nil
}

func writeGzip(path string, seed int64, m int, opts reportgen.Options) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(f)
	if _, err := reportgen.WriteReport(zw, seed, m, opts); err != nil {
		f.Close()
		return err
	}
	if err := zw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "storagebench: "+format+"\n", args...)
}

func check(ok bool) *bool { return &ok }
