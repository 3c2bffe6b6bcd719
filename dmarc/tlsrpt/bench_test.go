package tlsrpt

import "testing"

// BenchmarkParse measures one Microsoft-style report (two policies, two
// failure details) read from bytes.
func BenchmarkParse(b *testing.B) {
	raw := readTestdata(b, "microsoft.json")
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseBytes(raw, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseGzip is BenchmarkParse on the gzipped report, unpacked by
// package container's walk as the intake does.
func BenchmarkParseGzip(b *testing.B) {
	raw := gz(b, readTestdata(b, "microsoft.json"))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseBytes(raw, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}
