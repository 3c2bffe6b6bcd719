package httpapi

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

func sp(s string) *string    { return &s }
func u32(n uint32) *uint32   { return &n }
func f64(f float64) *float64 { return &f }

// sampleRecords returns records covering what the endpoints must render:
// with and without geo, partial geo, several auth results, nulls, and text
// a spreadsheet would run or a naive CSV writer would break on.
func sampleRecords() []*store.Record {
	gb := &store.Geo{CountryCode: sp("GB"), CountryName: sp("United Kingdom"), City: sp("London"),
		Latitude: f64(51.5), Longitude: f64(-0.1), ASN: u32(20712), ASOrg: sp("Andrews & Arnold Ltd")}
	us := &store.Geo{CountryCode: sp("US"), CountryName: sp("United States"), ASN: u32(15169), ASOrg: sp("GOOGLE")}
	return []*store.Record{
		{SourceIP: "81.2.69.142", Count: 100, Disposition: "none", DKIM: "pass", SPF: "pass", DMARC: "pass",
			HeaderFrom: "alpha.example", EnvelopeFrom: sp("alpha.example"), Reasons: []store.Reason{},
			AuthResults: store.AuthResults{
				DKIM: []store.DKIMAuth{{Domain: "alpha.example", Selector: sp("s1"), Result: "pass"}, {Domain: "esp.example", Result: "pass"}},
				SPF:  []store.SPFAuth{{Domain: "alpha.example", Scope: sp("mfrom"), Result: "pass"}}},
			Geo: gb},
		{SourceIP: "2001:db8::25", Count: 7, Disposition: "quarantine", DKIM: "fail", SPF: "fail", DMARC: "fail",
			HeaderFrom: "=cmd|' /C calc'!A0", EnvelopeFrom: sp("+1"), EnvelopeTo: sp("@SUM(1+1)"),
			Reasons:     []store.Reason{{Type: "local_policy", Comment: sp("-1 looks \"odd\", really")}},
			AuthResults: store.AuthResults{DKIM: []store.DKIMAuth{}, SPF: []store.SPFAuth{{Domain: "-evil.example", Result: "fail"}}},
			Geo:         &store.Geo{ASOrg: sp("=HYPERLINK(\"http://x\")"), City: sp("Line one\nline two, \"quoted\"")}},
		{SourceIP: "203.0.113.7", Count: 3, Disposition: "none", DKIM: "pass", SPF: "fail", DMARC: "pass",
			HeaderFrom: "alpha.example", Reasons: []store.Reason{{Type: "forwarded"}},
			AuthResults: store.AuthResults{
				DKIM: []store.DKIMAuth{{Domain: "alpha.example", Selector: sp("s2"), Result: "pass"}},
				SPF:  []store.SPFAuth{{Domain: "fwd.example", Scope: sp("mfrom"), Result: "softfail"}, {Domain: "helo.fwd.example", Scope: sp("helo"), Result: "none"}}},
			Geo: us},
		{SourceIP: "198.51.100.9", Count: 0, Disposition: "reject", DKIM: "fail", SPF: "fail", DMARC: "fail",
			HeaderFrom: "alpha.example", Reasons: []store.Reason{},
			AuthResults: store.AuthResults{DKIM: []store.DKIMAuth{}, SPF: []store.SPFAuth{}}},
		{SourceIP: "198.51.100.10", Count: 12, Disposition: "reject", DKIM: "fail", SPF: "fail", DMARC: "fail",
			HeaderFrom: "alpha.example", Reasons: []store.Reason{},
			AuthResults: store.AuthResults{DKIM: []store.DKIMAuth{}, SPF: []store.SPFAuth{{Domain: "alpha.example", Result: "fail"}}},
			Geo:         us},
	}
}

// reportFixture is a report written for a test and the records it holds.
type reportFixture struct {
	*store.Report
	records []*store.Record
}

