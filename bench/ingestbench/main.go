// Command ingestbench measures the ingest pipeline end to end (parse,
// geolocate, dedup, store with fsync'd group commits) on generated reports
// (internal/reportgen, seeded) and on the real corpus, beside the same
// inputs parsed with encoding/xml alone, and the read side of a large
// report (statistics, full record scan as for the CSV export).
//
// Each scenario runs in a child process of its own, so that its peak heap
// and peak RSS are its own. Results are printed as a table; -json also
// writes them as JSON lines.
//
//	ingestbench                     # every scenario
//	ingestbench -scenario large     # one of: bulk small corpus large stats
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dmarcd/dmarcd/bench/internal/jsonl"
)

// result is one measured figure.
type result struct {
	Scenario string  `json:"scenario"`
	Metric   string  `json:"metric"`
	Value    float64 `json:"value"`
	Unit     string  `json:"unit"`
	Baseline float64 `json:"baseline,omitempty"` // encoding/xml alone, same input
	// Ratio, when set, is the ratio the target judges, which is not
	// Value/Baseline: the median of per-run ratios, each run beside its
	// own floor run, is steadier on a shared machine than the ratio of
	// two medians.
	Ratio  float64 `json:"ratio,omitempty"`
	Target string  `json:"target,omitempty"`
	Pass   *bool   `json:"pass,omitempty"`
	Note   string  `json:"note,omitempty"`
}

var scenarios = []string{"bulk", "small", "corpus", "large", "stats"}

func main() {
	scenario := flag.String("scenario", "all", "bulk, small, corpus, large, stats or all")
	child := flag.Bool("child", false, "run one scenario in this process and print JSON lines")
	workers := flag.Int("workers", 1024, "concurrent Ingest calls (as an import or SMTP connections would make)")
	geoDir := flag.String("geo", "testdata/geo", "directory of the MaxMind test databases")
	corpusDir := flag.String("corpus", "testdata/corpus", "directory of the report corpus")
	jsonOut := flag.String("json", "", "also write the results as JSON lines to this file")
	runs := flag.Int("runs", 3, "runs of each throughput scenario, each alternating pipeline, encoding/xml and floor; medians are reported (the machine may be shared)")
	scatter := flag.Bool("scatter", false, "give consecutive reports days all over the year (worst case for the daily roll-ups) instead of in order")
	cpuProfile := flag.String("cpuprofile", "", "write CPU profiles of each run of the throughput scenarios to FILE.SCENARIO.pipeline.N and FILE.SCENARIO.floor.N (the ingest alone, without generating the inputs; go tool pprof merges the files it is given)")
	memProfile := flag.String("memprofile", "", "write allocation profiles of each run of the throughput scenarios to FILE.SCENARIO.pipeline.N and FILE.SCENARIO.floor.N, each beside FILE...N.before, the profile as the run began: go tool pprof -sample_index=alloc_space -diff_base FILE.SCENARIO.pipeline.N.before FILE.SCENARIO.pipeline.N shows what the run allocated")
	flag.Parse()
	cfg := config{runs: max(*runs, 1), scatter: *scatter, workers: *workers, geoDir: *geoDir, corpusDir: *corpusDir}
	if *child {
		if *cpuProfile != "" {
			cfg.cpuProfile = *cpuProfile + "." + *scenario
		}
		if *memProfile != "" {
			cfg.memProfile = *memProfile + "." + *scenario
		}
		os.Exit(runChild(*scenario, cfg))
	}
	list := scenarios
	if *scenario != "all" {
		list = strings.Split(*scenario, ",")
	}
	var all []result
	failed := false
	for _, s := range list {
		results, err := spawn(s)
		if err != nil {
			fmt.Fprintf(os.Stderr, "ingestbench: %s: %v\n", s, err)
			failed = true
			continue
		}
		all = append(all, results...)
	}
	printTable(os.Stdout, all)
	if *jsonOut != "" {
		if err := jsonl.Write(*jsonOut, all); err != nil {
			fmt.Fprintln(os.Stderr, "ingestbench:", err)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

// runChild runs one scenario in this process and prints its results as
// JSON lines; it returns the exit code.
func runChild(scenario string, cfg config) int {
	results, err := run(scenario, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ingestbench:", err)
		return 1
	}
	enc := json.NewEncoder(os.Stdout)
	for _, r := range results {
		_ = enc.Encode(r)
	}
	return 0
}

// spawn runs one scenario in a child process with the same flags.
func spawn(scenario string) ([]result, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := []string{"-child", "-scenario", scenario}
	flag.Visit(func(f *flag.Flag) {
		if f.Name != "scenario" && f.Name != "json" && f.Name != "child" {
			args = append(args, "-"+f.Name+"="+f.Value.String())
		}
	})
	cmd := exec.Command(exe, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, err
	}
	var results []result
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("child output %q: %w", sc.Text(), err)
		}
		results = append(results, r)
	}
	return results, nil
}

func printTable(w *os.File, results []result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tmetric\tvalue\tunit\tbaseline\tratio\ttarget\tok\t")
	for _, r := range results {
		base, ratio := "", ""
		if r.Baseline > 0 {
			base = format(r.Baseline)
			ratio = fmt.Sprintf("%.2fx", r.Value/r.Baseline)
		}
		if r.Ratio > 0 {
			ratio = fmt.Sprintf("%.2fx", r.Ratio)
		}
		ok := ""
		if r.Pass != nil {
			ok = map[bool]string{true: "yes", false: "NO"}[*r.Pass]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Scenario, r.Metric, format(r.Value), r.Unit, base, ratio, r.Target, ok)
	}
	_ = tw.Flush()
	for _, r := range results {
		if r.Note != "" {
			fmt.Fprintf(w, "  %s %s: %s\n", r.Scenario, r.Metric, r.Note)
		}
	}
}

func format(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

func check(ok bool) *bool { return &ok }

func since(t time.Time) float64 { return time.Since(t).Seconds() }
