// Command chbench measures the ClickHouse export (issue 28) against a
// clickhouse-server it starts on loopback:
//
//  1. export: a store of -records aggregate records (ingested first, not
//     timed) exported into an empty ClickHouse, in records per second
//     (target: 200,000);
//
//  2. ingest: the same reports ingested into a fresh store with the sink
//     off and with it running, alternating rounds, medians (target: with
//     the sink within 5 % of without).
//
//     go build -o bench/out/bin/chbench ./bench/chbench
//     bench/out/bin/chbench -records 1000000 -rounds 3
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dmarcd/dmarcd/export/clickhouse"
	"github.com/dmarcd/dmarcd/export/clickhouse/chtest"
	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/internal/reportgen"
	"github.com/dmarcd/dmarcd/store"
)

func main() {
	records := flag.Int("records", 1_000_000, "aggregate records to export")
	perReport := flag.Int("per-report", 2000, "records per report")
	rounds := flag.Int("rounds", 3, "ingest rounds with the sink off and on, alternating")
	ingestRecords := flag.Int("ingest-records", 400_000, "records ingested per ingest round")
	workers := flag.Int("workers", 8, "inputs ingested at once")
	out := flag.String("json", "", "write the results here too")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the export here")
	flag.Parse()

	dir, err := os.MkdirTemp("", "chbench-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ch, err := chtest.Launch(filepath.Join(dir, "clickhouse"))
	if err != nil {
		log.Fatal(err)
	}
	defer ch.Stop()
	log.Printf("clickhouse-server %s on 127.0.0.1:%d", must(ch.TryQuery("SELECT version()")), ch.HTTPPort)

	// 1. Export of a full store.
	db, _ := mustStore(filepath.Join(dir, "export.db"))
	t0 := time.Now()
	ingestAll(db, generate(*records / *perReport, *perReport, 0), *workers)
	log.Printf("stored %d records in %.1f s (not timed)", *records, time.Since(t0).Seconds())
	sink := mustSink(db, ch, "export")
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
	}
	t0 = time.Now()
	chCPU0, selfCPU0 := ch.CPUTime(), selfCPU()
	for {
		more, err := sink.Pass(context.Background())
		if err != nil {
			log.Fatal(err)
		}
		if !more {
			break
		}
	}
	exportSec := time.Since(t0).Seconds()
	pprof.StopCPUProfile()
	chCPU, dmCPU := (ch.CPUTime() - chCPU0).Seconds(), (selfCPU() - selfCPU0).Seconds()
	st := sink.Status()
	got := must(ch.TryQuery("SELECT count() FROM export.aggregate_records"))
	rate := float64(*records) / exportSec
	fmt.Printf("export: %d records (%d rows in all, %s in ClickHouse) in %.2f s: %.0f records/s (target 200,000)\n",
		*records, st.Rows, got, exportSec, rate)
	fmt.Printf("export CPU: dmarcd %.2f s (%.0f records per CPU second), clickhouse-server %.2f s (%.0f records per CPU second); load average %s\n",
		dmCPU, float64(*records)/dmCPU, chCPU, float64(*records)/chCPU, loadavg())
	db.Close()

	// 2. Ingest with the sink off and on, alternating.
	var off, on, cpuOff, cpuOn, chOn []float64
	for r := range *rounds {
		for _, withSink := range []bool{false, true} {
			name := fmt.Sprintf("ingest_%d_%v", r, withSink)
			db, _ := mustStore(filepath.Join(dir, name+".db"))
			stop := func() {}
			if withSink {
				s := mustSink(db, ch, name)
				s.Kick()
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { defer close(done); _ = s.Run(ctx) }()
				stop = func() { cancel(); <-done }
			}
			reports := generate(*ingestRecords / *perReport, *perReport, int64(r*100000))
			t0, cpu0, ch0 := time.Now(), selfCPU(), ch.CPUTime()
			ingestAll(db, reports, *workers)
			sec := time.Since(t0).Seconds()
			stop()
			cpu, chc := (selfCPU() - cpu0).Seconds(), (ch.CPUTime() - ch0).Seconds()
			db.Close()
			if withSink {
				on, cpuOn, chOn = append(on, sec), append(cpuOn, cpu), append(chOn, chc)
			} else {
				off, cpuOff = append(off, sec), append(cpuOff, cpu)
			}
			log.Printf("round %d, sink %v: %d records ingested in %.2f s (CPU: dmarcd %.2f s, clickhouse-server %.2f s)", r, withSink, *ingestRecords, sec, cpu, chc)
		}
	}
	mOff, mOn := median(off), median(on)
	fmt.Printf("ingest: %d records, median %.2f s without the sink, %.2f s with it: %+.1f %% (target within 5 %%)\n",
		*ingestRecords, mOff, mOn, 100*(mOn-mOff)/mOff)
	fmt.Printf("ingest CPU of dmarcd: median %.2f s without the sink, %.2f s with it (%+.1f %%); clickhouse-server's %.2f s on the same cores; load average %s\n",
		median(cpuOff), median(cpuOn), 100*(median(cpuOn)-median(cpuOff))/median(cpuOff), median(chOn), loadavg())
	if *out != "" {
		res := map[string]any{"export_records": *records, "export_seconds": exportSec, "export_records_per_second": rate,
			"export_cpu_dmarcd_seconds": dmCPU, "export_cpu_clickhouse_seconds": chCPU,
			"ingest_records": *ingestRecords, "ingest_off_seconds": off, "ingest_on_seconds": on,
			"ingest_overhead_percent": 100 * (mOn - mOff) / mOff,
			"ingest_cpu_off_seconds":  cpuOff, "ingest_cpu_on_seconds": cpuOn, "ingest_cpu_clickhouse_seconds": chOn}
		b, _ := json.MarshalIndent(res, "", "  ")
		if err := os.WriteFile(*out, b, 0o644); err != nil {
			log.Fatal(err)
		}
	}
}

