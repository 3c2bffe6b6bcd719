package ingest

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/internal/reportgen"
)

// TestReversedDateRangeIsQuarantined ensures a report whose date range
// ends before it begins is quarantined with that reason, not stored with
// impossible dates.
func TestReversedDateRangeIsQuarantined(t *testing.T) {
	e := newEnv(t, nil)
	e.domain(t, "example.com")
	xml := reportgen.Generate(8, 5, reportgen.Options{})
	begin := regexp.MustCompile(`<begin>(\d+)</begin>`).FindSubmatch(xml)
	end := regexp.MustCompile(`<end>(\d+)</end>`).FindSubmatch(xml)
	xml = bytes.Replace(xml, begin[0], []byte("<begin>"+string(end[1])+"</begin>"), 1)
	xml = bytes.Replace(xml, end[0], []byte("<end>"+string(begin[1])+"</end>"), 1)
	res := e.ingest(t, xml, importOf("reversed.xml"))
	if res.Quarantined == "" || len(res.Reports) != 0 || !strings.Contains(res.Reason, "ends") || !strings.Contains(res.Reason, "before it begins") {
		t.Fatalf("result %+v, want quarantined: ends before it begins", res)
	}
}

// TestSkippedRecordsAreCounted ensures records skipped while parsing (an
// empty source IP) are counted in the result, not only logged.
func TestSkippedRecordsAreCounted(t *testing.T) {
	e := newEnv(t, nil)
	e.domain(t, "example.com")
	xml := reportgen.Generate(9, 6, reportgen.Options{})
	ips := regexp.MustCompile(`<source_ip>[^<]*</source_ip>`)
	n := 0
	xml = ips.ReplaceAllFunc(xml, func(m []byte) []byte {
		if n++; n <= 2 {
			return []byte("<source_ip></source_ip>")
		}
		return m
	})
	res := e.ingest(t, xml, importOf("skips.xml"))
	if len(res.Reports) != 1 || res.Reports[0].Records != 4 || res.RecordsSkipped != 2 {
		t.Fatalf("result %+v, want 1 report of 4 records, 2 skipped", res)
	}
}
