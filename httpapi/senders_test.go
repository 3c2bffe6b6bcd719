package httpapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// TestSenderViews ensures the three views answer for the organization's
// domain, 404 for another organization's, 400 for a bad range, and that
// /sources paginates.
func TestSenderViews(t *testing.T) {
	e := newReportEnv(t)
	base := "/api/v1/domains/" + e.a1.ID
	r := e.do("GET", base+"/sources?limit=2", e.readA, nil)
	if r.status != http.StatusOK {
		t.Fatalf("sources: %d %s", r.status, r.body)
	}
	var sources struct {
		Data []struct {
			SourceIP string  `json:"source_ip"`
			Messages int64   `json:"messages"`
			Hostname *string `json:"hostname"`
		} `json:"data"`
		Pagination pagination `json:"pagination"`
	}
	if err := json.Unmarshal(r.body, &sources); err != nil {
		t.Fatal(err)
	}
	// r1 and r2 hold sampleRecords: 5 sources, 81.2.69.142 the largest.
	if sources.Pagination.Total != 5 || len(sources.Data) != 2 || sources.Data[0].SourceIP != "81.2.69.142" ||
		sources.Data[0].Messages != 200 || sources.Data[0].Hostname != nil {
		t.Errorf("sources %s", r.body)
	}
	r = e.do("GET", base+"/senders", e.readA, nil)
	var groups struct {
		Data []map[string]any `json:"data"`
	}
	if r.status != http.StatusOK || json.Unmarshal(r.body, &groups) != nil || len(groups.Data) == 0 {
		t.Fatalf("senders: %d %s", r.status, r.body)
	}
	for _, k := range []string{"name", "type", "category", "source_ips", "messages", "dmarc_pass_rate", "spf_aligned_rate", "dkim_aligned_rate", "status", "hints"} {
		if _, ok := groups.Data[0][k]; !ok {
			t.Errorf("group lacks %s: %s", k, r.body)
		}
	}
	r = e.do("GET", base+"/policy-advice", e.readA, nil)
	var advice map[string]any
	if r.status != http.StatusOK || json.Unmarshal(r.body, &advice) != nil || advice["stage"] == nil {
		t.Fatalf("policy-advice: %d %s", r.status, r.body)
	}
	for _, suffix := range []string{"/sources", "/senders", "/policy-advice"} {
		if r := e.do("GET", "/api/v1/domains/"+e.b1.ID+suffix, e.readA, nil); r.status != http.StatusNotFound {
			t.Errorf("other org's domain %s: %d", suffix, r.status)
		}
		if r := e.do("GET", base+suffix+"?date_from=1800000000&date_to=1700000000", e.readA, nil); r.status != http.StatusBadRequest {
			t.Errorf("reversed range %s: %d", suffix, r.status)
		}
		if r := e.do("GET", base+suffix+"?date_from=abc", e.readA, nil); r.status != http.StatusBadRequest {
			t.Errorf("bad date %s: %d", suffix, r.status)
		}
	}
	if r := e.do("GET", base+"/sources?limit=0", e.readA, nil); r.status != http.StatusBadRequest {
		t.Errorf("limit=0: %d", r.status)
	}
}

