package webhook_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/internal/dnstest"
	"github.com/dmarcd/dmarcd/internal/egress"
	"github.com/dmarcd/dmarcd/webhook"
)

func mustResolver(tb testing.TB, srv *dnstest.Server) *dnscheck.Resolver {
	tb.Helper()
	r, err := dnscheck.NewResolver(dnscheck.Config{Servers: []string{srv.Addr}, Timeout: time.Second, Attempts: 1})
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// delivery is what the test receiver saw of one request and what it made
// of it.
type delivery struct {
	header http.Header
	body   []byte
	err    error // nil when the delivery passed every check
}

// receiver is an HTTPS endpoint that checks every delivery with its own
// implementation of SPEC.md's five receiver rules and of API.md's envelope,
// deliberately independent of package verify. It answers 401 to a delivery
// that fails a check, else status.
type receiver struct {
	srv    *httptest.Server
	secret string
	status atomic.Int32
	conns  atomic.Int32
	mu     sync.Mutex
	got    []delivery
	// handle, when set, answers instead of the checks (redirects, stalls).
	handle http.HandlerFunc
}

func newReceiver(t testing.TB, secret string) *receiver {
	t.Helper()
	rc := &receiver{secret: secret}
	rc.status.Store(http.StatusOK)
	rc.srv = httptest.NewUnstartedServer(rc)
	rc.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			rc.conns.Add(1)
		}
	}
	rc.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are expected
	rc.srv.StartTLS()
	t.Cleanup(rc.srv.Close)
	return rc
}

// pool trusts the receiver's certificate, as --webhook-ca-file would.
func (rc *receiver) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(rc.srv.Certificate())
	return p
}

func (rc *receiver) port() string {
	u, _ := url.Parse(rc.srv.URL)
	return u.Port()
}

func (rc *receiver) deliveries() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]delivery(nil), rc.got...)
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rc.handle != nil {
		rc.handle(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = rc.check(r, body)
	}
	rc.mu.Lock()
	rc.got = append(rc.got, delivery{header: r.Header.Clone(), body: body, err: err})
	rc.mu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	w.WriteHeader(int(rc.status.Load()))
	fmt.Fprint(w, strings.Repeat("x", 100<<10)) // more than the client reads
}

// check applies the five rules in order, then checks the envelope.
func (rc *receiver) check(r *http.Request, body []byte) error {
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" ||
		r.Header.Get("User-Agent") != "dmarcd-Webhooks/1.0" {
		return fmt.Errorf("method %s, Content-Type %q, User-Agent %q", r.Method, r.Header.Get("Content-Type"), r.Header.Get("User-Agent"))
	}
	tsText := r.Header.Get("X-Webhook-Timestamp")
	ts, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil { // rule 2
		return fmt.Errorf("timestamp %q", tsText)
	}
	if d := time.Now().Unix() - ts; d > 300 || d < -300 { // rule 1
		return fmt.Errorf("timestamp %d is %d s off", ts, d)
	}
	sig, ok := strings.CutPrefix(r.Header.Get("X-Webhook-Signature"), "sha256=")
	if !ok { // rule 2
		return errors.New("signature without sha256=")
	}
	mac := hmac.New(sha256.New, []byte(rc.secret)) // rule 3: raw bytes
	mac.Write([]byte(tsText + "." + string(body)))
	want := hex.EncodeToString(mac.Sum(nil))
	if subtle.ConstantTimeCompare([]byte(sig), []byte(want)) != 1 { // rule 4
		return errors.New("signature mismatch")
	}
	for name, values := range r.Header { // the secret is never sent
		for _, v := range values {
			if strings.Contains(v, rc.secret) || strings.Contains(v, strings.TrimPrefix(rc.secret, "whsec_")) {
				return fmt.Errorf("secret in header %s", name)
			}
		}
	}
	if strings.Contains(string(body), strings.TrimPrefix(rc.secret, "whsec_")) {
		return errors.New("secret in body")
	}
	var ev map[string]json.RawMessage // rule 5: parse last
	if err := json.Unmarshal(body, &ev); err != nil {
		return err
	}
	return checkEnvelope(ev, r.Header.Get("X-Webhook-Id"))
}

