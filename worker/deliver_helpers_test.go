package worker_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/internal/dnstest"
	"github.com/dmarcd/dmarcd/internal/egress"
	"github.com/dmarcd/dmarcd/metrics"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
	"github.com/dmarcd/dmarcd/webhook"
	"github.com/dmarcd/dmarcd/worker"
)

// received is one request as the test receiver saw it.
type received struct {
	header http.Header
	body   []byte
	event  event // decoded only when the checks passed
	err    error // nil when the delivery passed every check
}

// event is the delivery body of API.md.
type event struct {
	ID             string `json:"id"`
	Type           string `json:"type"`
	CreatedAt      string `json:"created_at"`
	Test           *bool  `json:"test"`
	OrganizationID string `json:"organization_id"`
	Data           struct {
		Alert map[string]any `json:"alert"`
	} `json:"data"`
}

// receiver is a real HTTPS endpoint that checks every delivery by SPEC.md's
// five receiver rules with code of its own (not package webhook/verify),
// then answers with the next of its statuses (the last one repeats).
type receiver struct {
	srv      *httptest.Server
	secret   string
	mu       sync.Mutex
	got      []received
	statuses []int
	// hold, when set, keeps each request waiting until it is closed or the
	// request is cancelled.
	hold        chan struct{}
	arrived     chan struct{} // one token per request, when set
	inFlight    atomic.Int32
	maxInFlight atomic.Int32
}

func newReceiver(t testing.TB, statuses ...int) *receiver {
	t.Helper()
	if len(statuses) == 0 {
		statuses = []int{http.StatusOK}
	}
	rc := &receiver{secret: webhook.NewSecret(), statuses: statuses}
	rc.srv = httptest.NewUnstartedServer(rc)
	rc.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	rc.srv.StartTLS()
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := rc.inFlight.Add(1)
	defer rc.inFlight.Add(-1)
	for {
		m := rc.maxInFlight.Load()
		if n <= m || rc.maxInFlight.CompareAndSwap(m, n) {
			break
		}
	}
	body, err := io.ReadAll(r.Body)
	got := received{header: r.Header.Clone(), body: body, err: err}
	if err == nil {
		got.event, got.err = rc.check(r.Header, body)
	}
	rc.mu.Lock()
	rc.got = append(rc.got, got)
	status := rc.statuses[min(len(rc.got), len(rc.statuses))-1]
	rc.mu.Unlock()
	if rc.arrived != nil {
		rc.arrived <- struct{}{}
	}
	if rc.hold != nil {
		select {
		case <-rc.hold:
		case <-r.Context().Done():
			// The client gave up: hang up without an answer (returning
			// would send an implicit 200 on a half-closed connection).
			panic(http.ErrAbortHandler)
		}
	}
	if got.err != nil {
		http.Error(w, got.err.Error(), http.StatusUnauthorized)
		return
	}
	w.WriteHeader(status)
}

