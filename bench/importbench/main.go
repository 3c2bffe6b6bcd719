// Command importbench measures `dmarcd import` the way a user runs it:
// offline (no server: the command opens the database file and runs the
// pipeline itself) and into a running `dmarcd serve` through its admin
// socket, on the same generated files, alternating the two in each round
// so a shared machine's load falls on both alike. It reports records per
// second (medians of the rounds), the socket path's ratio to offline, and
// the CPU per record of each (the import command plus, for the socket,
// the server).
//
//	importbench -dmarcd bench/out/bin/dmarcd -shape 2000x50,20000x5 -rounds 3
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dmarcd/dmarcd/bench/internal/jsonl"
	"github.com/dmarcd/dmarcd/bench/internal/server"
	"github.com/dmarcd/dmarcd/internal/reportgen"
)

// result is one figure, as a JSON line.
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

func main() {
	var (
		bin     = flag.String("dmarcd", "bench/out/bin/dmarcd", "dmarcd binary")
		shapes  = flag.String("shape", "2000x50,20000x5", "reports x records of each scenario, comma-separated")
		rounds  = flag.Int("rounds", 3, "rounds; each runs offline and socket imports once, alternating which goes first")
		geoDir  = flag.String("geo", "testdata/geo", "directory of the MaxMind test databases (both imports geolocate)")
		jsonOut = flag.String("json", "", "also write the results as JSON lines to this file")
		only    = flag.String("mode", "both", "offline, socket (the server reads the files), handover (the import command opens them and hands them to the server, as for another user), both (offline and socket) or all")
		prof    = flag.String("cpuprofile", "", "write CPU profiles of the first round's imports to PREFIX.SHAPE.MODE.client and, for the socket, PREFIX.SHAPE.socket.server (through DMARCD_CPUPROFILE)")
	)
	flag.Parse()
	switch *only {
	case "offline", "socket", "handover", "both", "all":
	default:
		fmt.Fprintf(os.Stderr, "importbench: bad -mode %q (want offline, socket, handover, both or all)\n", *only)
		os.Exit(2)
	}
	var all []result
	for _, sh := range strings.Split(*shapes, ",") {
		n, m, ok := parseShape(sh)
		if !ok {
			fmt.Fprintf(os.Stderr, "importbench: bad shape %q (want NxM)\n", sh)
			os.Exit(2)
		}
		res, err := scenario(*bin, *geoDir, n, m, max(*rounds, 1), *only, *prof)
		if err != nil {
			fmt.Fprintln(os.Stderr, "importbench:", err)
			os.Exit(1)
		}
		all = append(all, res...)
	}
	for _, r := range all {
		line := fmt.Sprintf("%-12s %-28s %10.0f %-12s", r.Scenario, r.Metric, r.Value, r.Unit)
		if r.Baseline > 0 {
			line += fmt.Sprintf(" baseline %10.0f  ratio %.2f", r.Baseline, r.Ratio)
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
			fmt.Fprintln(os.Stderr, "importbench:", err)
			os.Exit(1)
		}
	}
}

func parseShape(s string) (int, int, bool) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), "x")
	n, err1 := strconv.Atoi(a)
	m, err2 := strconv.Atoi(b)
	return n, m, ok && err1 == nil && err2 == nil && n > 0 && m > 0
}

// run is one timed import.
type run struct {
	records int
	secs    float64
	cpu     float64 // seconds of CPU: the import command, plus the server's for the socket
	client  float64 // seconds of CPU of the import command alone
}

