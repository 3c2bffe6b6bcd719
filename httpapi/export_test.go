package httpapi

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/app"
)

// csvExportHeader is the bulk CSV export's header row (API.md).
const csvExportHeader = "report_id,domain,org_name,external_report_id,date_begin,date_end," +
	"source_ip,count,disposition,dkim,spf,dmarc,header_from,envelope_from,country_code,city,asn,as_org,dkim_domains,spf_domains"

// TestExportReports ensures the bulk export streams every report of the
// caller's organization that passes the filters, with its records, in
// NDJSON and CSV, across more than one read batch, and refuses bad input
// with JSON errors.
func TestExportReports(t *testing.T) {
	e := newReportEnv(t)
	for d := 1; d <= app.ExportBatch+5; d++ { // more than one batch
		mustReport(t, e.db, e.a2, time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(d)*time.Hour), "bulk.example", sampleRecords()[:1])
	}
	wantReports := 3 + app.ExportBatch + 5
	wantRecords := len(sampleRecords()) + 3 + (len(sampleRecords()) - 2) + app.ExportBatch + 5

	r := e.do("GET", "/api/v1/reports/export?format=ndjson", e.readA, nil)
	if r.status != 200 || r.header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("%d %s %.300s", r.status, r.header.Get("Content-Type"), r.body)
	}
	ids, records := map[string]bool{}, 0
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	for sc.Scan() {
		var line struct {
			ID       string            `json:"id"`
			DomainID string            `json:"domain_id"`
			Records  []json.RawMessage `json:"records"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if ids[line.ID] || line.DomainID == e.b1.ID {
			t.Fatalf("report %s repeated or of another organization", line.ID)
		}
		ids[line.ID] = true
		records += len(line.Records)
	}
	if len(ids) != wantReports || records != wantRecords {
		t.Errorf("ndjson: %d reports, %d records; want %d, %d", len(ids), records, wantReports, wantRecords)
	}

	r = e.do("GET", "/api/v1/reports/export?format=csv&domain_id="+strings.ToUpper(e.a1.ID), e.keyA, nil)
	rows, err := csv.NewReader(bytes.NewReader(r.body)).ReadAll()
	if r.status != 200 || err != nil {
		t.Fatalf("csv: %d %v %.300s", r.status, err, r.body)
	}
	if strings.Join(rows[0], ",") != csvExportHeader || len(rows) != 1+len(sampleRecords())+3 {
		t.Errorf("csv of a1: header %v, %d rows", rows[0], len(rows))
	}
	for _, row := range rows[1:] {
		if row[1] != "alpha.example" {
			t.Errorf("row of another domain: %v", row)
		}
	}
	r = e.do("GET", "/api/v1/reports/export?format=csv&date_from=2026-11-04", e.keyA, nil)
	if rows, err := csv.NewReader(bytes.NewReader(r.body)).ReadAll(); err != nil || len(rows) != 1+3 {
		t.Errorf("date_from: %d rows, %v", len(rows), err)
	}
	for q, field := range map[string]string{"": "format", "format=xml": "format", "format=csv&domain_id=x": "domain_id",
		"format=csv&date_from=soon": "date_from"} {
		if r := e.do("GET", "/api/v1/reports/export?"+q, e.keyA, nil); r.status != 400 || r.errorCode(t) != "bad_request" ||
			!strings.Contains(string(r.body), field) {
			t.Errorf("%q: %d %s", q, r.status, r.body)
		}
	}
	if r := e.do("GET", "/api/v1/reports/export?format=csv&domain_id="+e.b1.ID, e.keyA, nil); r.status != 404 {
		t.Errorf("another organization's domain: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/api/v1/reports/export?format=csv", "", nil); r.status != 401 {
		t.Errorf("no key: %d", r.status)
	}
}
