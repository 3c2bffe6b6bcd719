package ingest

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

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

// TestImportLeavesOutExpiredReports ensures an import does not store
// reports the retention job would delete at once: aggregate reports that
// ended before Retention, failure reports that arrived before
// FailureRetention. They are named in Result.Expired, not quarantined;
// mail (SMTP) and mailboxes (IMAP) go by the same rule (issue 24).
func TestImportLeavesOutExpiredReports(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Retention, c.FailureRetention = 400*24*time.Hour, 90*24*time.Hour })
	d := e.domain(t, "example.com")
	old := reportgen.Generate(12, 5, reportgen.Options{Begin: time.Date(2019, 3, 1, 0, 0, 0, 0, time.UTC)})
	res := e.ingest(t, old, importOf("2019.xml"))
	if len(res.Reports) != 0 || res.Quarantined != "" || len(res.Expired) != 1 || res.Expired[0].Window != "400d" ||
		res.Expired[0].Kind != KindAggregate || !res.Expired[0].Date.Equal(time.Date(2019, 3, 1, 23, 59, 59, 0, time.UTC)) {
		t.Fatalf("old aggregate report: %+v", res)
	}
	for _, a := range []Arrival{smtpTo(d.ReportingEmail), {Source: SourceIMAP, OrgID: e.org.ID, Name: "imap"}} {
		if res := e.ingest(t, old, a); len(res.Reports) != 0 || res.Quarantined != "" || len(res.Expired) != 1 || res.NotReport {
			t.Errorf("old report by %s: %+v, want left out as too old", a.Source, res)
		}
	}
	mail := arfMail(arfSpec{to: d.ReportingEmail, reportedDomain: "example.com", sourceIP: "192.0.2.1", arrival: "Fri, 01 Mar 2019 10:00:00 +0000"})
	res = e.ingest(t, mail, importOf("old-failure.eml"))
	if len(res.Reports) != 0 || res.Quarantined != "" || len(res.Expired) != 1 || res.Expired[0].Kind != KindFailure || res.Expired[0].Window != "90d" {
		t.Fatalf("old failure report: %+v", res)
	}
}

// TestRetryOfTooOldReportKeepsEntry ensures a quarantine retry whose input
// now routes but is older than the retention window keeps its entry, with
// the new reason and one more retry, instead of removing it with nothing
// stored (issue 24: a 2019 report quarantined for want of a registered
// domain, retried once the domain was registered, printed "removed").
func TestRetryOfTooOldReportKeepsEntry(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Retention, c.FailureRetention = 400*24*time.Hour, 90*24*time.Hour })
	old := reportgen.Generate(12, 5, reportgen.Options{Domain: "late.example", Begin: time.Date(2019, 3, 1, 0, 0, 0, 0, time.UTC)})
	oldFailure := arfMail(arfSpec{reportedDomain: "late.example", sourceIP: "192.0.2.1", arrival: "Fri, 01 Mar 2019 10:00:00 +0000"})
	var ids []string
	for _, in := range []struct {
		raw []byte
		a   Arrival
	}{{old, importOf("2019.xml")}, {oldFailure, importOf("2019.eml")}} {
		res := e.ingest(t, in.raw, in.a)
		if res.Quarantined == "" {
			t.Fatalf("%s before the domain is registered: %+v", in.a.Name, res)
		}
		ids = append(ids, res.Quarantined)
	}
	e.domain(t, "late.example")
	for _, id := range ids {
		res, err := e.p.RetryQuarantine(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if res.Quarantined != id || len(res.Reports) != 0 || len(res.Expired) != 1 || !strings.Contains(res.Reason, "older than the retention window") {
			t.Errorf("retry: %+v, want the entry kept as too old", res)
			continue
		}
		entry, _, err := e.db.FindQuarantine(id)
		if err != nil {
			t.Fatalf("the entry is gone: %v", err)
		}
		if entry.Retries != 1 || !strings.Contains(entry.Reason, "older than the retention window") {
			t.Errorf("entry after the retry: %d retries, reason %q", entry.Retries, entry.Reason)
		}
	}
}