const addr = "benchaddr@reports.test"

func mustStore(path string) (*store.DB, *store.Domain) {
	db, err := store.Open(path, nil)
	if err != nil {
		log.Fatal(err)
	}
	org, err := db.CreateOrganization("bench", store.PlanUnlimited)
	if err != nil {
		log.Fatal(err)
	}
	d := &store.Domain{OrgID: org.ID, Name: "example.com", ReportingEmail: addr, DMARCRecord: "v=DMARC1; p=none"}
	if err := db.CreateDomain(d); err != nil {
		log.Fatal(err)
	}
	return db, d
}

func mustSink(db *store.DB, ch *chtest.Server, database string) *clickhouse.Sink {
	ep, err := clickhouse.ParseEndpoint(ch.URL(database), chtest.Password, "")
	if err != nil {
		log.Fatal(err)
	}
	s, err := clickhouse.New(clickhouse.Config{Store: db, Endpoint: ep, Settle: time.Millisecond, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	return s
}

// generate returns n reports of per records each, recent (retention keeps
// them).
func generate(n, per int, seed0 int64) [][]byte {
	reports := make([][]byte, n)
	for i := range reports {
		reports[i] = reportgen.Generate(seed0+int64(i), per, reportgen.Options{
			Begin: time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -1-i%30)})
	}
	return reports
}

// ingestAll ingests reports through a pipeline, workers at a time, and
// waits until every one is stored.
func ingestAll(db *store.DB, reports [][]byte, workers int) {
	p, err := ingest.New(ingest.Config{Store: db, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	var wg sync.WaitGroup
	next := make(chan []byte)
	for range workers {
		wg.Go(func() {
			for xml := range next {
				if _, err := p.Ingest(ctx, bytes.NewReader(xml), ingest.Arrival{Source: ingest.SourceImport, Recipient: addr, Name: "bench"}); err != nil {
					log.Fatal(err)
				}
			}
		})
	}
	for _, r := range reports {
		next <- r
	}
	close(next)
	wg.Wait()
}

// selfCPU is the CPU time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadavg is the first field of /proc/loadavg: how busy the machine was.
func loadavg() string {
	raw, _ := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(raw)); len(f) > 0 {
		return f[0]
	}
	return "?"
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func must(s string, err error) string {
	if err != nil {
		log.Fatal(err)
	}
	return s
}