func checkEnvelope(ev map[string]json.RawMessage, id string) error {
	var e struct {
		ID, Type, CreatedAt, OrganizationID string
		Test                                *bool
		Data                                struct {
			Alert map[string]any `json:"alert"`
		}
	}
	raw, _ := json.Marshal(ev)
	if err := json.Unmarshal(raw, &e); err != nil {
		return err
	}
	e.CreatedAt, e.OrganizationID = string(ev["created_at"]), string(ev["organization_id"])
	switch {
	case len(ev) != 6:
		return fmt.Errorf("envelope has %d fields", len(ev))
	case !eventRE.MatchString(e.ID) || e.ID != id:
		return fmt.Errorf("id %q, X-Webhook-Id %q", e.ID, id)
	case e.Type != "alert.created" || e.Test == nil || e.Data.Alert == nil:
		return fmt.Errorf("type %q, test %v, alert %v", e.Type, e.Test, e.Data.Alert)
	}
	var at string
	if err := json.Unmarshal(ev["created_at"], &at); err != nil {
		return err
	}
	if p, err := time.Parse(time.RFC3339, at); err != nil || p.Format(time.RFC3339) != at || !strings.HasSuffix(at, "Z") {
		return fmt.Errorf("created_at %q", at)
	}
	return nil
}

// testEventID is an event id as store.NewEventID makes them.
const testEventID = "evt_019ab5c2-4f1e-7a3b-9c2d-5e6f7a8b9c0d"