func scenario(bin, geoDir string, n, m, rounds int, only, prof string) ([]result, error) {
	dir, err := os.MkdirTemp("", "importbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	files := filepath.Join(dir, "files")
	if err := writeFiles(files, n, m); err != nil {
		return nil, err
	}
	name := fmt.Sprintf("%dx%d", n, m)
	geo := []string{"--geoip-city", filepath.Join(geoDir, "GeoIP2-City-Test.mmdb"), "--geoip-asn", filepath.Join(geoDir, "GeoLite2-ASN-Test.mmdb")}
	runs := map[string][]run{}
	for i := range rounds {
		modes := []string{"offline", "socket", "handover"}
		if i%2 == 1 {
			modes = []string{"handover", "socket", "offline"}
		}
		for _, mode := range modes {
			if only != "all" && only != mode && (only != "both" || mode == "handover") {
				continue
			}
			profile := ""
			if prof != "" && i == 0 {
				profile = fmt.Sprintf("%s.%s.%s", prof, name, mode)
			}
			r, err := importOnce(bin, filepath.Join(dir, fmt.Sprintf("%s-%d", mode, i)), files, mode, geo, profile)
			if err != nil {
				return nil, fmt.Errorf("%s %s round %d: %w", name, mode, i+1, err)
			}
			if r.records != n*m {
				return nil, fmt.Errorf("%s %s: %d records imported, want %d", name, mode, r.records, n*m)
			}
			runs[mode] = append(runs[mode], r)
			split := ""
			if mode != "offline" {
				split = fmt.Sprintf(" (import command %.2f, server %.2f)", r.client/float64(r.records)*1e6, (r.cpu-r.client)/float64(r.records)*1e6)
			}
			fmt.Fprintf(os.Stderr, "importbench: %s %-7s round %d: %.0f records/s, %.2f us CPU/record%s\n",
				name, mode, i+1, float64(r.records)/r.secs, r.cpu/float64(r.records)*1e6, split)
		}
	}
	target := 150_000.0
	if m < 20 {
		target = 60_000
	}
	var out []result
	rate := func(rs []run) float64 {
		var xs []float64
		for _, r := range rs {
			xs = append(xs, float64(r.records)/r.secs)
		}
		return median(xs)
	}
	cpu := func(rs []run) float64 {
		var xs []float64
		for _, r := range rs {
			xs = append(xs, r.cpu/float64(r.records)*1e6)
		}
		return median(xs)
	}
	off, sock := runs["offline"], runs["socket"]
	note := fmt.Sprintf("median of %d alternating rounds, %d files (xml/gz/zip cycled when <20 records), geolocated", rounds, n)
	if len(off) > 0 {
		v := rate(off)
		out = append(out, result{Scenario: name, Metric: "import offline", Value: v, Unit: "records/s",
			Target: fmt.Sprintf(">= %.0f", target), Pass: check(v >= target), Note: note},
			result{Scenario: name, Metric: "CPU offline", Value: cpu(off), Unit: "us/record"})
	}
	if len(sock) > 0 {
		v := rate(sock)
		r := result{Scenario: name, Metric: "import into a running server", Value: v, Unit: "records/s",
			Target: fmt.Sprintf(">= %.0f", target), Pass: check(v >= target)}
		if len(off) > 0 {
			r.Baseline, r.Ratio = rate(off), v/rate(off)
			r.Target += " and >= 0.90x offline"
			r.Pass = check(v >= target && r.Ratio >= 0.9)
		}
		out = append(out, r, result{Scenario: name, Metric: "CPU socket (client+server)", Value: cpu(sock), Unit: "us/record"})
	}
	if ho := runs["handover"]; len(ho) > 0 {
		r := result{Scenario: name, Metric: "into a server, files handed over", Value: rate(ho), Unit: "records/s",
			Note: "--hand-over: the import command opens the files and passes them to the server, as for an import by another user"}
		if len(off) > 0 {
			r.Baseline, r.Ratio = rate(off), r.Value/rate(off)
		}
		out = append(out, r, result{Scenario: name, Metric: "CPU handed over (client+server)", Value: cpu(ho), Unit: "us/record"})
	}
	return out, nil
}

// importOnce makes a fresh data dir with example.com registered, then
// times one import of files: through the running server, which reads them
// (socket) or gets them open (handover), or with the server stopped
// (offline). With profile set, the import command
// writes its CPU profile to profile+".client", and the server its own to
// profile+".server" when it shuts down.
func importOnce(bin, dir, files, mode string, geo []string, profile string) (run, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return run{}, err
	}
	defer os.RemoveAll(dir)
	if profile != "" && mode != "offline" {
		os.Setenv("DMARCD_CPUPROFILE", profile+".server")
	}
	// The generated reports may be older than the default retention: the
	// server keeps everything, and so does the import (a running server
	// refuses an import whose --retention differs from its own).
	srv, err := server.StartWith(bin, dir, "info", 1000000, append([]string{"--retention", "0"}, geo...)...)
	os.Unsetenv("DMARCD_CPUPROFILE")
	if err != nil {
		return run{}, err
	}
	stopped := false
	defer func() {
		if !stopped {
			srv.Shutdown()
		}
	}()
	if _, err := server.Call("POST", srv.API+"/api/v1/domains", srv.Key, `{"name": "example.com"}`, http.StatusCreated); err != nil {
		return run{}, err
	}
	args := []string{"import", "--data-dir", filepath.Join(dir, "data"), "--json", "--retention", "0"}
	switch mode {
	case "offline":
		srv.Stop()
		stopped = true
		args = append(args, geo...)
	case "handover":
		args = append(args, "--hand-over")
	}
	args = append(args, files)
	serverCPU := srv.CPU()
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	if profile != "" {
		cmd.Env = append(os.Environ(), "DMARCD_CPUPROFILE="+profile+".client")
	}
	start := time.Now()
	outb, err := cmd.Output()
	secs := time.Since(start).Seconds()
	if err != nil {
		return run{}, fmt.Errorf("dmarcd %s: %w", strings.Join(args, " "), err)
	}
	var sum struct {
		Records int `json:"records"`
	}
	if err := json.Unmarshal(outb, &sum); err != nil {
		return run{}, fmt.Errorf("import summary: %w", err)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	client := tv(ru.Utime) + tv(ru.Stime)
	cpu := client
	if mode != "offline" {
		cpu += srv.CPU() - serverCPU
	}
	return run{records: sum.Records, secs: secs, cpu: cpu, client: client}, nil
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

// writeFiles writes n generated reports of m records, the days of a year
// in order; small reports cycle through xml, gz and zip as mail brings them.
func writeFiles(dir string, n, m int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	start := time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		xml := reportgen.Generate(int64(i), m, reportgen.Options{Begin: start.AddDate(0, 0, i*300/n)})
		name, data := fmt.Sprintf("r%06d.xml", i), xml
		if m < 20 {
			switch i % 3 {
			case 1:
				name, data = name+".gz", reportgen.Gzip(xml)
			case 2:
				name, data = fmt.Sprintf("r%06d.zip", i), reportgen.Zip(name, xml)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func check(ok bool) *bool { return &ok }
