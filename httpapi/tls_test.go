package httpapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/dmarc/tlsrpt"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// mustTLS stores a TLS report of d beginning on November day and returns
// its id.
func mustTLS(tb testing.TB, db *store.DB, d *store.Domain, reportID string, day int) string {
	tb.Helper()
	begin := time.Date(2026, 11, day, 0, 0, 0, 0, time.UTC)
	r := &tlsrpt.Report{OrganizationName: "Google Inc.", ReportID: reportID, DateBegin: begin, DateEnd: begin.Add(24*time.Hour - time.Second),
		Policies: []tlsrpt.Policy{{Type: tlsrpt.PolicySTS, Domain: d.Name, SuccessfulSessions: 100, FailedSessions: 2,
			Failures: []tlsrpt.FailureDetail{{ResultType: "certificate-expired", ReceivingMXHostname: "mx." + d.Name, SendingMTAIP: "192.0.2.1", FailedSessions: 2}}}}}
	id, _ := storetest.MustTLSReport(tb, db, d, r, begin.Add(25*time.Hour))
	return id
}

type tlsEnv struct {
	*env
	a1, a2, b1 *store.Domain
	t1, t2, tb string
}

func newTLSEnv(t *testing.T) *tlsEnv {
	e := &tlsEnv{env: newEnv(t, 1000)}
	e.a1 = storetest.MustDomain(t, e.db, e.orgA.ID, "alpha.example")
	e.a2 = storetest.MustDomain(t, e.db, e.orgA.ID, "second.example")
	e.b1 = storetest.MustDomain(t, e.db, e.orgB.ID, "alpha.example")
	e.t1 = mustTLS(t, e.db, e.a1, "r1", 20)
	e.t2 = mustTLS(t, e.db, e.a2, "r2", 21)
	e.tb = mustTLS(t, e.db, e.b1, "r1", 20)
	return e
}

type tlsListResp struct {
	Data       []store.TLSReport `json:"data"`
	Pagination struct {
		Page, Limit, Total int
		NextCursor         *string `json:"next_cursor"`
	} `json:"pagination"`
}

func decodeTLSList(t *testing.T, r resp) tlsListResp {
	t.Helper()
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var l tlsListResp
	if err := json.Unmarshal(r.body, &l); err != nil {
		t.Fatal(err)
	}
	return l
}

// TestTLSReportsList ensures the list is the organization's only, newest
// date_begin first, filters by domain and dates, and follows cursors.
func TestTLSReportsList(t *testing.T) {
	e := newTLSEnv(t)
	l := decodeTLSList(t, e.do("GET", "/api/v1/tls-reports", e.readA, nil))
	if l.Pagination.Total != 2 || l.Data[0].ID != e.t2 || l.Data[1].ID != e.t1 || l.Pagination.NextCursor != nil {
		t.Fatalf("list %+v", l)
	}
	if l.Data[0].SuccessfulSessions != 100 || l.Data[0].OrganizationName != "Google Inc." || l.Data[0].ContactInfo != nil {
		t.Errorf("report %+v", l.Data[0])
	}
	l = decodeTLSList(t, e.do("GET", "/api/v1/tls-reports?domain_id="+e.a1.ID, e.keyA, nil))
	if l.Pagination.Total != 1 || l.Data[0].ID != e.t1 {
		t.Errorf("domain filter %+v", l)
	}
	from := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC).Unix()
	l = decodeTLSList(t, e.do("GET", "/api/v1/tls-reports?date_from="+strconv.FormatInt(from, 10), e.keyA, nil))
	if l.Pagination.Total != 1 || l.Data[0].ID != e.t2 {
		t.Errorf("date filter %+v", l)
	}
	l = decodeTLSList(t, e.do("GET", "/api/v1/tls-reports?limit=1", e.keyA, nil))
	if len(l.Data) != 1 || l.Pagination.NextCursor == nil {
		t.Fatalf("first page %+v", l)
	}
	l = decodeTLSList(t, e.do("GET", "/api/v1/tls-reports?limit=1&cursor="+url.QueryEscape(*l.Pagination.NextCursor), e.keyA, nil))
	if len(l.Data) != 1 || l.Data[0].ID != e.t1 || l.Pagination.NextCursor != nil {
		t.Fatalf("cursor page %+v", l)
	}
	l = decodeTLSList(t, e.do("GET", "/api/v1/tls-reports", e.keyB, nil))
	if l.Pagination.Total != 1 || l.Data[0].ID != e.tb {
		t.Errorf("org B sees %+v", l)
	}
}

