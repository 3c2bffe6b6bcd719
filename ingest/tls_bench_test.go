package ingest

import (
	"bytes"
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// BenchmarkIngestTLS measures TLS reports imported through the pipeline:
// a Microsoft-style report (two policies, two failure details) as a bare
// JSON file, each with its own report id, ingested by 1,024 concurrent
// callers (as dmarcd import does: imports.DefaultJobs): sniffed, parsed, routed,
// stored in fsync'd group commits. reports/s is issue 14's import figure
// (target 20,000).
func BenchmarkIngestTLS(b *testing.B) {
	const callers = 1024
	raw := mustReadFile(b, "../dmarc/tlsrpt/testdata/microsoft.json")
	old := []byte(`"133771234567890123+example.com"`)
	db := storetest.Open(b)
	org := storetest.MustOrganization(b, db, "acme", store.PlanUnlimited)
	storetest.MustDomain(b, db, org.ID, "example.com")
	p := startPipeline(b, db, nil)
	var seq atomic.Int64
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	var wg sync.WaitGroup
	per := (b.N + callers - 1) / callers
	for range callers {
		wg.Go(func() {
			for range per {
				data := bytes.Replace(raw, old, []byte(`"`+strconv.FormatInt(seq.Add(1), 10)+`"`), 1)
				res, err := p.Ingest(context.Background(), bytes.NewReader(data), importOf("bench.json"))
				if err != nil || len(res.Reports) != 1 || res.Reports[0].Duplicate {
					b.Errorf("%+v, %v", res, err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(per*callers)/b.Elapsed().Seconds(), "reports/s")
	// The process's CPU time per report: what the figure is on a machine
	// that gives the process its cores (a shared one gives it less).
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(per*callers), "cpu-µs/report")
	st := p.Stats()
	b.ReportMetric(float64(per*callers)/float64(max(st.Commits, 1)), "reports/commit")
}