// mustReport stores a report of domain d, its date range starting at begin
// and lasting a day, through the store's write API, as ingest does.
func mustReport(tb testing.TB, db *store.DB, d *store.Domain, begin time.Time, reporter string, records []*store.Record) reportFixture {
	tb.Helper()
	draft, err := db.NewReportDraft(store.Report{
		DomainID: d.ID, Domain: d.Name, OrgID: d.OrgID,
		OrgName: reporter, OrgEmail: "noreply-dmarc@" + reporter, ExternalReportID: store.NewID(),
		DateBegin: begin, DateEnd: begin.Add(24*time.Hour - time.Second), ReceivedAt: begin.Add(30 * time.Hour),
		PolicyPublished: store.PolicyPublished{Domain: d.Name, P: "none", SP: sp("quarantine"), PCT: 100, ADKIM: "r", ASPF: "s"},
	})
	if err != nil {
		tb.Fatal(err)
	}
	for _, r := range records {
		draft.Add(r)
	}
	draft.Finish()
	outs, err := db.NewIngester().Commit(&store.IngestBatch{Reports: []*store.ReportDraft{draft}})
	if err != nil || !outs[0].Stored {
		tb.Fatalf("storing a report: %v %+v", err, outs)
	}
	rep := draft.Report()
	return reportFixture{Report: &rep, records: records}
}

// reportEnv is the API env plus domains and reports in both organizations:
// A has a1 (reports r1 on Nov 1 and r2 on Nov 5) and a2 (r3 on Nov 3);
// B has b1 (rb on Nov 2).
type reportEnv struct {
	*env
	a1, a2, b1     *store.Domain
	r1, r2, r3, rb reportFixture
}

func newReportEnv(t *testing.T) *reportEnv {
	t.Helper()
	e := &reportEnv{env: newEnv(t, 1000)}
	e.a1 = storetest.MustDomain(t, e.db, e.orgA.ID, "alpha.example")
	e.a2 = storetest.MustDomain(t, e.db, e.orgA.ID, "second.example")
	e.b1 = storetest.MustDomain(t, e.db, e.orgB.ID, "alpha.example")
	nov := func(d int) time.Time { return time.Date(2026, 11, d, 0, 0, 0, 0, time.UTC) }
	e.r1 = mustReport(t, e.db, e.a1, nov(1), "google.com", sampleRecords())
	e.r2 = mustReport(t, e.db, e.a1, nov(5), "yahoo.com", sampleRecords()[:3])
	e.r3 = mustReport(t, e.db, e.a2, nov(3), "google.com", sampleRecords()[2:])
	e.rb = mustReport(t, e.db, e.b1, nov(2), "google.com", sampleRecords()[:1])
	return e
}

type reportList struct {
	Data       []store.Report `json:"data"`
	Pagination pagination     `json:"pagination"`
}

// TestListReports ensures each filter, their combinations and pagination
// select the right reports, newest date_begin first.
func TestListReports(t *testing.T) {
	e := newReportEnv(t)
	unix := func(d int) string { return strconv.FormatInt(time.Date(2026, 11, d, 0, 0, 0, 0, time.UTC).Unix(), 10) }
	unixEnd := func(d int) string {
		return strconv.FormatInt(time.Date(2026, 11, d, 23, 59, 59, 0, time.UTC).Unix(), 10)
	}
	for _, c := range []struct {
		query string
		want  []reportFixture
		total int
	}{
		{"", []reportFixture{e.r2, e.r3, e.r1}, 3},
		{"domain_id=" + e.a1.ID, []reportFixture{e.r2, e.r1}, 2},
		{"domain_id=" + e.a2.ID, []reportFixture{e.r3}, 1},
		{"date_from=" + unix(3), []reportFixture{e.r2, e.r3}, 2},
		{"date_from=" + unix(5), []reportFixture{e.r2}, 1},
		{"date_from=" + unix(6), []reportFixture{}, 0},
		{"date_to=" + unix(4), []reportFixture{e.r3, e.r1}, 2},
		{"date_to=" + unixEnd(3), []reportFixture{e.r3, e.r1}, 2}, // r3's date_end exactly
		{"date_to=253402300799", []reportFixture{e.r2, e.r3, e.r1}, 3},
		{"date_to=" + strconv.FormatInt(e.r3.DateEnd.Unix()-1, 10), []reportFixture{e.r1}, 1},
		{"date_to=" + unix(2), []reportFixture{e.r1}, 1},
		{"date_from=" + unix(2) + "&date_to=" + unix(4), []reportFixture{e.r3}, 1},
		{"date_from=" + unix(1) + "&date_to=" + unix(1), []reportFixture{}, 0},
		{"domain_id=" + e.a1.ID + "&date_from=" + unix(2), []reportFixture{e.r2}, 1},
		{"domain_id=" + e.a2.ID + "&date_from=" + unix(4), []reportFixture{}, 0},
		{"limit=1", []reportFixture{e.r2}, 3},
		{"limit=1&page=2", []reportFixture{e.r3}, 3},
		{"limit=2&page=2", []reportFixture{e.r1}, 3},
		{"page=9", []reportFixture{}, 3},
	} {
		t.Run(c.query, func(t *testing.T) {
			r := e.do("GET", "/api/v1/reports?"+c.query, e.readA, nil)
			if r.status != http.StatusOK {
				t.Fatalf("%d %s", r.status, r.body)
			}
			var list reportList
			if err := json.Unmarshal(r.body, &list); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(r.body), `"data":[`) {
				t.Errorf("data is not an array: %s", r.body)
			}
			var got, want []string
			for _, rep := range list.Data {
				got = append(got, rep.ID)
			}
			for _, rep := range c.want {
				want = append(want, rep.ID)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("ids %v, want %v", got, want)
			}
			if list.Pagination.Total != c.total {
				t.Errorf("total %d, want %d", list.Pagination.Total, c.total)
			}
		})
	}
	// B sees its own report only, and the report object is complete.
	r := e.do("GET", "/api/v1/reports", e.keyB, nil)
	var list reportList
	json.Unmarshal(r.body, &list)
	if len(list.Data) != 1 || list.Data[0].ID != e.rb.ID {
		t.Fatalf("B's list: %s", r.body)
	}
	want := *e.rb.Report
	want.OrgID = ""
	if !reflect.DeepEqual(list.Data[0], want) {
		t.Errorf("listed report\n%+v\nwant\n%+v", list.Data[0], want)
	}
}

