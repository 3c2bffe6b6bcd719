package arf

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/dmarcd/dmarcd/dmarc/container"
)

// BenchmarkExtractFailure measures Extract over every
// failure sample of the corpus (reports/s is the figure of merit; the
// ingest target is 2,000 parsed and stored per second).
func BenchmarkExtractFailure(b *testing.B) {
	files, err := filepath.Glob(filepath.Join(failCorpusDir, "*.eml"))
	if err != nil || len(files) == 0 {
		b.Fatalf("no corpus samples: %v", err)
	}
	var inputs [][]byte
	size := 0
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			b.Fatal(err)
		}
		inputs = append(inputs, data)
		size += len(data)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	reports := 0
	for b.Loop() {
		for _, data := range inputs {
			reps, err := Extract(bytes.NewReader(data), container.Limits{})
			if err != nil {
				b.Fatal(err)
			}
			reports += len(reps)
		}
	}
	b.ReportMetric(float64(reports)/b.Elapsed().Seconds(), "reports/s")
}
