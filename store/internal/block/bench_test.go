package block

import (
	"fmt"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store/internal/reports"
)

// The three shapes as the store will block them: reports spread
// over 300 days (importbench's files), one block per domain and day.
// 2,000 reports × 50 records: 7 reports a day; 20,000 × 5: 67 a day; one
// report of a million records: cut into blocks of 16,384 rows (the
// store's); the runs time the first block, the size line counts them all.
var shapes = []struct {
	name             string
	reports, records int // per block
	chunk            int // rows a block, 0: all
}{
	{"2000x50", 7, 50, 0},
	{"20000x5", 67, 5, 0},
	{"1x1000000/16384", 1, 1_000_000, 1 << 14}, // the store's block size
}

// BenchmarkShapes encodes and decodes one block of each shape and reports
// its size in B/record.
func BenchmarkShapes(b *testing.B) {
	day := time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, sh := range shapes {
		ids, rows := genReports(b, 1, sh.reports, sh.records, day)
		if sh.chunk > 0 {
			// The size of all the blocks of the shape; the runs time the first.
			total := 0
			for i := 0; i < len(rows); i += sh.chunk {
				enc, err := Encode(nil, ids, rows[i:min(i+sh.chunk, len(rows))])
				if err != nil {
					b.Fatal(err)
				}
				total += len(enc)
			}
			fmt.Printf("%s: %d rows in blocks of %d: %d B (%.2f B/record)\n", sh.name, len(rows), sh.chunk, total, float64(total)/float64(len(rows)))
			rows = rows[:sh.chunk]
		}
		enc, err := Encode(nil, ids, rows)
		if err != nil {
			b.Fatal(err)
		}
		raw := int64(len(rows))
		perRecord := float64(len(enc)) / float64(raw)
		b.Run("encode/"+sh.name, func(b *testing.B) {
			b.ReportAllocs()
			var buf []byte
			for b.Loop() {
				buf, _ = Encode(buf[:0], ids, rows)
			}
			b.ReportMetric(float64(b.N)*float64(raw)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(perRecord, "B/record")
		})
		b.Run("decode/"+sh.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				blk, err := Decode(enc)
				if err != nil {
					b.Fatal(err)
				}
				if err := blk.Each(func(*Row) error { return nil }); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)*float64(raw)/b.Elapsed().Seconds(), "records/s")
		})
		b.Run("report/"+sh.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				blk, err := Decode(enc)
				if err != nil {
					b.Fatal(err)
				}
				if err := blk.ReportRows(0, func(uint32, *reports.Record) error { return nil }); err != nil {
					b.Fatal(err)
				}
			}
		})
		fmt.Printf("%s: %d rows, %d B (%.2f B/record)\n", sh.name, raw, len(enc), perRecord)
	}
}