// TestListReportsBadFilters ensures every malformed filter is a 400 naming
// the parameter, and a domain that is not the caller's is a 404.
func TestListReportsBadFilters(t *testing.T) {
	e := newReportEnv(t)
	for _, c := range []struct {
		query  string
		status int
		field  string
	}{
		{"page=0", 400, "page"},
		{"page=x", 400, "page"},
		{"limit=0", 400, "limit"},
		{"limit=101", 400, "limit"},
		{"date_from=x", 400, "date_from"},
		{"date_from=1.5", 400, "date_from"},
		{"date_from=-1", 400, "date_from"},
		{"date_from=2026-11-31", 400, "date_from"},
		{"date_from=2026-11-01T00:00:00", 400, "date_from"},
		{"cursor=!!", 400, "cursor"},
		{"cursor=AAAA", 400, "cursor"},
		{"page=2&cursor=AAAA", 400, "cursor"},
		{"date_from=253402300800", 400, "date_from"},
		{"date_to=yesterday", 400, "date_to"},
		{"date_from=1000&date_to=999", 400, "date_to"},
		{"domain_id=not-uuid", 400, "domain_id"},
		{"domain_id=" + strings.ToUpper(e.b1.ID), 404, ""},
		{"domain_id=" + e.b1.ID, 404, ""},
		{"domain_id=00000000-0000-7000-8000-000000000000", 404, ""},
	} {
		t.Run(c.query, func(t *testing.T) {
			r := e.do("GET", "/api/v1/reports?"+c.query, e.keyA, nil)
			code := map[int]string{400: "bad_request", 404: "not_found"}[c.status]
			if r.status != c.status || r.errorCode(t) != code {
				t.Fatalf("%d %s, want %d %s", r.status, r.body, c.status, code)
			}
			if c.field != "" && !strings.Contains(string(r.body), `"field":"`+c.field+`"`) {
				t.Errorf("details do not name %s: %s", c.field, r.body)
			}
		})
	}
}

// reportBody is the body of GET /reports/{id}.
type reportBody struct {
	store.Report
	Records []store.Record `json:"records"`
}