// check applies the five rules in their order, then checks the headers
// and the body's shape.
func (rc *receiver) check(h http.Header, body []byte) (event, error) {
	var ev event
	tsText, sig := h.Get("X-Webhook-Timestamp"), h.Get("X-Webhook-Signature")
	// Rule 2: the timestamp is there and the signature has its scheme.
	if tsText == "" || !strings.HasPrefix(sig, "sha256=") {
		return ev, fmt.Errorf("timestamp %q or signature %q missing", tsText, sig)
	}
	ts, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return ev, fmt.Errorf("timestamp %q", tsText)
	}
	// Rule 1: within 300 s of our clock, either way.
	if d := time.Now().Unix() - ts; d > 300 || d < -300 {
		return ev, fmt.Errorf("timestamp %d is %d s away", ts, d)
	}
	// Rule 3: HMAC-SHA256 over "<timestamp>.<raw body>".
	mac := hmac.New(sha256.New, []byte(rc.secret))
	mac.Write([]byte(tsText + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	got, err := hex.DecodeString(strings.TrimPrefix(sig, "sha256="))
	// Rule 4: constant-time comparison.
	if err != nil || !hmac.Equal(got, want) {
		return ev, errors.New("signature mismatch")
	}
	if h.Get("Content-Type") != "application/json" || h.Get("User-Agent") != "dmarcd-Webhooks/1.0" {
		return ev, fmt.Errorf("Content-Type %q, User-Agent %q", h.Get("Content-Type"), h.Get("User-Agent"))
	}
	for name, vs := range h {
		for _, v := range vs {
			if strings.Contains(v, rc.secret[6:]) {
				return ev, fmt.Errorf("the secret is in header %s", name)
			}
		}
	}
	if strings.Contains(string(body), rc.secret[6:]) {
		return ev, errors.New("the secret is in the body")
	}
	// Rule 5: parse only now.
	if err := json.Unmarshal(body, &ev); err != nil {
		return ev, fmt.Errorf("body: %v", err)
	}
	if !strings.HasPrefix(ev.ID, "evt_") || ev.ID != h.Get("X-Webhook-Id") || ev.Type != "alert.created" ||
		ev.Test == nil || ev.OrganizationID == "" || ev.Data.Alert["id"] == nil {
		return ev, fmt.Errorf("body shape: %s (X-Webhook-Id %s)", body, h.Get("X-Webhook-Id"))
	}
	if _, err := time.Parse(time.RFC3339, ev.CreatedAt); err != nil {
		return ev, fmt.Errorf("created_at %q", ev.CreatedAt)
	}
	return ev, nil
}

// deliveries returns what the receiver got, failing the test on any
// delivery that broke a rule.
func (rc *receiver) deliveries(t testing.TB) []received {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for i, g := range rc.got {
		if g.err != nil {
			t.Errorf("delivery %d broke a receiver rule: %v", i+1, g.err)
		}
	}
	return append([]received(nil), rc.got...)
}

func (rc *receiver) url(path string) string { return rc.srv.URL + path }

// pool trusts every receiver's certificate, as --webhook-ca-file does.
func pool(rcs ...*receiver) *x509.CertPool {
	p := x509.NewCertPool()
	for _, rc := range rcs {
		p.AddCert(rc.srv.Certificate())
	}
	return p
}

// env is a store with an organization, a webhook client that trusts the
// receivers, and a clock that starts now (receivers check timestamps
// against the real time) and moves only when told.
type env struct {
	db      *store.DB
	clock   *storetest.Clock
	org     *store.Organization
	client  *webhook.Client
	reg     *metrics.Registry
	domains int
}

func newEnv(t testing.TB, rcs ...*receiver) *env {
	t.Helper()
	clock := storetest.NewClock(time.Now().UTC().Truncate(time.Second))
	db := storetest.OpenWithClock(t, clock)
	ns := dnstest.Start(t)
	res, err := dnscheck.NewResolver(dnscheck.Config{Servers: []string{ns.Addr}, Timeout: 300 * time.Millisecond, Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	client := webhook.NewClient(res, egress.Policy{AllowPrivate: true, RootCAs: pool(rcs...)})
	t.Cleanup(client.CloseIdleConnections)
	return &env{db: db, clock: clock, org: storetest.MustOrganization(t, db, "acme", store.PlanUnlimited),
		client: client, reg: metrics.NewRegistry()}
}

// deliverer returns the delivery job over e with retry delays ds.
func (e *env) deliverer(t testing.TB, cfg worker.DeliverConfig) *worker.Deliverer {
	t.Helper()
	cfg.Store, cfg.Client, cfg.Metrics, cfg.Now = e.db, e.client, e.reg, e.clock.Now
	d, err := worker.NewDeliverer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// webhookTo creates an active webhook of the organization to rc.
func (e *env) webhookTo(t testing.TB, rc *receiver, path string) *store.Webhook {
	t.Helper()
	w := &store.Webhook{OrgID: e.org.ID, URL: rc.url(path), Name: "hook " + path}
	if err := e.db.CreateWebhook(w, store.WebhookSecret(rc.secret)); err != nil {
		t.Fatal(err)
	}
	return w
}

// raiseAlert stores, for a new domain, an aggregate report whose mail all
// fails DMARC: the alert rules raise one critical dmarc_failure_rate
// alert, which queues its deliveries. It returns the alert.
func (e *env) raiseAlert(t testing.TB) *store.Alert {
	t.Helper()
	e.domains++
	dom := storetest.MustDomain(t, e.db, e.org.ID, fmt.Sprintf("d%d.example.com", e.domains))
	now := e.clock.Now()
	d, err := e.db.NewReportDraft(store.Report{
		DomainID: dom.ID, Domain: dom.Name, OrgID: e.org.ID, OrgName: "reporter.example",
		OrgEmail: "dmarc@reporter.example", ExternalReportID: store.NewID(), ReceivedAt: now,
		DateBegin: now.Add(-24 * time.Hour), DateEnd: now,
	})
	if err != nil {
		t.Fatal(err)
	}
	d.Add(&store.Record{SourceIP: "203.0.113.7", Count: 40, Disposition: "none", DKIM: "fail", SPF: "fail", HeaderFrom: dom.Name})
	d.Finish()
	if _, err := e.db.NewIngester().Commit(&store.IngestBatch{Reports: []*store.ReportDraft{d}}); err != nil {
		t.Fatal(err)
	}
	alerts, _, err := e.db.ListAlerts(e.org.ID, store.AlertFilter{DomainID: dom.ID, Page: store.Page{Page: 1, Limit: 10}})
	if err != nil || len(alerts) != 1 {
		t.Fatalf("the failing report raised %d alerts (%v), want 1", len(alerts), err)
	}
	return alerts[0]
}

// deliver runs the delivery job once at the env's clock.
func (e *env) deliver(t testing.TB, d *worker.Deliverer) {
	t.Helper()
	if err := d.DeliverDue(context.Background(), e.clock.Now()); err != nil {
		t.Fatal(err)
	}
}

func (e *env) alert(t testing.TB, id string) *store.Alert {
	t.Helper()
	a := storetest.Alert(t, e.db, e.org.ID, id)
	if a == nil {
		t.Fatalf("no alert %s", id)
	}
	return a
}

func (e *env) webhook(t testing.TB, id string) *store.Webhook {
	t.Helper()
	w, err := e.db.FindWebhook(e.org.ID, id)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// metric returns the value of one line of the metrics text, or "".
func (e *env) metric(line string) string {
	var b strings.Builder
	_ = e.reg.WriteText(&b)
	for _, l := range strings.Split(b.String(), "\n") {
		if v, ok := strings.CutPrefix(l, line+" "); ok {
			return v
		}
	}
	return ""
}

func timestamps(rs []received) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.header.Get("X-Webhook-Timestamp"))
	}
	return out
}
