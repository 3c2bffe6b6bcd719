package httpapi

import (
	"encoding/json"
	"net/http"
	"testing"
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