// TestGetReport ensures a report comes back whole: its fields, then every
// record in report order with geo, nulls as null and lists as arrays.
func TestGetReport(t *testing.T) {
	e := newReportEnv(t)
	r := e.do("GET", "/api/v1/reports/"+e.r1.ID, e.readA, nil)
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %q %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	var got reportBody
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatalf("not JSON: %v: %s", err, r.body)
	}
	want := *e.r1.Report
	want.OrgID = ""
	if !reflect.DeepEqual(got.Report, want) {
		t.Errorf("report\n%+v\nwant\n%+v", got.Report, want)
	}
	if len(got.Records) != len(e.r1.records) {
		t.Fatalf("%d records, want %d", len(got.Records), len(e.r1.records))
	}
	for i, rec := range e.r1.records {
		if !reflect.DeepEqual(got.Records[i], *rec) {
			t.Errorf("record %d\n%+v\nwant\n%+v", i, got.Records[i], *rec)
		}
	}
	// The exact JSON of API.md: every field present, null when unset.
	var raw struct {
		Records []map[string]json.RawMessage `json:"records"`
	}
	json.Unmarshal(r.body, &raw)
	for _, c := range []struct {
		rec   int
		field string
		want  string
	}{
		{0, "geo", `{"country_code":"GB","country_name":"United Kingdom","city":"London","latitude":51.5,"longitude":-0.1,"asn":20712,"as_org":"Andrews \u0026 Arnold Ltd"}`},
		{0, "envelope_to", `null`},
		{0, "reasons", `[]`},
		{2, "reasons", `[{"type":"forwarded","comment":null}]`},
		{2, "geo", `{"country_code":"US","country_name":"United States","city":null,"latitude":null,"longitude":null,"asn":15169,"as_org":"GOOGLE"}`},
		{3, "geo", `null`},
		{3, "envelope_from", `null`},
		{3, "auth_results", `{"dkim":[],"spf":[]}`},
	} {
		if got := string(raw.Records[c.rec][c.field]); got != c.want {
			t.Errorf("record %d %s = %s, want %s", c.rec, c.field, got, c.want)
		}
	}
}

// TestGetLargeReport ensures a report whose JSON spans many stream chunks
// arrives complete and valid, records in order.
func TestGetLargeReport(t *testing.T) {
	e := newReportEnv(t)
	var records []*store.Record
	for i := 0; i < 3000; i++ {
		rec := *sampleRecords()[i%5]
		rec.SourceIP = fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&255, i&255)
		records = append(records, &rec)
	}
	big := mustReport(t, e.db, e.a2, time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC), "big.example", records)
	r := e.do("GET", "/api/v1/reports/"+big.ID, e.keyA, nil)
	if r.status != http.StatusOK || len(r.body) < 4*streamChunk {
		t.Fatalf("%d, %d bytes", r.status, len(r.body))
	}
	var got reportBody
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if got.ID != big.ID || got.RecordCount != 3000 || len(got.Records) != 3000 {
		t.Fatalf("report %s with %d/%d records", got.ID, got.RecordCount, len(got.Records))
	}
	for i, rec := range got.Records {
		if rec.SourceIP != records[i].SourceIP {
			t.Fatalf("record %d is %s, want %s", i, rec.SourceIP, records[i].SourceIP)
		}
	}
}

// TestReportIsolation ensures another organization's report, an unknown id
// and a malformed id are the same 404 on every report endpoint, and that a
// read key may call them all.
func TestReportIsolation(t *testing.T) {
	e := newReportEnv(t)
	for _, suffix := range []string{"", "/statistics", "/export/csv"} {
		for _, c := range []struct {
			name, key, id string
			status        int
		}{
			{"own report, read key", e.readA, e.r1.ID, 200},
			{"own report, B", e.keyB, e.rb.ID, 200},
			{"A's report as B", e.keyB, e.r1.ID, 404},
			{"B's report as A", e.keyA, e.rb.ID, 404},
			{"unknown id", e.keyA, "00000000-0000-7000-8000-000000000000", 404},
			{"malformed id", e.keyA, "not-a-uuid", 404},
			{"upper-case id", e.keyA, strings.ToUpper(e.r1.ID), 200},
			{"upper-case id of B's report", e.keyA, strings.ToUpper(e.rb.ID), 404},
			{"no key", "", e.r1.ID, 401},
		} {
			t.Run(c.name+suffix, func(t *testing.T) {
				r := e.do("GET", "/api/v1/reports/"+c.id+suffix, c.key, nil)
				if r.status != c.status {
					t.Fatalf("%d %.200s, want %d", r.status, r.body, c.status)
				}
				if c.status == 404 {
					if r.errorCode(t) != "not_found" || !strings.Contains(string(r.body), "report not found") {
						t.Errorf("body %s", r.body)
					}
					if r.header.Get("Content-Disposition") != "" {
						t.Errorf("an error carries Content-Disposition")
					}
				}
			})
		}
	}
	for _, c := range []struct{ method, path string }{
		{"POST", "/api/v1/reports"},
		{"DELETE", "/api/v1/reports/" + e.r1.ID},
		{"POST", "/api/v1/reports/" + e.r1.ID + "/export/csv"},
	} {
		if r := e.do(c.method, c.path, e.keyA, nil); r.status != http.StatusMethodNotAllowed {
			t.Errorf("%s %s: %d", c.method, c.path, r.status)
		}
	}
}