func testEvent(t testing.TB) *webhook.Event {
	t.Helper()
	ev, err := webhook.NewAlertEvent(testEventID, "6f1c1c1e-0d3a-4a53-9b4a-2f6f5b1d9a10",
		map[string]any{"id": "a1", "type": "dmarc_failure_rate", "severity": "warning", "details": map[string]any{"failed": 12}},
		time.Now(), false)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// privateClient reaches the loopback receiver, as with --webhook-allow-private.
func privateClient(t testing.TB, rc *receiver, dns *dnstest.Server) *webhook.Client {
	t.Helper()
	return webhook.NewClient(mustResolver(t, dns), egress.Policy{AllowPrivate: true, RootCAs: rc.pool()})
}

func errText(r webhook.Result) string {
	if r.Error == nil {
		return ""
	}
	return *r.Error
}

func status(r webhook.Result) int {
	if r.StatusCode == nil {
		return 0
	}
	return *r.StatusCode
}

// TestDeliverIsVerifiedByReceiver ensures a delivery passes a receiver's
// own checks of signature, timestamp, headers and body, and that the body
// returned is the one that went out.
func TestDeliverIsVerifiedByReceiver(t *testing.T) {
	secret := webhook.NewSecret()
	rc := newReceiver(t, secret)
	c := privateClient(t, rc, dnstest.Start(t))
	ev := testEvent(t)
	res, body, err := c.Deliver(context.Background(), rc.srv.URL+"/dmarc", secret, ev, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Success || status(res) != 200 || res.Error != nil || res.ResponseTimeMS < 0 {
		t.Fatalf("Result = %+v (%s)", res, errText(res))
	}
	got := rc.deliveries()
	if len(got) != 1 || got[0].err != nil || string(got[0].body) != string(body) || got[0].header.Get("X-Webhook-Id") != ev.ID {
		t.Fatalf("receiver saw %+v", got)
	}
}

// TestReceiverRejectsForgeries ensures the test receiver is not a rubber
// stamp: a wrong secret or a stale timestamp is answered 401, which the
// client reports as a failure.
func TestReceiverRejectsForgeries(t *testing.T) {
	rc := newReceiver(t, webhook.NewSecret())
	c := privateClient(t, rc, dnstest.Start(t))
	for name, attempt := range map[string]struct {
		secret string
		now    time.Time
	}{
		"wrong secret": {webhook.NewSecret(), time.Now()},
		"stale":        {rc.secret, time.Now().Add(-10 * time.Minute)},
		"future":       {rc.secret, time.Now().Add(10 * time.Minute)},
	} {
		res, _, err := c.Deliver(context.Background(), rc.srv.URL, attempt.secret, testEvent(t), attempt.now)
		if err != nil || res.Success || status(res) != 401 || !strings.Contains(errText(res), "401") {
			t.Errorf("%s: Result %+v (%s), err %v; want a 401 failure", name, res, errText(res), err)
		}
	}
	for _, d := range rc.deliveries() {
		if d.err == nil {
			t.Errorf("receiver accepted a forged delivery: %s", d.header)
		}
	}
}

// TestRetriesKeepIDAndSignAfresh ensures retries of one stored body carry
// the same X-Webhook-Id and body with a new timestamp and signature.
func TestRetriesKeepIDAndSignAfresh(t *testing.T) {
	secret := webhook.NewSecret()
	rc := newReceiver(t, secret)
	c := privateClient(t, rc, dnstest.Start(t))
	ev := testEvent(t)
	rc.status.Store(http.StatusServiceUnavailable)
	first, body, err := c.Deliver(context.Background(), rc.srv.URL, secret, ev, time.Now().Add(-150*time.Second))
	if err != nil || first.Success || status(first) != 503 {
		t.Fatalf("first attempt: %+v, %v", first, err)
	}
	second := c.DeliverBody(context.Background(), rc.srv.URL, secret, ev.ID, body, time.Now().Add(-120*time.Second))
	rc.status.Store(http.StatusNoContent)
	third := c.DeliverBody(context.Background(), rc.srv.URL, secret, ev.ID, body, time.Now())
	if second.Success || !third.Success || status(third) != 204 {
		t.Fatalf("second %+v, third %+v (%s)", second, third, errText(third))
	}
	got := rc.deliveries()
	if len(got) != 3 {
		t.Fatalf("receiver saw %d deliveries", len(got))
	}
	stamps := map[string]bool{}
	for i, d := range got {
		if d.err != nil || d.header.Get("X-Webhook-Id") != ev.ID || string(d.body) != string(body) {
			t.Errorf("attempt %d: err %v, id %q, body %s", i+1, d.err, d.header.Get("X-Webhook-Id"), d.body)
		}
		stamps[d.header.Get("X-Webhook-Timestamp")+" "+d.header.Get("X-Webhook-Signature")] = true
	}
	if len(stamps) != 3 {
		t.Errorf("attempts reused a timestamp or signature: %v", stamps)
	}
}

// TestDeliveryFailures ensures each way an attempt fails is a failed Result
// with a status only when an answer came, a reason, and never the secret.
func TestDeliveryFailures(t *testing.T) {
	secret := webhook.NewSecret()
	dns := dnstest.Start(t)

	redirected := newReceiver(t, secret)
	target := newReceiver(t, secret)
	redirected.handle = func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.srv.URL+"/elsewhere", http.StatusFound)
	}

	stalled := newReceiver(t, secret)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	stalled.handle = func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}

	failing := newReceiver(t, secret)
	failing.handle = func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) }

	plain := httptest.NewServer(http.NotFoundHandler()) // speaks HTTP, not TLS
	t.Cleanup(plain.Close)

	closed := httptest.NewUnstartedServer(nil) // a port nobody listens on any more
	closedURL := "https://" + closed.Listener.Addr().String() + "/"
	closed.Listener.Close()

	pool := x509.NewCertPool()
	for _, rc := range []*receiver{redirected, target, stalled, failing} {
		pool.AddCert(rc.srv.Certificate())
	}
	c := webhook.NewClient(mustResolver(t, dns), egress.Policy{AllowPrivate: true, RootCAs: pool})
	untrusting := webhook.NewClient(mustResolver(t, dns), egress.Policy{AllowPrivate: true})

	for _, tc := range []struct {
		name   string
		client *webhook.Client
		url    string
		status int
		reason string
	}{
		{"non-2xx", c, failing.srv.URL, 500, "HTTP 500"},
		{"redirect", c, redirected.srv.URL, 302, "redirects are not followed"},
		{"timeout", c.WithTimeout(200 * time.Millisecond), stalled.srv.URL, 0, "timeout"},
		{"untrusted certificate", untrusting, failing.srv.URL, 0, "TLS certificate not trusted"},
		{"not TLS", c, strings.Replace(plain.URL, "http:", "https:", 1), 0, "TLS"},
		{"connection refused", c, closedURL, 0, "connection refused"},
		{"unresolvable", c, "https://nowhere.example.com/", 0, "could not be resolved"},
		{"not https", c, strings.Replace(failing.srv.URL, "https:", "http:", 1), 0, "https"},
		{"numeric host", c, "https://2130706433:" + failing.port() + "/", 0, "number"},
	} {
		res := tc.client.DeliverBody(context.Background(), tc.url, secret, testEventID, []byte(`{"marker":"BODYMARK"}`), time.Now())
		if res.Success || status(res) != tc.status || !strings.Contains(errText(res), tc.reason) {
			t.Errorf("%s: Result %+v, error %q; want status %d and %q", tc.name, res, errText(res), tc.status, tc.reason)
		}
		if strings.Contains(errText(res), strings.TrimPrefix(secret, "whsec_")) || strings.Contains(errText(res), "BODYMARK") {
			t.Errorf("%s: the error text carries the secret or the body: %s", tc.name, errText(res))
		}
	}
	if n := len(target.deliveries()); n != 0 {
		t.Errorf("the redirect was followed: its target got %d deliveries", n)
	}
}

