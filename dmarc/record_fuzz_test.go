package dmarc

import (
	"errors"
	"slices"
	"testing"
)

// FuzzParseRecord ensures ParseRecord never panics, that a parsed record
// renders to text that re-parses to the same tags and values, and that
// adding a reporting address never weakens the record.
func FuzzParseRecord(f *testing.F) {
	for _, name := range []string{"valid.txt", "invalid.txt"} {
		for _, txt := range readRecordLines(f, name) {
			f.Add(txt)
		}
	}
	f.Fuzz(func(t *testing.T, txt string) {
		_, _ = ParseTags(txt)
		claims := IsDMARCRecord(txt)
		r, err := ParseRecord(txt)
		if err != nil {
			if !errors.Is(err, ErrInvalidRecord) {
				t.Fatalf("ParseRecord(%q) error %v does not wrap ErrInvalidRecord", txt, err)
			}
			return
		}
		if !claims {
			t.Fatalf("ParseRecord accepted %q but IsDMARCRecord refuses it", txt)
		}
		again, err := ParseRecord(r.String())
		if err != nil {
			t.Fatalf("String() of %q = %q does not re-parse: %v", txt, r.String(), err)
		}
		if !slices.Equal(again.Tags, r.Tags) || again.P != r.P || again.SP != r.SP || again.NP != r.NP || again.PCT != r.PCT {
			t.Fatalf("re-parse of %q changed it:\n%+v\n%+v", txt, r, again)
		}
		const addr = "fuzz@reports.example.net"
		with, err := ParseRecord(r.WithReportingAddress(addr))
		if err != nil {
			t.Fatalf("WithReportingAddress of %q does not parse: %v", txt, err)
		}
		if !with.HasReportingAddress(addr) || with.P != r.P || with.SP != r.SP || with.NP != r.NP || with.PCT != r.PCT {
			t.Fatalf("WithReportingAddress of %q weakened it or lost the address: %+v", txt, with)
		}
	})
}