// statsBody is the body of GET /reports/{id}/statistics.
type statsBody struct {
	ReportID string `json:"report_id"`
	store.Summary
}

// checkSummary compares a summary with the sums of the records it covers.
func checkSummary(t *testing.T, got store.Summary, records []*store.Record) {
	t.Helper()
	var want store.Summary
	country := map[string]int64{}
	asn := map[string]int64{}
	auth := map[string]int64{}
	for _, r := range records {
		want.MessageCount += r.Count
		if r.DMARC == "pass" {
			want.DMARC.Pass += r.Count
		} else {
			want.DMARC.Fail += r.Count
		}
		if r.DKIM == "pass" {
			want.DKIM.Pass += r.Count
		} else {
			want.DKIM.Fail += r.Count
		}
		if r.SPF == "pass" {
			want.SPF.Pass += r.Count
		} else {
			want.SPF.Fail += r.Count
		}
		switch r.Disposition {
		case "none":
			want.Disposition.None += r.Count
		case "quarantine":
			want.Disposition.Quarantine += r.Count
		case "reject":
			want.Disposition.Reject += r.Count
		}
		cc, as := "null", "null"
		if r.Geo != nil && r.Geo.CountryCode != nil {
			cc = *r.Geo.CountryCode
		}
		if r.Geo != nil && r.Geo.ASN != nil {
			as = strconv.FormatUint(uint64(*r.Geo.ASN), 10)
		}
		country[cc] += r.Count
		asn[as] += r.Count
		auth[string(r.DKIM)+"/"+string(r.SPF)+"/"+r.DMARC] += r.Count
	}
	if got.MessageCount != want.MessageCount || got.DMARC.Pass != want.DMARC.Pass || got.DMARC.Fail != want.DMARC.Fail ||
		got.DKIM != want.DKIM || got.SPF != want.SPF || got.Disposition != want.Disposition {
		t.Errorf("summary %+v\nwant sums %+v", got, want)
	}
	rate := 0.0
	if want.MessageCount > 0 {
		rate = float64(want.DMARC.Pass) / float64(want.MessageCount)
	}
	if d := got.DMARC.PassRate - rate; d > 0.00005 || d < -0.00005 {
		t.Errorf("pass_rate %v, want %.4f", got.DMARC.PassRate, rate)
	}
	gotCountry := map[string]int64{}
	for i, g := range got.ByCountry {
		k := "null"
		if g.CountryCode != nil {
			k = *g.CountryCode
		}
		gotCountry[k] += g.Messages
		if g.DMARCPass+g.DMARCFail != g.Messages || i > 0 && g.Messages > got.ByCountry[i-1].Messages {
			t.Errorf("by_country[%d] = %+v: pass+fail != messages, or out of order", i, g)
		}
	}
	gotASN := map[string]int64{}
	for i, g := range got.ByASN {
		k := "null"
		if g.ASN != nil {
			k = strconv.FormatUint(uint64(*g.ASN), 10)
		}
		gotASN[k] += g.Messages
		if g.DMARCPass+g.DMARCFail != g.Messages || i > 0 && g.Messages > got.ByASN[i-1].Messages {
			t.Errorf("by_asn[%d] = %+v: pass+fail != messages, or out of order", i, g)
		}
	}
	gotAuth := map[string]int64{}
	for i, g := range got.ByAuthResult {
		gotAuth[g.DKIM+"/"+g.SPF+"/"+g.DMARC] += g.Messages
		if i > 0 && g.Messages > got.ByAuthResult[i-1].Messages {
			t.Errorf("by_auth_result out of order: %+v", got.ByAuthResult)
		}
	}
	for _, c := range []struct {
		name      string
		got, want map[string]int64
	}{{"by_country", gotCountry, country}, {"by_asn", gotASN, asn}, {"by_auth_result", gotAuth, auth}} {
		dropZeros(c.got)
		dropZeros(c.want)
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s sums %v, want %v", c.name, c.got, c.want)
		}
	}
}

func dropZeros(m map[string]int64) {
	for k, v := range m {
		if v == 0 {
			delete(m, k)
		}
	}
}