// TestTLSReportsBadInput ensures bad parameters are 400 and another
// organization's ids 404.
func TestTLSReportsBadInput(t *testing.T) {
	e := newTLSEnv(t)
	cases := []struct {
		path   string
		status int
		code   string
	}{
		{"/api/v1/tls-reports?domain_id=nope", 400, "bad_request"},
		{"/api/v1/tls-reports?domain_id=" + e.b1.ID, 404, "not_found"},
		{"/api/v1/tls-reports?date_from=soon", 400, "bad_request"},
		{"/api/v1/tls-reports?date_from=200&date_to=100", 400, "bad_request"},
		{"/api/v1/tls-reports?cursor=xyz", 400, "bad_request"},
		{"/api/v1/tls-reports?limit=1000", 400, "bad_request"},
		{"/api/v1/tls-reports?page=0", 400, "bad_request"},
		{"/api/v1/tls-reports/" + e.tb, 404, "not_found"},
		{"/api/v1/tls-reports/not-an-id", 404, "not_found"},
		{"/api/v1/domains/" + e.b1.ID + "/tls-statistics", 404, "not_found"},
		{"/api/v1/domains/" + e.a1.ID + "/tls-statistics?date_from=x", 400, "bad_request"},
		{"/api/v1/domains/" + e.a1.ID + "/tls-statistics?date_from=0&date_to=100000000", 400, "bad_request"},
	}
	for _, c := range cases {
		r := e.do("GET", c.path, e.keyA, nil)
		if r.status != c.status || r.errorCode(t) != c.code {
			t.Errorf("GET %s: %d %s", c.path, r.status, r.body)
		}
	}
	if r := e.do("GET", "/api/v1/tls-reports", "", nil); r.status != http.StatusUnauthorized {
		t.Errorf("no key: %d", r.status)
	}
}

// TestTLSReportGet ensures the single report carries its policies and
// failure details with nulls for what the report left out.
func TestTLSReportGet(t *testing.T) {
	e := newTLSEnv(t)
	r := e.do("GET", "/api/v1/tls-reports/"+e.t1, e.readA, nil)
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	m := r.json(t)
	pols := m["policies"].([]any)
	p := pols[0].(map[string]any)
	fd := p["failure_details"].([]any)[0].(map[string]any)
	if m["id"] != e.t1 || p["policy_type"] != "sts" || fd["result_type"] != "certificate-expired" || fd["receiving_mx_helo"] != nil ||
		fd["failed_sessions"] != 2.0 || p["mx_host"] == nil {
		t.Errorf("body %s", r.body)
	}
	if _, ok := fd["receiving_mx_helo"]; !ok {
		t.Error("receiving_mx_helo absent instead of null")
	}
}

// TestTLSStatisticsEndpoint ensures the default window is the last 30 days
// up to now, and the roll-ups show.
func TestTLSStatisticsEndpoint(t *testing.T) {
	e := newTLSEnv(t)
	r := e.do("GET", "/api/v1/domains/"+e.a1.ID+"/tls-statistics", e.readA, nil)
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	var st store.TLSStatistics
	if err := json.Unmarshal(r.body, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.ByDay) != 30 || st.ByDay[29].Date != "2026-11-22" || st.SuccessfulSessions != 100 || st.FailedSessions != 2 ||
		len(st.TopReceivingMX) != 1 || st.TopReceivingMX[0].ReceivingMXHostname != "mx.alpha.example" || len(st.ByResultType) != 1 {
		t.Errorf("stats %s", r.body)
	}
}

// TestCheckTLSEndpoint ensures check-tls answers any domain from the DNS,
// for read keys too, and validates its body.
func TestCheckTLSEndpoint(t *testing.T) {
	e := newTLSEnv(t)
	e.dns.AddTXT("_smtp._tls.checked.example", "v=TLSRPTv1; rua=mailto:tls@checked.example")
	r := e.do("POST", "/api/v1/check-tls", e.readA, map[string]string{"domain": "Checked.Example."})
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	m := r.json(t)
	rpt := m["tlsrpt"].(map[string]any)
	sts := m["mta_sts"].(map[string]any)
	if m["domain"] != "checked.example" || rpt["found"] != true || sts["found"] != false || sts["policy"] != nil {
		t.Errorf("body %s", r.body)
	}
	for _, body := range []any{map[string]string{}, map[string]string{"domain": "not a domain"}, "{"} {
		r := e.do("POST", "/api/v1/check-tls", e.keyA, body)
		if r.status != 400 && r.status != 422 {
			t.Errorf("body %v: %d %s", body, r.status, r.body)
		}
	}
}

// TestCreateDomainTLSRecord ensures dns_records adds the TLS-RPT record
// with the domain's reporting address.
func TestCreateDomainTLSRecord(t *testing.T) {
	e := newEnv(t, 1000)
	r := e.do("POST", "/api/v1/domains", e.keyA, map[string]string{"name": "new.example"})
	if r.status != 201 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	m := r.json(t)
	recs := m["dns_records"].([]any)
	last := recs[len(recs)-1].(map[string]any)
	if last["name"] != "_smtp._tls.new.example" || last["value"] != "v=TLSRPTv1; rua=mailto:"+m["reporting_email"].(string) {
		t.Errorf("records %v", recs)
	}
}
