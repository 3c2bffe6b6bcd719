package aggregate

import (
	"bytes"
	"testing"

	"github.com/dmarcd/dmarcd/dmarc/container"

	"github.com/dmarcd/dmarcd/internal/reportgen"
)

// ctrFuzzLimits keep each fuzz iteration small.
var ctrFuzzLimits = container.Limits{MaxCompressed: 1 << 20, MaxDecompressed: 1 << 20, MaxRecords: 1000, MaxMembers: 10}

// ctrFuzzParse is the callback of the fuzz targets: decode every payload
// as the ingest pipeline would.
func ctrFuzzParse(p container.Payload) error {
	_, _, err := Parse(p.Body, ctrFuzzLimits)
	return err
}

// FuzzExtract ensures that on any input Extract (sniffing, gzip, zlib,
// zip, mail, and the XML reader behind them) neither panics nor returns an
// error that does not wrap ErrNoReport, ErrMalformed or ErrTooLarge (of
// container). Seeds: testdata/fuzz/FuzzExtract (corpus files and synthetic
// containers) and a few here.
func FuzzExtract(f *testing.F) {
	x := reportgen.Generate(1, 2, reportgen.Options{})
	f.Add(x)
	f.Add(reportgen.Gzip(x))
	f.Add(reportgen.Zip("r.xml", x))
	f.Add(reportgen.Zip("", reportgen.Gzip(x)))
	f.Fuzz(func(t *testing.T, data []byte) {
		err := Extract(bytes.NewReader(data), ctrFuzzLimits, ctrFuzzParse)
		if err != nil && !aggIsSentinel(err) {
			t.Fatalf("unclassified error: %v", err)
		}
	})
}