// TestReportStatistics ensures a report's statistics add up to its records.
func TestReportStatistics(t *testing.T) {
	e := newReportEnv(t)
	for _, rep := range []reportFixture{e.r1, e.r2, e.r3} {
		r := e.do("GET", "/api/v1/reports/"+rep.ID+"/statistics", e.readA, nil)
		if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/json" {
			t.Fatalf("%d %s", r.status, r.body)
		}
		var got statsBody
		if err := json.Unmarshal(r.body, &got); err != nil {
			t.Fatal(err)
		}
		if got.ReportID != rep.ID {
			t.Errorf("report_id %s, want %s", got.ReportID, rep.ID)
		}
		checkSummary(t, got.Summary, rep.records)
		for _, field := range []string{`"by_country":[`, `"by_asn":[`, `"by_auth_result":[`, `"pass_rate":`} {
			if !strings.Contains(string(r.body), field) {
				t.Errorf("body lacks %s: %s", field, r.body)
			}
		}
	}
}

// TestCSVExport ensures the CSV export is RFC 4180 with the API.md header,
// one row per record in report order, and every cell that could run as a
// spreadsheet formula defused.
func TestCSVExport(t *testing.T) {
	e := newReportEnv(t)
	r := e.do("GET", "/api/v1/reports/"+e.r1.ID+"/export/csv", e.readA, nil)
	if r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "text/csv; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if cd := r.header.Get("Content-Disposition"); cd != `attachment; filename="report-`+e.r1.ID+`.csv"` {
		t.Errorf("Content-Disposition %q", cd)
	}
	rows, err := csv.NewReader(bytes.NewReader(r.body)).ReadAll()
	if err != nil {
		t.Fatalf("not CSV: %v\n%s", err, r.body)
	}
	want := [][]string{
		{"source_ip", "count", "disposition", "dkim", "spf", "dmarc", "header_from", "envelope_from",
			"country_code", "city", "asn", "as_org", "dkim_domains", "spf_domains"},
		{"81.2.69.142", "100", "none", "pass", "pass", "pass", "alpha.example", "alpha.example",
			"GB", "London", "20712", "Andrews & Arnold Ltd", "alpha.example:pass;esp.example:pass", "alpha.example:pass"},
		{"2001:db8::25", "7", "quarantine", "fail", "fail", "fail", "'=cmd|' /C calc'!A0", "'+1",
			"", "Line one\nline two, \"quoted\"", "", `'=HYPERLINK("http://x")`, "", "'-evil.example:fail"},
		{"203.0.113.7", "3", "none", "pass", "fail", "pass", "alpha.example", "",
			"US", "", "15169", "GOOGLE", "alpha.example:pass", "fwd.example:softfail;helo.fwd.example:none"},
		{"198.51.100.9", "0", "reject", "fail", "fail", "fail", "alpha.example", "", "", "", "", "", "", ""},
		{"198.51.100.10", "12", "reject", "fail", "fail", "fail", "alpha.example", "",
			"US", "", "15169", "GOOGLE", "", "alpha.example:fail"},
	}
	if len(rows) != len(e.r1.records)+1 {
		t.Fatalf("%d rows, want a header and %d records", len(rows), len(e.r1.records))
	}
	for i := range want {
		if !reflect.DeepEqual(rows[i], want[i]) {
			t.Errorf("row %d\n%q\nwant\n%q", i, rows[i], want[i])
		}
	}
	for _, raw := range []string{
		"source_ip,count,disposition,dkim,spf,dmarc,header_from,envelope_from,country_code,city,asn,as_org,dkim_domains,spf_domains\r\n",
		`,"Line one` + "\r\n" + `line two, ""quoted""",`,
		`,"'=HYPERLINK(""http://x"")",`,
		"alpha.example:fail\r\n",
	} {
		if !strings.Contains(string(r.body), raw) {
			t.Errorf("CSV lacks %q:\n%s", raw, r.body)
		}
	}
	if strings.Count(string(r.body), "\n") != strings.Count(string(r.body), "\r\n") {
		t.Errorf("a line ends without CR")
	}
}

