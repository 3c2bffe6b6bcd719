package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/internal/dnstest"
)

// waitFor polls fn every 100 ms until it reports true or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, fn func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !fn() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestDNSChangeRaisesAlert ensures the real binary's DNS change detection
// (--dns-check-interval 1s against a real DNS server) notices a reporting
// address removed from the record: one reporting_address_removed alert
// through GET /api/v1/alerts, the domain inactive, the alert dismissable,
// and the metrics counting it.
func TestDNSChangeRaisesAlert(t *testing.T) {
	ns := dnstest.Start(t)
	s := StartServer(t, Options{DNS: ns, Args: []string{"--dns-check-interval", "1s", "--verify-interval", "1h"}})
	created := s.Must(http.StatusCreated, "POST", "/api/v1/domains", s.Key, map[string]string{"name": "watched.example"})
	id, record := created["id"].(string), created["dmarc_record"].(string)
	ns.SetTXT("_dmarc.watched.example", []string{record})
	s.Must(http.StatusOK, "POST", "/api/v1/domains/"+id+"/verify", s.Key, nil)

	// Re-verification runs hourly here, so the next lookup of the record
	// is change detection's first check, which remembers it.
	after := ns.Queries("_dmarc.watched.example")
	waitFor(t, 10*time.Second, "the first DNS change check", func() bool {
		return ns.Queries("_dmarc.watched.example") > after
	})
	time.Sleep(200 * time.Millisecond) // let that check store what it saw
	if l := s.Must(http.StatusOK, "GET", "/api/v1/alerts", s.Key, nil); len(l["data"].([]any)) != 0 {
		t.Fatalf("alerts before any change: %v", l)
	}

	ns.SetTXT("_dmarc.watched.example", []string{"v=DMARC1; p=none; rua=mailto:someone-else@example.net"})
	var alert map[string]any
	waitFor(t, 15*time.Second, "the alert", func() bool {
		l := s.Must(http.StatusOK, "GET", "/api/v1/alerts", s.Key, nil)
		data := l["data"].([]any)
		if len(data) > 0 {
			alert = data[0].(map[string]any)
		}
		return alert != nil
	})
	if alert["type"] != "reporting_address_removed" || alert["severity"] != "critical" || alert["status"] != "pending" ||
		alert["domain_id"] != id {
		t.Fatalf("alert %v", alert)
	}
	det, _ := alert["details"].(map[string]any)
	if det["old_record"] != record || det["new_record"] != "v=DMARC1; p=none; rua=mailto:someone-else@example.net" {
		t.Errorf("details %v", det)
	}
	if dom := s.Must(http.StatusOK, "GET", "/api/v1/domains/"+id, s.Key, nil); dom["status"] != "inactive" {
		t.Errorf("domain status %v, want inactive", dom["status"])
	}
	// Several more checks of the unchanged record raise nothing more.
	time.Sleep(1500 * time.Millisecond)
	l := s.Must(http.StatusOK, "GET", "/api/v1/alerts?severity=critical&domain_id="+id, s.Key, nil)
	if n := len(l["data"].([]any)); n != 1 {
		t.Errorf("%d critical alerts, want 1", n)
	}
	dismissed := s.Must(http.StatusOK, "PUT", "/api/v1/alerts/"+alert["id"].(string)+"/dismiss", s.Key, nil)
	if dismissed["status"] != "dismissed" || dismissed["dismissed_at"] == nil {
		t.Errorf("dismissed %v", dismissed)
	}

	resp, err := http.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`dmarcd_alerts_raised_total{type="reporting_address_removed",severity="critical"} 1`,
		`dmarcd_scheduler_job_runs_total{job="dns-watch"}`,
		`dmarcd_scheduler_job_duration_seconds_count{job="reverify"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(string(body), `dmarcd_scheduler_job_failures_total{job="dns-watch"}`) {
		t.Errorf("dns-watch failed:\n%s", grepLines(string(body), "dmarcd_scheduler"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return fmt.Sprint(strings.Join(out, "\n"))
}
