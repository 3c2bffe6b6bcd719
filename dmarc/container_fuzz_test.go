package dmarc

import (
	"bytes"
	"testing"

	"github.com/dmarcd/dmarcd/internal/reportgen"
)

// ctrFuzzLimits keep each fuzz iteration small.
var ctrFuzzLimits = Limits{MaxCompressed: 1 << 20, MaxDecompressed: 1 << 20, MaxRecords: 1000, MaxMembers: 10}

// ctrFuzzParse is the callback of the fuzz targets: decode every payload
// as the ingest pipeline would.
func ctrFuzzParse(p Payload) error {
	_, _, err := ParseAggregate(p.Body, ctrFuzzLimits)
	return err
}

// FuzzContainer ensures that on any input ExtractAggregate (sniffing,
// gzip, zlib, zip, mail, and the XML reader behind them) neither panics
// nor returns an error that does not wrap ErrNoReport, ErrMalformed or
// ErrTooLarge. Seeds: testdata/fuzz/FuzzContainer (corpus files and
// synthetic containers) and a few here.
func FuzzContainer(f *testing.F) {
	x := reportgen.Generate(1, 2, reportgen.Options{})
	f.Add(x)
	f.Add(reportgen.Gzip(x))
	f.Add(reportgen.Zip("r.xml", x))
	f.Add(reportgen.Zip("", reportgen.Gzip(x)))
	f.Fuzz(func(t *testing.T, data []byte) {
		err := ExtractAggregate(bytes.NewReader(data), ctrFuzzLimits, ctrFuzzParse)
		if err != nil && !aggIsSentinel(err) {
			t.Fatalf("unclassified error: %v", err)
		}
	})
}