// schemaRequired returns the required fields of a schema of openapi.json.
func schemaRequired(t *testing.T, name string) []string {
	t.Helper()
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Required []string `json:"required"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openAPIDocument, &doc); err != nil {
		t.Fatal(err)
	}
	req := doc.Components.Schemas[name].Required
	if len(req) == 0 {
		t.Fatalf("openapi.json has no required fields for %s", name)
	}
	slices.Sort(req)
	return req
}

// TestSenderViewsEvidence ensures /sources rows carry their group and the
// DKIM and SPF domains of their reports, ?group=NAME lists one group's
// rows, /senders groups say how they were identified, the fields are the
// ones openapi.json requires, and policy-advice reads the record as DNS
// publishes it (a pending domain is looked up: no _dmarc record is
// no_record with published null, a DNS failure 503).
func TestSenderViewsEvidence(t *testing.T) {
	e := newReportEnv(t)
	base := "/api/v1/domains/" + e.a1.ID
	r := e.do("GET", base+"/sources", e.readA, nil)
	var sources struct {
		Data []map[string]any `json:"data"`
	}
	if r.status != http.StatusOK || json.Unmarshal(r.body, &sources) != nil || len(sources.Data) != 5 {
		t.Fatalf("sources: %d %s", r.status, r.body)
	}
	want := schemaRequired(t, "Source")
	var top map[string]any
	for _, row := range sources.Data {
		if got := keysOf(row); !slices.Equal(got, want) {
			t.Errorf("source fields %v, openapi.json requires %v", got, want)
		}
		if row["source_ip"] == "81.2.69.142" {
			top = row
		}
	}
	own := "alpha.example via AS20712 Andrews & Arnold Ltd"
	if top == nil || top["group"] != own {
		t.Fatalf("81.2.69.142: %v, want group %q", top, own)
	}
	var dkim []DomainCountJSON
	b, _ := json.Marshal(top["dkim_domains"])
	if json.Unmarshal(b, &dkim) != nil || len(dkim) != 2 || dkim[0] != (DomainCountJSON{"alpha.example", 200, 200}) || dkim[1] != (DomainCountJSON{"esp.example", 200, 200}) {
		t.Errorf("dkim_domains %s", b)
	}
	r = e.do("GET", base+"/sources?group="+url.QueryEscape(own), e.readA, nil)
	if r.status != http.StatusOK || json.Unmarshal(r.body, &sources) != nil || len(sources.Data) != 1 || sources.Data[0]["source_ip"] != "81.2.69.142" {
		t.Errorf("?group=%s: %d %s", own, r.status, r.body)
	}
	if r := e.do("GET", base+"/sources?group="+strings.Repeat("x", 301), e.readA, nil); r.status != http.StatusBadRequest {
		t.Errorf("a group name of 301 bytes: %d", r.status)
	}

	r = e.do("GET", base+"/senders", e.readA, nil)
	var groups struct {
		Data []map[string]any `json:"data"`
	}
	if r.status != http.StatusOK || json.Unmarshal(r.body, &groups) != nil {
		t.Fatalf("senders: %d %s", r.status, r.body)
	}
	want = schemaRequired(t, "SenderGroup")
	names := map[string]map[string]any{}
	for _, g := range groups.Data {
		names[g["name"].(string)] = g
		if got := keysOf(g); !slices.Equal(got, want) {
			t.Errorf("group fields %v, openapi.json requires %v", got, want)
		}
	}
	if g := names[own]; g == nil || g["evidence"] != "own_domain" || g["type"] != "own" || g["source_ips"] != 1.0 {
		t.Errorf("group %s: %v", own, g)
	}
	if g := names["Unidentified"]; g == nil || g["evidence"] != "none" || g["category"] != "unknown" {
		t.Errorf("Unidentified: %v", g)
	}

	// alpha.example is pending: no DNS check yet, so the advice looks it up.
	var advice map[string]any
	r = e.do("GET", base+"/policy-advice", e.readA, nil)
	if r.status != http.StatusOK || json.Unmarshal(r.body, &advice) != nil || advice["stage"] != "no_record" || advice["published"] != nil {
		t.Errorf("no _dmarc record: %d %s", r.status, r.body)
	}
	e.dns.SetTXT("_dmarc.alpha.example", []string{"v=DMARC1; p=none; rua=mailto:x@alpha.example"})
	r = e.do("GET", base+"/policy-advice", e.readA, nil)
	if r.status != http.StatusOK || json.Unmarshal(r.body, &advice) != nil || advice["stage"] != "not_enough_data" ||
		advice["published"].(map[string]any)["p"] != "none" {
		t.Errorf("p=none published: %d %s", r.status, r.body)
	}
	e.dns.SetRcode("_dmarc.alpha.example", dns.RcodeServerFailure)
	if r := e.do("GET", base+"/policy-advice", e.readA, nil); r.status != http.StatusServiceUnavailable || r.errorCode(t) != "dns_unavailable" {
		t.Errorf("SERVFAIL: %d %s", r.status, r.body)
	}
}

// DomainCountJSON is a dkim_domains or spf_domains entry.
type DomainCountJSON struct {
	Domain   string `json:"domain"`
	Messages int64  `json:"messages"`
	Pass     int64  `json:"pass"`
}
