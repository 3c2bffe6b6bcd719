package ingest

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/dmarcd/dmarcd/internal/reportgen"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// BenchmarkIngest measures the pipeline end to end (parse, geolocate,
// dedup, fsync'd group commits) on 50-record reports ingested by 64
// concurrent callers; bench/ingestbench has the full set of figures.
func BenchmarkIngest(b *testing.B) {
	const callers, records = 64, 50
	db := storetest.Open(b)
	org := storetest.MustOrganization(b, db, "acme", store.PlanUnlimited)
	storetest.MustDomain(b, db, org.ID, "example.com")
	p := startPipeline(b, db, func(c *Config) { c.Geo = openGeo(b) })
	inputs := make([][]byte, callers)
	seed := int64(0)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for k := range inputs {
			inputs[k] = reportgen.Generate(seed, records, reportgen.Options{})
			seed++
		}
		b.StartTimer()
		var wg sync.WaitGroup
		for _, data := range inputs {
			wg.Go(func() {
				if _, err := p.Ingest(context.Background(), bytes.NewReader(data), importOf("bench.xml")); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
	}
	b.ReportMetric(float64(b.N*callers*records)/b.Elapsed().Seconds(), "records/s")
}
