package ingest

import (
	"bytes"
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/internal/reportgen"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// BenchmarkIngest measures the pipeline end to end (parse, geolocate,
// dedup, fsync'd group commits) on 50-record reports ingested by 64
// concurrent callers; bench/ingestbench has the full set of figures.
// Besides records/s it reports the process CPU time per record spent in
// the timed part (cpu-ns/record), which a machine shared with other work
// disturbs far less than the wall time.
func BenchmarkIngest(b *testing.B) {
	const callers, records = 64, 50
	db := storetest.Open(b)
	org := storetest.MustOrganization(b, db, "acme", store.PlanUnlimited)
	storetest.MustDomain(b, db, org.ID, "example.com")
	p := startPipeline(b, db, func(c *Config) { c.Geo = openGeo(b) })
	inputs := make([][]byte, callers)
	seed := int64(0)
	var cpu time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for k := range inputs {
			inputs[k] = reportgen.Generate(seed, records, reportgen.Options{})
			seed++
		}
		b.StartTimer()
		before := cpuTime()
		var wg sync.WaitGroup
		for _, data := range inputs {
			wg.Go(func() {
				if _, err := p.Ingest(context.Background(), bytes.NewReader(data), importOf("bench.xml")); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
		cpu += cpuTime() - before
	}
	b.ReportMetric(float64(b.N*callers*records)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(cpu)/float64(b.N*callers*records), "cpu-ns/record")
}

// cpuTime is the user and system CPU time of the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
