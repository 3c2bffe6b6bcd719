package aggregate

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/dmarcd/dmarcd/dmarc/container"

	"github.com/dmarcd/dmarcd/internal/reportgen"
)

// aggBenchRecords is the size of the generated report the reader
// benchmarks decode.
const aggBenchRecords = 10000

// BenchmarkAggregateReader measures the streaming reader on a generated
// 10,000-record report (records/s is the figure of merit).
func BenchmarkAggregateReader(b *testing.B) {
	data := reportgen.Generate(1, aggBenchRecords, reportgen.Options{})
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		a, err := NewReader(bytes.NewReader(data), container.Limits{})
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			_, err := a.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != aggBenchRecords {
			b.Fatalf("%d records", n)
		}
	}
	b.ReportMetric(float64(aggBenchRecords*b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkEncodingXMLReference measures the encoding/xml reference decoder
// on the same input, for the ratio.
func BenchmarkEncodingXMLReference(b *testing.B) {
	data := reportgen.Generate(1, aggBenchRecords, reportgen.Options{})
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		res, err := aggRefParse(bytes.NewReader(data), container.Limits{})
		if err != nil || len(res.Records) != aggBenchRecords {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(aggBenchRecords*b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkExtractCorpus measures extraction and decoding of every
// aggregate file of the corpus (records/s over the whole corpus), with the
// streaming reader and, for the ratio, with the encoding/xml reference
// (which refuses the two ill-formed files; their 2 records are not counted).
func BenchmarkExtractCorpus(b *testing.B) {
	var inputs [][]byte
	for _, f := range aggCorpusFiles(b) {
		data, err := os.ReadFile(filepath.Join(aggCorpusDir, f.path))
		if err != nil {
			b.Fatal(err)
		}
		inputs = append(inputs, data)
	}
	parsers := []struct {
		name  string
		parse func(io.Reader) (int, error)
	}{
		{"stream", func(r io.Reader) (int, error) {
			_, recs, err := Parse(r, container.Limits{})
			return len(recs), err
		}},
		{"encoding_xml", func(r io.Reader) (int, error) {
			res, err := aggRefParse(r, container.Limits{})
			if err != nil {
				return 0, nil
			}
			return len(res.Records), nil
		}},
	}
	for _, p := range parsers {
		b.Run(p.name, func(b *testing.B) {
			records := 0
			for b.Loop() {
				records = 0
				for _, data := range inputs {
					err := Extract(bytes.NewReader(data), container.Limits{}, func(pl container.Payload) error {
						n, err := p.parse(pl.Body)
						records += n
						return err
					})
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(records*b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