// TestCSVExportLarge ensures a CSV spanning many stream chunks has exactly
// one row per record, in order.
func TestCSVExportLarge(t *testing.T) {
	e := newReportEnv(t)
	var records []*store.Record
	for i := 0; i < 5000; i++ {
		rec := *sampleRecords()[i%5]
		rec.SourceIP = fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&255, i&255)
		records = append(records, &rec)
	}
	big := mustReport(t, e.db, e.a2, time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC), "big.example", records)
	r := e.do("GET", "/api/v1/reports/"+big.ID+"/export/csv", e.keyA, nil)
	if r.status != http.StatusOK || len(r.body) < 4*streamChunk {
		t.Fatalf("%d, %d bytes", r.status, len(r.body))
	}
	rows, err := csv.NewReader(bytes.NewReader(r.body)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(records)+1 {
		t.Fatalf("%d rows for %d records", len(rows), len(records))
	}
	for i, rec := range records {
		if rows[i+1][0] != rec.SourceIP || rows[i+1][1] != strconv.FormatInt(rec.Count, 10) {
			t.Fatalf("row %d = %q, want record %s", i+1, rows[i+1][:2], rec.SourceIP)
		}
	}
}

// domainStatsBody is the body of GET /domains/{id}/statistics.
type domainStatsBody struct {
	DomainID string `json:"domain_id"`
	DateFrom string `json:"date_from"`
	DateTo   string `json:"date_to"`
	store.Summary
	ReportCount int                 `json:"report_count"`
	ByDay       []store.DayStats    `json:"by_day"`
	TopSources  []store.SourceStats `json:"top_sources"`
}

// TestDomainStatistics ensures a domain's statistics cover exactly the
// reports whose date_begin falls in the range of UTC days, day by day and
// in sum, with the default range of the last 30 days.
func TestDomainStatistics(t *testing.T) {
	e := newReportEnv(t) // the clock stands at 2026-11-22 09:30 UTC
	at := func(m time.Month, d, h int) string {
		return strconv.FormatInt(time.Date(2026, m, d, h, 0, 0, 0, time.UTC).Unix(), 10)
	}
	concat := func(fs ...reportFixture) (recs []*store.Record) {
		for _, f := range fs {
			recs = append(recs, f.records...)
		}
		return recs
	}
	for _, c := range []struct {
		name          string
		domain        *store.Domain
		query         string
		first, last   string
		days          int
		reports       []reportFixture
		reportsOnDays map[string]int
	}{
		{"default: the last 30 days", e.a1, "", "2026-10-24", "2026-11-22", 30, []reportFixture{e.r1, e.r2},
			map[string]int{"2026-11-01": 1, "2026-11-05": 1}},
		{"other domain", e.a2, "", "2026-10-24", "2026-11-22", 30, []reportFixture{e.r3}, map[string]int{"2026-11-03": 1}},
		{"both bounds", e.a1, "date_from=" + at(11, 2, 0) + "&date_to=" + at(11, 5, 12), "2026-11-02", "2026-11-05", 4,
			[]reportFixture{e.r2}, map[string]int{"2026-11-05": 1}},
		{"bounds truncated to days", e.a1, "date_from=" + at(11, 1, 23) + "&date_to=" + at(11, 1, 23), "2026-11-01", "2026-11-01", 1,
			[]reportFixture{e.r1}, map[string]int{"2026-11-01": 1}},
		{"date_from alone ends now", e.a1, "date_from=" + at(11, 3, 0), "2026-11-03", "2026-11-22", 20,
			[]reportFixture{e.r2}, map[string]int{"2026-11-05": 1}},
		{"date_to alone spans 30 days", e.a1, "date_to=" + at(11, 4, 0), "2026-10-06", "2026-11-04", 30,
			[]reportFixture{e.r1}, map[string]int{"2026-11-01": 1}},
		{"366 days", e.a1, "date_from=" + strconv.FormatInt(time.Date(2025, 11, 22, 0, 0, 0, 0, time.UTC).Unix(), 10),
			"2025-11-22", "2026-11-22", 366, []reportFixture{e.r1, e.r2}, map[string]int{"2026-11-01": 1, "2026-11-05": 1}},
		{"no reports", e.a1, "date_from=" + at(6, 1, 0) + "&date_to=" + at(6, 7, 0), "2026-06-01", "2026-06-07", 7, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.do("GET", "/api/v1/domains/"+c.domain.ID+"/statistics?"+c.query, e.readA, nil)
			if r.status != http.StatusOK {
				t.Fatalf("%d %s", r.status, r.body)
			}
			var got domainStatsBody
			if err := json.Unmarshal(r.body, &got); err != nil {
				t.Fatal(err)
			}
			if got.DomainID != c.domain.ID || got.DateFrom != c.first+"T00:00:00Z" || !strings.HasPrefix(got.DateTo, c.last) {
				t.Errorf("domain %s from %s to %s, want %s %s %s", got.DomainID, got.DateFrom, got.DateTo, c.domain.ID, c.first, c.last)
			}
			if len(got.ByDay) != c.days || got.ByDay[0].Date != c.first || got.ByDay[len(got.ByDay)-1].Date != c.last {
				t.Fatalf("by_day has %d days from %s to %s, want %d from %s to %s", len(got.ByDay),
					got.ByDay[0].Date, got.ByDay[len(got.ByDay)-1].Date, c.days, c.first, c.last)
			}
			recs := concat(c.reports...)
			checkSummary(t, got.Summary, recs)
			if got.ReportCount != len(c.reports) {
				t.Errorf("report_count %d, want %d", got.ReportCount, len(c.reports))
			}
			var dayMessages, dayPass int64
			for _, d := range got.ByDay {
				dayMessages += d.Messages
				dayPass += d.DMARCPass
				if d.Reports != c.reportsOnDays[d.Date] || d.DMARCPass+d.DMARCFail != d.Messages {
					t.Errorf("day %+v, want %d reports", d, c.reportsOnDays[d.Date])
				}
			}
			if dayMessages != got.MessageCount || dayPass != got.DMARC.Pass {
				t.Errorf("by_day sums to %d messages (%d pass), summary says %d (%d)", dayMessages, dayPass, got.MessageCount, got.DMARC.Pass)
			}
			bySource := map[string]int64{}
			for _, rec := range recs {
				bySource[rec.SourceIP] += rec.Count
			}
			for i, s := range got.TopSources {
				if s.Messages != bySource[s.SourceIP] || i > 0 && s.Messages > got.TopSources[i-1].Messages {
					t.Errorf("top_sources[%d] = %+v, want %d messages, most first", i, s, bySource[s.SourceIP])
				}
			}
			if got.TopSources == nil || len(got.TopSources) > 20 {
				t.Errorf("top_sources = %v", got.TopSources)
			}
		})
	}
}

