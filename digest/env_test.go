package digest_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/ingest/ingesttest"
	"github.com/dmarcd/dmarcd/internal/reportgen"
	"github.com/dmarcd/dmarcd/store"
)

// now is when the tests build their digests: Sunday 29 November 2026, so
// the day is the 28th and the week the 16th to the 22nd.
var now = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

// testEnv is a real store with organizations acme (example.com,
// example.org) and other (example.com), and a running pipeline.
type testEnv struct {
	*ingesttest.Env
	acme, other *store.Organization
	com, org    *store.Domain // acme's
	otherCom    *store.Domain
	seed        int64
}

func newTestEnv(t testing.TB) *testEnv {
	t.Helper()
	e := &testEnv{Env: ingesttest.New(t, "acme/example.com/com", "acme/example.org/org", "other/example.com/other")}
	e.acme, e.other = e.Orgs["acme"], e.Orgs["other"]
	e.com, e.org, e.otherCom = e.Domains["com@reports.test"], e.Domains["org@reports.test"], e.Domains["other@reports.test"]
	return e
}

// report ingests a generated report of records rows for domain name of
// org on the UTC day day.
func (e *testEnv) report(t testing.TB, org *store.Organization, name string, day time.Time, records int) {
	t.Helper()
	e.seed++
	xml := reportgen.Generate(e.seed, records, reportgen.Options{Domain: name, Begin: day, ReportID: fmt.Sprint("r", e.seed)})
	e.ingest(t, org, xml)
}

func (e *testEnv) ingest(t testing.TB, org *store.Organization, xml []byte) {
	t.Helper()
	res, err := e.Pipeline.Ingest(context.Background(), bytes.NewReader(xml), ingest.Arrival{Source: ingest.SourceImport, OrgID: org.ID, Name: "test.xml"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Quarantined != "" || len(res.Reports) == 0 || len(res.Expired) > 0 {
		t.Fatalf("ingest: nothing stored: %+v", res)
	}
}

// handReport is an aggregate report of one row: count messages from ip
// for domain name with the DMARC results dkim and spf.
func handReport(id, name, ip string, day time.Time, count int, dkim, spf string) []byte {
	return []byte(fmt.Sprintf(`<?xml version="1.0"?>
<feedback><report_metadata><org_name>hand.example</org_name><email>r@hand.example</email><report_id>%s</report_id>
<date_range><begin>%d</begin><end>%d</end></date_range></report_metadata>
<policy_published><domain>%s</domain><p>none</p></policy_published>
<record><row><source_ip>%s</source_ip><count>%d</count><policy_evaluated><disposition>none</disposition><dkim>%s</dkim><spf>%s</spf></policy_evaluated></row>
<identifiers><header_from>%s</header_from></identifiers>
<auth_results><spf><domain>%s</domain><result>%s</result></spf></auth_results></record></feedback>`,
		id, day.Unix(), day.Add(24*time.Hour-time.Second).Unix(), name, ip, count, dkim, spf, name, name, spf))
}

// fill ingests a month of reports: example.com every day from the 1st to
// the 28th, example.org from the 20th, other's example.com every day.
func (e *testEnv) fill(t testing.TB) {
	t.Helper()
	for d := 1; d <= 28; d++ {
		day := time.Date(2026, 11, d, 0, 0, 0, 0, time.UTC)
		e.report(t, e.acme, "example.com", day, 40)
		if d >= 20 {
			e.report(t, e.acme, "example.org", day, 15)
		}
		e.report(t, e.other, "example.com", day, 25)
	}
}

func lines(s string) []string { return strings.Split(s, "\n") }