// TestResultJSON ensures Result has the shape of the test endpoint's answer,
// with nulls for what did not happen.
func TestResultJSON(t *testing.T) {
	b, err := json.Marshal(webhook.Result{ResponseTimeMS: 3})
	if err != nil || string(b) != `{"success":false,"status_code":null,"response_time_ms":3,"error":null}` {
		t.Errorf("Result JSON = %s, %v", b, err)
	}
}

// TestLoopbackRefusedWithoutAllowPrivate ensures the receiver's URL is
// refused by validation and, if stored anyway, by the dial-time check of
// egress, so the receiver never sees a connection and the attempt's
// Result names the address.
func TestLoopbackRefusedWithoutAllowPrivate(t *testing.T) {
	secret := webhook.NewSecret()
	rc := newReceiver(t, secret)
	r := mustResolver(t, dnstest.Start(t))
	p := egress.Policy{RootCAs: rc.pool()}
	if err := egress.ValidateURL(context.Background(), rc.srv.URL, r, p); !errors.Is(err, egress.ErrUnsafeURL) {
		t.Fatalf("ValidateURL(%s) = %v, want ErrUnsafeURL", rc.srv.URL, err)
	}
	res := webhook.NewClient(r, p).DeliverBody(context.Background(), rc.srv.URL, secret, testEventID, []byte(`{}`), time.Now())
	if res.Success || res.StatusCode != nil || !strings.Contains(errText(res), "127.0.0.1 is a loopback address") {
		t.Errorf("Result %+v (%s); want a refusal naming the address", res, errText(res))
	}
	if n := rc.conns.Load(); n != 0 {
		t.Errorf("the receiver got %d connections", n)
	}
}

// TestDeliverRejectsBadEvent ensures an event that cannot be encoded is an
// error, not a delivery.
func TestDeliverRejectsBadEvent(t *testing.T) {
	rc := newReceiver(t, "s")
	c := privateClient(t, rc, dnstest.Start(t))
	if _, _, err := c.Deliver(context.Background(), rc.srv.URL, "s", &webhook.Event{ID: "x"}, time.Now()); err == nil {
		t.Error("Deliver accepted an event without an evt_ id")
	}
	if rc.conns.Load() != 0 {
		t.Error("a bad event was sent")
	}
}