// TestDomainStatisticsBadInput ensures a bad range is a 400 naming the
// parameter, and a domain that is not the caller's a 404.
func TestDomainStatisticsBadInput(t *testing.T) {
	e := newReportEnv(t)
	day := func(y int, m time.Month, d int) string {
		return strconv.FormatInt(time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix(), 10)
	}
	for _, c := range []struct {
		name, id, query string
		status          int
		field           string
	}{
		{"date_from not a number", e.a1.ID, "date_from=x", 400, "date_from"},
		{"date_from negative", e.a1.ID, "date_from=-5", 400, "date_from"},
		{"date_from an impossible date", e.a1.ID, "date_from=2026-02-30", 400, "date_from"},
		{"date_to not a number", e.a1.ID, "date_to=1e9", 400, "date_to"},
		{"date_to before date_from", e.a1.ID, "date_from=" + day(2026, 11, 5) + "&date_to=" + day(2026, 11, 4), 400, "date_to"},
		{"date_from in the future", e.a1.ID, "date_from=" + day(2026, 12, 1), 400, "date_from"},
		{"367 days", e.a1.ID, "date_from=" + day(2025, 11, 21), 400, "date_from"},
		{"ten years", e.a1.ID, "date_from=" + day(2016, 1, 1) + "&date_to=" + day(2026, 1, 1), 400, "date_from"},
		{"another organization's domain", e.b1.ID, "", 404, ""},
		{"unknown domain", "00000000-0000-7000-8000-000000000000", "", 404, ""},
		{"malformed id", "not-a-uuid", "", 404, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.do("GET", "/api/v1/domains/"+c.id+"/statistics?"+c.query, e.keyA, nil)
			code := map[int]string{400: "bad_request", 404: "not_found"}[c.status]
			if r.status != c.status || r.errorCode(t) != code {
				t.Fatalf("%d %s, want %d %s", r.status, r.body, c.status, code)
			}
			if c.field != "" && !strings.Contains(string(r.body), `"field":"`+c.field+`"`) {
				t.Errorf("details do not name %s: %s", c.field, r.body)
			}
			if c.status == 404 && !strings.Contains(string(r.body), "domain not found") {
				t.Errorf("message: %s", r.body)
			}
		})
	}
}
