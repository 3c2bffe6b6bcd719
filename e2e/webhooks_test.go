package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/ingest/ingesttest"
	"github.com/dmarcd/dmarcd/internal/dnstest"
	"github.com/dmarcd/dmarcd/internal/reportgen"
)

// hookReceiver is a real HTTPS receiver for the built binary's deliveries.
// It checks each one by SPEC.md's five rules with code of its own and
// answers with the next of its statuses (the last one repeats).
type hookReceiver struct {
	srv    *httptest.Server
	caFile string // its certificate as PEM, for --webhook-ca-file
	mu     sync.Mutex
	secret string
	// failing makes it answer 503 to every delivery, else 200.
	failing bool
	got     []hookDelivery
}

type hookDelivery struct {
	at     time.Time
	header http.Header
	event  map[string]any
	err    error
}

func newHookReceiver(t *testing.T) *hookReceiver {
	t.Helper()
	rc := &hookReceiver{}
	rc.srv = httptest.NewUnstartedServer(http.HandlerFunc(rc.serve))
	rc.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	rc.srv.StartTLS()
	t.Cleanup(rc.srv.Close)
	rc.caFile = filepath.Join(t.TempDir(), "receiver-ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rc.srv.Certificate().Raw})
	if err := os.WriteFile(rc.caFile, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	return rc
}

func (rc *hookReceiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	d := hookDelivery{at: time.Now(), header: r.Header.Clone()}
	d.event, d.err = rc.check(r.Header, body)
	rc.got = append(rc.got, d)
	if d.err != nil {
		http.Error(w, d.err.Error(), http.StatusUnauthorized)
		return
	}
	if rc.failing {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// check applies the receiver rules in order: the headers are there (2),
// the timestamp is fresh (1), the HMAC over the raw body (3) matches in
// constant time (4), and only then is the body parsed (5).
func (rc *hookReceiver) check(h http.Header, body []byte) (map[string]any, error) {
	ts, sig := h.Get("X-Webhook-Timestamp"), h.Get("X-Webhook-Signature")
	if ts == "" || !strings.HasPrefix(sig, "sha256=") {
		return nil, errors.New("timestamp or sha256= signature missing")
	}
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || max(n-time.Now().Unix(), time.Now().Unix()-n) > 300 {
		return nil, fmt.Errorf("timestamp %s not within 300 s", ts)
	}
	mac := hmac.New(sha256.New, []byte(rc.secret))
	fmt.Fprintf(mac, "%s.", ts)
	mac.Write(body)
	got, err := hex.DecodeString(strings.TrimPrefix(sig, "sha256="))
	if err != nil || !hmac.Equal(got, mac.Sum(nil)) {
		return nil, errors.New("signature mismatch")
	}
	if h.Get("User-Agent") != "dmarcd-Webhooks/1.0" || h.Get("Content-Type") != "application/json" ||
		strings.Contains(string(body), rc.secret) {
		return nil, fmt.Errorf("headers %v", h)
	}
	var ev map[string]any
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, err
	}
	if ev["id"] != h.Get("X-Webhook-Id") || ev["type"] != "alert.created" {
		return nil, fmt.Errorf("body %s", body)
	}
	return ev, nil
}

// deliveries returns what arrived so far, failing the test for any
// delivery that broke a rule.
func (rc *hookReceiver) deliveries(t *testing.T) []hookDelivery {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, d := range rc.got {
		if d.err != nil {
			t.Errorf("a delivery broke a receiver rule: %v", d.err)
		}
	}
	return append([]hookDelivery(nil), rc.got...)
}

// awaitHook polls cond every 50 ms for up to 30 s.
func awaitHook(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// hookArgs are the serve flags that let the binary deliver to rc.
func hookArgs(rc *hookReceiver) []string {
	return []string{"--webhook-allow-private", "--webhook-ca-file", rc.caFile, "--webhook-retry-delays", "1s,2s",
		"--dns-check-interval", "1h", "--verify-interval", "1h"}
}

// failingReport is an aggregate report for domain whose 60 messages all
// fail DMARC, dated today, as a gzip attachment of a mail to addr.
func failingReport(domain, addr string) []byte {
	end := time.Now().UTC().Truncate(time.Second)
	xml := fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>
<feedback>
  <report_metadata><org_name>receiver.example</org_name><email>dmarc@receiver.example</email>
    <report_id>hook-%d</report_id><date_range><begin>%d</begin><end>%d</end></date_range></report_metadata>
  <policy_published><domain>%s</domain><adkim>r</adkim><aspf>r</aspf><p>none</p><sp>none</sp><pct>100</pct></policy_published>
  <record>
    <row><source_ip>203.0.113.9</source_ip><count>60</count>
      <policy_evaluated><disposition>none</disposition><dkim>fail</dkim><spf>fail</spf></policy_evaluated></row>
    <identifiers><header_from>%s</header_from></identifiers>
    <auth_results><spf><domain>%s</domain><result>fail</result></spf></auth_results>
  </record>
</feedback>
`, end.UnixNano(), end.Add(-24*time.Hour).Unix(), end.Unix(), domain, domain, domain)
	return ingesttest.MailWith("dmarc@receiver.example", addr, reportgen.Gzip([]byte(xml)), "application/gzip", "report.xml.gz")
}

// setUpHook creates a webhook to rc through the API and an alert-raising
// report by SMTP; it returns the webhook's id.
func setUpHook(t *testing.T, s *Server, rc *hookReceiver, domain string) string {
	t.Helper()
	created := s.Must(http.StatusCreated, "POST", "/api/v1/webhooks", s.Key,
		map[string]string{"url": rc.srv.URL + "/dmarc", "name": "e2e receiver"})
	rc.mu.Lock()
	rc.secret = created["secret"].(string)
	rc.mu.Unlock()
	_, email := s.CreateDomain(domain)
	if err := sendMail(s.SMTPAddr(), "dmarc@receiver.example", []string{email}, failingReport(domain, email)); err != nil {
		t.Fatalf("sending the report: %v", err)
	}
	return created["id"].(string)
}

// TestWebhookDeliveryEndToEnd ensures an alert raised by a failing report
// received over SMTP reaches a real HTTPS receiver, trusted through
// --webhook-ca-file, signed as SPEC.md says, and turns sent; and that the
// secret appears nowhere in the server's output.
func TestWebhookDeliveryEndToEnd(t *testing.T) {
	rc := newHookReceiver(t)
	s := StartServer(t, Options{DNS: dnstest.Start(t), Args: hookArgs(rc)})
	hookID := setUpHook(t, s, rc, "hooked.example")

	awaitHook(t, "the delivery", func() bool { return len(rc.deliveries(t)) > 0 })
	got := rc.deliveries(t)[0]
	alerts := s.Must(http.StatusOK, "GET", "/api/v1/alerts", s.Key, nil)["data"].([]any)
	if len(alerts) != 1 {
		t.Fatalf("%d alerts, want 1", len(alerts))
	}
	alert := alerts[0].(map[string]any)
	delivered, _ := got.event["data"].(map[string]any)["alert"].(map[string]any)
	if delivered["id"] != alert["id"] || delivered["type"] != "dmarc_failure_rate" || delivered["severity"] != "critical" ||
		got.event["test"] != false || !strings.HasPrefix(got.header.Get("X-Webhook-Id"), "evt_") {
		t.Errorf("delivered event %v for alert %v", got.event, alert)
	}
	awaitHook(t, "the alert to turn sent", func() bool {
		a := s.Must(http.StatusOK, "GET", "/api/v1/alerts", s.Key, nil)["data"].([]any)[0].(map[string]any)
		return a["status"] == "sent" && a["sent_at"] != nil
	})
	hook := s.Must(http.StatusOK, "GET", "/api/v1/webhooks/"+hookID, s.Key, nil)
	if hook["last_status_code"] != float64(200) || hook["last_delivery_at"] == nil || hook["consecutive_failures"] != float64(0) {
		t.Errorf("webhook after delivery: %v", hook)
	}
	test := s.Must(http.StatusOK, "POST", "/api/v1/webhooks/"+hookID+"/test", s.Key, nil)
	if test["success"] != true || test["status_code"] != float64(200) {
		t.Errorf("test delivery: %v", test)
	}
	metrics := s.Do("GET", "/metrics", "", nil)
	if !strings.Contains(string(metrics.Body), `dmarcd_webhook_deliveries_total{outcome="success"} 1`) ||
		!strings.Contains(string(metrics.Body), "dmarcd_webhook_outbox_depth 0") {
		t.Errorf("metrics lack the delivery:\n%s", grepHookLines(string(metrics.Body), "webhook"))
	}
	if len(rc.deliveries(t)) != 2 {
		t.Errorf("%d deliveries, want the alert and the test", len(rc.deliveries(t)))
	}
	s.Stop()
	if strings.Contains(s.Stderr()+s.Stdout(), rc.secret[len("whsec_"):]) {
		t.Error("the webhook secret appears in the server's output")
	}
}

// TestWebhookRetryAcrossRestart ensures a delivery that failed is retried
// after the server restarts, with the same X-Webhook-Id and a fresh
// signature, and then succeeds. The receiver fails every attempt until
// the restart, so that a slow stop cannot make the test pass or fail by
// chance.
func TestWebhookRetryAcrossRestart(t *testing.T) {
	rc := newHookReceiver(t)
	rc.failing = true
	ns := dnstest.Start(t)
	s := StartServer(t, Options{DNS: ns, Args: hookArgs(rc)})
	key := s.Key
	hookID := setUpHook(t, s, rc, "restarted.example")

	awaitHook(t, "a failure to be recorded", func() bool {
		h := s.Must(http.StatusOK, "GET", "/api/v1/webhooks/"+hookID, key, nil)
		return h["consecutive_failures"] != float64(0)
	})
	s.Stop()
	before := len(rc.deliveries(t))
	if before == 0 || before > 2 {
		t.Fatalf("%d attempts before the restart, want 1 or 2 of the 3", before)
	}
	rc.mu.Lock()
	rc.failing = false
	rc.mu.Unlock()
	time.Sleep(1500 * time.Millisecond) // the retry may fall due while the server is down

	restarted := time.Now()
	s2 := StartServer(t, Options{DataDir: s.DataDir, DNS: ns, Args: hookArgs(rc)})
	awaitHook(t, "the retry after the restart", func() bool { return len(rc.deliveries(t)) > before })
	got := rc.deliveries(t)
	first, retry := got[0], got[before]
	if !retry.at.After(restarted) {
		t.Errorf("the retry came before the restart")
	}
	for i, d := range got {
		if d.header.Get("X-Webhook-Id") != first.header.Get("X-Webhook-Id") {
			t.Errorf("attempt %d: X-Webhook-Id %s, at first %s", i+1, d.header.Get("X-Webhook-Id"), first.header.Get("X-Webhook-Id"))
		}
	}
	t1, _ := strconv.ParseInt(first.header.Get("X-Webhook-Timestamp"), 10, 64)
	t2, _ := strconv.ParseInt(retry.header.Get("X-Webhook-Timestamp"), 10, 64)
	if t2 <= t1 || retry.header.Get("X-Webhook-Signature") == first.header.Get("X-Webhook-Signature") {
		t.Errorf("retry not signed afresh: timestamps %d then %d", t1, t2)
	}
	awaitHook(t, "the alert to turn sent", func() bool {
		a := s2.Must(http.StatusOK, "GET", "/api/v1/alerts", key, nil)["data"].([]any)
		return len(a) == 1 && a[0].(map[string]any)["status"] == "sent"
	})
	if h := s2.Must(http.StatusOK, "GET", "/api/v1/webhooks/"+hookID, key, nil); h["consecutive_failures"] != float64(0) {
		t.Errorf("webhook after the successful retry: %v", h)
	}
	time.Sleep(2500 * time.Millisecond) // no further attempt: the retry succeeded
	if n := len(rc.deliveries(t)); n != before+1 {
		t.Errorf("%d attempts in all, want %d", n, before+1)
	}
}

// grepHookLines returns the lines of s that contain sub.
func grepHookLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
