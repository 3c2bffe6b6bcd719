package httpapi

import (
	"crypto/hmac"
	"crypto/sha256"
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
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/internal/egress"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
	"github.com/dmarcd/dmarcd/webhook"
)

// webhookKeys are the fields of API.md's webhook object.
var webhookKeys = []string{"consecutive_failures", "created_at", "disabled_reason", "format", "id", "is_active",
	"last_delivery_at", "last_status_code", "name", "updated_at", "url"}

// testReceiver is a real HTTPS endpoint that checks each delivery by
// SPEC.md's five receiver rules with its own code and answers status (401
// to a delivery that breaks a rule).
type testReceiver struct {
	srv    *httptest.Server
	secret string // set once the webhook is created
	status atomic.Int32
	conns  atomic.Int32
	mu     sync.Mutex
	bodies [][]byte
	errs   []error
}

func newTestReceiver(t *testing.T) *testReceiver {
	t.Helper()
	rc := &testReceiver{}
	rc.status.Store(http.StatusOK)
	rc.srv = httptest.NewUnstartedServer(http.HandlerFunc(rc.serve))
	rc.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			rc.conns.Add(1)
		}
	}
	rc.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	rc.srv.StartTLS()
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *testReceiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	err := rc.check(r.Header, body)
	rc.mu.Lock()
	rc.bodies, rc.errs = append(rc.bodies, body), append(rc.errs, err)
	rc.mu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	w.WriteHeader(int(rc.status.Load()))
}

func (rc *testReceiver) check(h http.Header, body []byte) error {
	ts, sig := h.Get("X-Webhook-Timestamp"), h.Get("X-Webhook-Signature")
	if ts == "" || !strings.HasPrefix(sig, "sha256=") { // rule 2
		return errors.New("missing timestamp or sha256= signature")
	}
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || n-time.Now().Unix() > 300 || time.Now().Unix()-n > 300 { // rule 1
		return fmt.Errorf("timestamp %s out of tolerance", ts)
	}
	mac := hmac.New(sha256.New, []byte(rc.secret)) // rule 3
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	got, err := hex.DecodeString(sig[len("sha256="):])
	if err != nil || !hmac.Equal(got, mac.Sum(nil)) { // rule 4
		return errors.New("bad signature")
	}
	if h.Get("User-Agent") != "dmarcd-Webhooks/1.0" || h.Get("Content-Type") != "application/json" ||
		!strings.HasPrefix(h.Get("X-Webhook-Id"), "evt_") || strings.Contains(string(body), rc.secret) {
		return errors.New("headers or body wrong")
	}
	var ev map[string]any // rule 5: parsed last
	if err := json.Unmarshal(body, &ev); err != nil || ev["id"] != h.Get("X-Webhook-Id") {
		return fmt.Errorf("body %s", body)
	}
	return nil
}

func (rc *testReceiver) got(t *testing.T) [][]byte {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, err := range rc.errs {
		if err != nil {
			t.Errorf("a delivery broke a receiver rule: %v", err)
		}
	}
	return slices.Clone(rc.bodies)
}

func (rc *testReceiver) port() string {
	u, _ := url.Parse(rc.srv.URL)
	return u.Port()
}

// newWebhookEnv is newEnv with webhook support: URLs validated with policy
// p against the env's DNS server, test deliveries through a client built
// with p, and the clock at the real time (receivers check timestamps).
func newWebhookEnv(t *testing.T, p egress.Policy) *env {
	t.Helper()
	e := newEnv(t, 1000)
	e.clock.Set(time.Now().UTC().Truncate(time.Second))
	res, err := dnscheck.NewResolver(dnscheck.Config{Servers: []string{e.dns.Addr}, Timeout: 300 * time.Millisecond, Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	client := webhook.NewClient(res, p).WithTimeout(5 * time.Second)
	t.Cleanup(client.CloseIdleConnections)
	e.withApp(func(c *app.Config) {
		c.DNS = &dnscheck.Checker{Resolver: res, SuggestTimeout: time.Second}
		c.DNSTimeout = 2 * time.Second
		c.WebhookClient, c.WebhookResolver, c.WebhookPolicy = client, res, p
	})
	e.dns.SetA("hooks.example.com", "93.184.216.34")
	return e
}

// trusting is a policy that reaches loopback receivers and trusts them.
func trusting(rcs ...*testReceiver) egress.Policy {
	pool := x509.NewCertPool()
	for _, rc := range rcs {
		pool.AddCert(rc.srv.Certificate())
	}
	return egress.Policy{AllowPrivate: true, RootCAs: pool}
}

// mustCreateWebhook creates a webhook through the API and returns the
// answer's fields.
func (e *env) mustCreateWebhook(key, url, name string) map[string]any {
	e.t.Helper()
	r := e.do("POST", "/api/v1/webhooks", key, map[string]string{"url": url, "name": name})
	if r.status != http.StatusCreated {
		e.t.Fatalf("create webhook %s: %d %s", url, r.status, r.body)
	}
	return r.json(e.t)
}

func keysOf(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// TestWebhookPlanGate ensures every webhook endpoint answers 403
// plan_feature_unavailable to a plan without advanced alerting, before it
// looks at the id or the body.
func TestWebhookPlanGate(t *testing.T) {
	e := newWebhookEnv(t, egress.Policy{})
	id := store.NewID()
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/api/v1/webhooks", nil},
		{"GET", "/api/v1/webhooks?limit=0", nil},
		{"POST", "/api/v1/webhooks", "{not json"},
		{"POST", "/api/v1/webhooks", map[string]any{"url": "http://x", "name": ""}},
		{"GET", "/api/v1/webhooks/" + id, nil},
		{"PUT", "/api/v1/webhooks/" + id, map[string]any{"bogus": 1}},
		{"DELETE", "/api/v1/webhooks/" + id, nil},
		{"POST", "/api/v1/webhooks/" + id + "/test", nil},
	} {
		r := e.do(c.method, c.path, e.keyB, c.body)
		if r.status != http.StatusForbidden || r.errorCode(t) != "plan_feature_unavailable" {
			t.Errorf("%s %s on starter: %d %s", c.method, c.path, r.status, r.body)
		}
	}
	if r := e.do("GET", "/api/v1/webhooks", e.readA, nil); r.status != http.StatusOK {
		t.Errorf("read key listing: %d %s", r.status, r.body)
	}
	r := e.do("POST", "/api/v1/webhooks", e.readA, map[string]string{"url": "https://hooks.example.com/", "name": "x"})
	if r.status != http.StatusForbidden || r.errorCode(t) != "insufficient_scope" {
		t.Errorf("read key creating: %d %s", r.status, r.body)
	}
}

// TestCreateAndReadWebhook ensures creation answers 201 with API.md's
// object plus a whsec_ secret shown only then, and the webhook reads back
// the same without it, in the list and alone.
func TestCreateAndReadWebhook(t *testing.T) {
	e := newWebhookEnv(t, egress.Policy{})
	r := e.do("POST", "/api/v1/webhooks", e.keyA, map[string]string{"url": " https://hooks.example.com/dmarc ", "name": " ops "})
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	created := r.json(t)
	secret, _ := created["secret"].(string)
	if !regexp.MustCompile(`^whsec_[0-9a-f]{64}$`).MatchString(secret) {
		t.Errorf("secret = %q", secret)
	}
	id, _ := created["id"].(string)
	if got := r.header.Get("Location"); got != "/api/v1/webhooks/"+id {
		t.Errorf("Location = %q", got)
	}
	delete(created, "secret")
	now := e.clock.Now().Format(time.RFC3339)
	want := map[string]any{"id": id, "url": "https://hooks.example.com/dmarc", "name": "ops", "format": "dmarcd", "is_active": true,
		"created_at": now, "updated_at": now, "consecutive_failures": float64(0), "disabled_reason": nil,
		"last_delivery_at": nil, "last_status_code": nil}
	if fmt.Sprint(created) != fmt.Sprint(want) {
		t.Errorf("created =\n%v\nwant\n%v", created, want)
	}

	one := e.do("GET", "/api/v1/webhooks/"+id, e.readA, nil)
	list := e.do("GET", "/api/v1/webhooks", e.readA, nil)
	for _, r := range []resp{one, list} {
		if r.status != http.StatusOK || strings.Contains(string(r.body), secret[6:]) || strings.Contains(string(r.body), `"secret"`) {
			t.Errorf("read back: %d %s", r.status, r.body)
		}
	}
	if got := one.json(t); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("GET =\n%v\nwant\n%v", got, want)
	}
	var page struct {
		Data       []map[string]any `json:"data"`
		Pagination pagination       `json:"pagination"`
	}
	if err := json.Unmarshal(list.body, &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || !slices.Equal(keysOf(page.Data[0]), webhookKeys) ||
		page.Pagination != (pagination{Page: 1, Limit: 20, Total: 1, TotalPages: 1}) {
		t.Errorf("list = %s", list.body)
	}
	if r := e.do("GET", "/api/v1/webhooks/"+id, e.keyB, nil); r.status != http.StatusForbidden {
		t.Errorf("starter org reading: %d", r.status)
	}
	// Another organization with webhooks sees nothing of it.
	orgC := storetest.MustOrganization(t, e.db, "gamma", store.PlanBusiness)
	_, keyC := storetest.MustAPIKey(t, e.db, orgC.ID, store.ScopeFull)
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/v1/webhooks/" + id}, {"PUT", "/api/v1/webhooks/" + id}, {"DELETE", "/api/v1/webhooks/" + id},
		{"POST", "/api/v1/webhooks/" + id + "/test"}, {"GET", "/api/v1/webhooks/not-a-uuid"},
	} {
		var body any
		if c.method == "PUT" {
			body = map[string]any{"name": "mine"}
		}
		if r := e.do(c.method, c.path, keyC, body); r.status != http.StatusNotFound || r.errorCode(t) != "not_found" {
			t.Errorf("%s %s from another organization: %d %s", c.method, c.path, r.status, r.body)
		}
	}
	if r := e.do("GET", "/api/v1/webhooks", keyC, nil); !strings.Contains(string(r.body), `"total":0`) {
		t.Errorf("another organization's list: %s", r.body)
	}
}

// TestCreateWebhookBadInput ensures malformed bodies are 400, invalid or
// unsafe values 422 naming the field, and a DNS failure 503.
func TestCreateWebhookBadInput(t *testing.T) {
	e := newWebhookEnv(t, egress.Policy{})
	e.dns.SetA("internal.example.com", "10.1.2.3")
	e.dns.SetA("metadata.example.com", "169.254.169.254")
	e.dns.SetA("rebind.example.com", "93.184.216.34", "127.0.0.1")
	e.dns.SetA("mapped.example.com", "::ffff:127.0.0.1")
	e.dns.SetRcode("servfail.example.com", dns.RcodeServerFailure)
	for _, c := range []struct {
		name   string
		body   any
		status int
		fields []string
	}{
		{"NotJSON", `{"url":`, 400, nil},
		{"UnknownField", `{"url":"https://hooks.example.com/","name":"x","secret":"mine"}`, 400, []string{"secret"}},
		{"WrongType", `{"url":"https://hooks.example.com/","name":5}`, 400, []string{"name"}},
		{"Empty", `{}`, 422, []string{"name", "url"}},
		{"EmptyName", map[string]any{"url": "https://hooks.example.com/", "name": " "}, 422, []string{"name"}},
		{"LongName", map[string]any{"url": "https://hooks.example.com/", "name": strings.Repeat("n", 101)}, 422, []string{"name"}},
		{"NoURL", map[string]any{"name": "x"}, 422, []string{"url"}},
		{"HTTP", map[string]any{"url": "http://hooks.example.com/", "name": "x"}, 422, []string{"url"}},
		{"UserInfo", map[string]any{"url": "https://user:pw@hooks.example.com/", "name": "x"}, 422, []string{"url"}},
		{"TooLong", map[string]any{"url": "https://hooks.example.com/" + strings.Repeat("a", 2048), "name": "x"}, 422, []string{"url"}},
		{"Loopback", map[string]any{"url": "https://127.0.0.1/", "name": "x"}, 422, []string{"url"}},
		{"LoopbackV6", map[string]any{"url": "https://[::1]/", "name": "x"}, 422, []string{"url"}},
		{"Private", map[string]any{"url": "https://192.168.1.10/", "name": "x"}, 422, []string{"url"}},
		{"LinkLocal", map[string]any{"url": "https://169.254.169.254/latest/meta-data", "name": "x"}, 422, []string{"url"}},
		{"IPv4Mapped", map[string]any{"url": "https://[::ffff:127.0.0.1]/", "name": "x"}, 422, []string{"url"}},
		{"Decimal", map[string]any{"url": "https://2130706433/", "name": "x"}, 422, []string{"url"}},
		{"Octal", map[string]any{"url": "https://0177.0.0.1/", "name": "x"}, 422, []string{"url"}},
		{"Hex", map[string]any{"url": "https://0x7f.1/", "name": "x"}, 422, []string{"url"}},
		{"Localhost", map[string]any{"url": "https://localhost/", "name": "x"}, 422, []string{"url"}},
		{"ResolvesPrivate", map[string]any{"url": "https://internal.example.com/", "name": "x"}, 422, []string{"url"}},
		{"ResolvesMetadata", map[string]any{"url": "https://metadata.example.com/", "name": "x"}, 422, []string{"url"}},
		{"ResolvesMapped", map[string]any{"url": "https://mapped.example.com/", "name": "x"}, 422, []string{"url"}},
		{"RebindingPair", map[string]any{"url": "https://rebind.example.com/", "name": "x"}, 422, []string{"url"}},
		{"Unresolvable", map[string]any{"url": "https://nowhere.example.com/", "name": "x"}, 422, []string{"url"}},
		{"BothBad", map[string]any{"url": "https://10.0.0.1/", "name": ""}, 422, []string{"name", "url"}},
		{"UnknownFormat", map[string]any{"url": "https://hooks.example.com/", "name": "x", "format": "discord"}, 422, []string{"format"}},
		{"FormatCase", map[string]any{"url": "https://hooks.example.com/", "name": "x", "format": "Slack"}, 422, []string{"format"}},
		{"FormatWrongType", `{"url":"https://hooks.example.com/","name":"x","format":1}`, 400, []string{"format"}},
		{"AllBad", map[string]any{"url": "http://hooks.example.com/", "name": "", "format": "irc"}, 422, []string{"format", "name", "url"}},
		{"DNSDown", map[string]any{"url": "https://servfail.example.com/", "name": "x"}, 503, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.do("POST", "/api/v1/webhooks", e.keyA, c.body)
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %s", r.status, c.status, r.body)
			}
			var body struct {
				Error struct {
					Code    string       `json:"code"`
					Details []FieldError `json:"details"`
				} `json:"error"`
			}
			json.Unmarshal(r.body, &body)
			var fields []string
			for _, d := range body.Error.Details {
				fields = append(fields, d.Field)
				if d.Message == "" {
					t.Errorf("detail without message: %s", r.body)
				}
			}
			if c.status == 422 && (body.Error.Code != "validation_failed" || !slices.Equal(fields, c.fields)) {
				t.Errorf("body %s, want validation_failed on %v", r.body, c.fields)
			}
			if c.status == 400 && c.fields != nil && !slices.Equal(fields, c.fields) {
				t.Errorf("body %s, want details on %v", r.body, c.fields)
			}
			if c.status == 503 && body.Error.Code != "dns_unavailable" {
				t.Errorf("body %s", r.body)
			}
		})
	}
	if _, total, _ := e.db.ListWebhooks(e.orgA.ID, store.Page{Page: 1, Limit: 1}); total != 0 {
		t.Errorf("%d webhooks created from bad input", total)
	}
}

// TestWebhookPlanLimit ensures creating past the plan's count is 403
// plan_limit_exceeded, and a deleted webhook frees its place.
func TestWebhookPlanLimit(t *testing.T) {
	e := newWebhookEnv(t, egress.Policy{})
	org := storetest.MustOrganization(t, e.db, "gamma", store.PlanBusiness)
	_, key := storetest.MustAPIKey(t, e.db, org.ID, store.ScopeFull)
	var last map[string]any
	for i := range store.PlanBusiness.Limits().MaxWebhooks {
		last = e.mustCreateWebhook(key, "https://hooks.example.com/"+strconv.Itoa(i), "h")
	}
	r := e.do("POST", "/api/v1/webhooks", key, map[string]string{"url": "https://hooks.example.com/x", "name": "h"})
	if r.status != http.StatusForbidden || r.errorCode(t) != "plan_limit_exceeded" {
		t.Fatalf("11th webhook: %d %s", r.status, r.body)
	}
	if r := e.do("DELETE", "/api/v1/webhooks/"+last["id"].(string), key, nil); r.status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	e.mustCreateWebhook(key, "https://hooks.example.com/x", "h")
}

// raiseWebhookAlert stores a report of a new domain whose mail all fails
// DMARC, so that the alert rules raise an alert and queue its deliveries.
func (e *env) raiseWebhookAlert(name string) {
	e.t.Helper()
	d := storetest.MustDomain(e.t, e.db, e.orgA.ID, name)
	now := e.clock.Now()
	draft, err := e.db.NewReportDraft(store.Report{DomainID: d.ID, Domain: d.Name, OrgID: d.OrgID,
		OrgName: "reporter.example", ExternalReportID: store.NewID(), ReceivedAt: now,
		DateBegin: now.Add(-24 * time.Hour), DateEnd: now})
	if err != nil {
		e.t.Fatal(err)
	}
	draft.Add(&store.Record{SourceIP: "203.0.113.5", Count: 50, DKIM: "fail", SPF: "fail", Disposition: "none"})
	draft.Finish()
	if _, err := e.db.NewIngester().Commit(&store.IngestBatch{Reports: []*store.ReportDraft{draft}}); err != nil {
		e.t.Fatal(err)
	}
}

// failDeliveries records failed attempts for every due delivery.
func (e *env) failDeliveries() {
	e.t.Helper()
	ds, err := e.db.DueDeliveries(e.clock.Now().Add(time.Hour), 100, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, d := range ds {
		if _, err := e.db.FinishDeliveries([]store.DeliveryResult{{Entry: d, StatusCode: new(500), At: e.clock.Now()}}, nil); err != nil {
			e.t.Fatal(err)
		}
	}
}

// TestUpdateWebhook ensures PUT changes what it is given, validates a new
// URL again, refuses unknown fields, and that re-activating a webhook
// disabled by failures resets its count and reason.
func TestUpdateWebhook(t *testing.T) {
	e := newWebhookEnv(t, egress.Policy{})
	e.dns.SetA("new.example.com", "93.184.216.35")
	e.dns.SetA("internal.example.com", "10.9.9.9")
	created := e.mustCreateWebhook(e.keyA, "https://hooks.example.com/a", "ops")
	path := "/api/v1/webhooks/" + created["id"].(string)
	e.clock.Advance(time.Minute)

	r := e.do("PUT", path, e.keyA, map[string]any{"name": "renamed", "url": "https://new.example.com/b"})
	got := r.json(t)
	if r.status != http.StatusOK || got["name"] != "renamed" || got["url"] != "https://new.example.com/b" ||
		got["updated_at"] == created["updated_at"] || got["created_at"] != created["created_at"] || got["is_active"] != true {
		t.Errorf("PUT name and url: %d %s", r.status, r.body)
	}
	for _, c := range []struct {
		name   string
		body   any
		status int
		code   string
	}{
		{"UnknownField", `{"enabled": false}`, 400, "bad_request"},
		{"ReadOnlyField", `{"consecutive_failures": 0}`, 400, "bad_request"},
		{"WrongType", `{"is_active": "yes"}`, 400, "bad_request"},
		{"EmptyName", `{"name": ""}`, 422, "validation_failed"},
		{"PrivateURL", `{"url": "https://internal.example.com/"}`, 422, "validation_failed"},
		{"HTTPURL", `{"url": "http://new.example.com/"}`, 422, "validation_failed"},
	} {
		if r := e.do("PUT", path, e.keyA, c.body); r.status != c.status || r.errorCode(t) != c.code {
			t.Errorf("%s: %d %s", c.name, r.status, r.body)
		}
	}
	if r := e.do("PUT", "/api/v1/webhooks/"+store.NewID(), e.keyA, map[string]any{"name": "x"}); r.status != http.StatusNotFound {
		t.Errorf("unknown id: %d %s", r.status, r.body)
	}
	if r := e.do("GET", path, e.keyA, nil); r.json(t)["url"] != "https://new.example.com/b" {
		t.Errorf("a refused PUT changed the webhook: %s", r.body)
	}

	for i := range store.MaxWebhookFailures {
		e.raiseWebhookAlert(fmt.Sprintf("d%d.example.com", i))
		e.failDeliveries()
	}
	disabled := e.do("GET", path, e.keyA, nil).json(t)
	if disabled["is_active"] != false || disabled["disabled_reason"] != "consecutive_failures" ||
		disabled["consecutive_failures"] != float64(10) || disabled["last_status_code"] != float64(500) {
		t.Fatalf("after 10 failures: %v", disabled)
	}
	r = e.do("PUT", path, e.keyA, map[string]any{"is_active": true})
	got = r.json(t)
	if r.status != http.StatusOK || got["is_active"] != true || got["consecutive_failures"] != float64(0) || got["disabled_reason"] != nil {
		t.Errorf("re-activated: %d %s", r.status, r.body)
	}
	r = e.do("PUT", path, e.keyA, map[string]any{"is_active": false})
	if got := r.json(t); got["is_active"] != false || got["disabled_reason"] != nil {
		t.Errorf("deactivated through the API: %s", r.body)
	}
}

// TestDeleteWebhook ensures DELETE answers 204, drops the webhook's queued
// deliveries, and a second DELETE is 404.
func TestDeleteWebhook(t *testing.T) {
	e := newWebhookEnv(t, egress.Policy{})
	created := e.mustCreateWebhook(e.keyA, "https://hooks.example.com/a", "ops")
	path := "/api/v1/webhooks/" + created["id"].(string)
	e.raiseWebhookAlert("pending.example.com")
	if n, _ := e.db.OutboxDepth(); n != 1 {
		t.Fatalf("outbox depth %d before the delete, want 1", n)
	}
	if r := e.do("DELETE", path, e.keyA, nil); r.status != http.StatusNoContent || len(r.body) != 0 {
		t.Fatalf("delete: %d %q", r.status, r.body)
	}
	if n, _ := e.db.OutboxDepth(); n != 0 {
		t.Errorf("outbox depth %d after the delete", n)
	}
	for _, m := range []string{"GET", "DELETE"} {
		if r := e.do(m, path, e.keyA, nil); r.status != http.StatusNotFound {
			t.Errorf("%s after delete: %d", m, r.status)
		}
	}
}

// TestWebhookTestDelivery ensures POST /test sends a signed test event
// with a sample alert to a real HTTPS receiver and reports the attempt,
// success or not, without touching the webhook's delivery state.
func TestWebhookTestDelivery(t *testing.T) {
	rc := newTestReceiver(t)
	e := newWebhookEnv(t, trusting(rc))
	created := e.mustCreateWebhook(e.keyA, rc.srv.URL+"/hook", "receiver")
	rc.secret = created["secret"].(string)
	path := "/api/v1/webhooks/" + created["id"].(string)

	r := e.do("POST", path+"/test", e.keyA, nil)
	var res struct {
		Success        *bool   `json:"success"`
		StatusCode     *int    `json:"status_code"`
		ResponseTimeMS *int64  `json:"response_time_ms"`
		Error          *string `json:"error"`
	}
	if err := json.Unmarshal(r.body, &res); err != nil || r.status != http.StatusOK {
		t.Fatalf("test: %d %s", r.status, r.body)
	}
	if !slices.Equal(keysOf(r.json(t)), []string{"error", "response_time_ms", "status_code", "success"}) ||
		res.Success == nil || !*res.Success || res.StatusCode == nil || *res.StatusCode != 200 ||
		res.ResponseTimeMS == nil || *res.ResponseTimeMS < 0 || res.Error != nil {
		t.Errorf("test result = %s", r.body)
	}
	bodies := rc.got(t)
	if len(bodies) != 1 {
		t.Fatalf("receiver got %d deliveries", len(bodies))
	}
	var ev struct {
		Type           string         `json:"type"`
		Test           bool           `json:"test"`
		OrganizationID string         `json:"organization_id"`
		Data           map[string]any `json:"data"`
	}
	json.Unmarshal(bodies[0], &ev)
	alert, _ := ev.Data["alert"].(map[string]any)
	if ev.Type != "alert.created" || !ev.Test || ev.OrganizationID != e.orgA.ID || alert["status"] != "pending" ||
		alert["title"] == "" || !slices.Contains(keysOf(alert), "dismissed_at") {
		t.Errorf("test event = %s", bodies[0])
	}

	rc.status.Store(http.StatusInternalServerError)
	r = e.do("POST", path+"/test", e.keyA, nil)
	json.Unmarshal(r.body, &res)
	if r.status != http.StatusOK || *res.Success || *res.StatusCode != 500 || res.Error == nil || !strings.Contains(*res.Error, "500") {
		t.Errorf("failing receiver: %d %s", r.status, r.body)
	}
	rc.srv.Close()
	r = e.do("POST", path+"/test", e.keyA, nil)
	json.Unmarshal(r.body, &res)
	if r.status != http.StatusOK || *res.Success || res.StatusCode != nil || res.Error == nil {
		t.Errorf("receiver gone: %d %s", r.status, r.body)
	}
	after := e.do("GET", path, e.keyA, nil).json(t)
	if after["consecutive_failures"] != float64(0) || after["last_delivery_at"] != nil ||
		after["last_status_code"] != nil || after["is_active"] != true {
		t.Errorf("test deliveries changed the webhook: %v", after)
	}
}

// TestWebhookRebindingRefusedAtDelivery ensures a host that resolved to a
// public address when the webhook was saved and to loopback later
// (rebinding) is refused when the delivery connects: nothing reaches the
// loopback listener.
func TestWebhookRebindingRefusedAtDelivery(t *testing.T) {
	rc := newTestReceiver(t)
	p := trusting(rc)
	p.AllowPrivate = false
	e := newWebhookEnv(t, p)
	e.dns.SetA("rebind.example.com", "93.184.216.34")
	created := e.mustCreateWebhook(e.keyA, "https://rebind.example.com:"+rc.port()+"/", "rebinding")
	e.dns.SetA("rebind.example.com", "127.0.0.1")
	r := e.do("POST", "/api/v1/webhooks/"+created["id"].(string)+"/test", e.keyA, nil)
	var res struct {
		Success bool    `json:"success"`
		Error   *string `json:"error"`
	}
	json.Unmarshal(r.body, &res)
	if r.status != http.StatusOK || res.Success || res.Error == nil || !strings.Contains(*res.Error, "refused by policy") {
		t.Errorf("test to a rebound host: %d %s", r.status, r.body)
	}
	if n := rc.conns.Load(); n != 0 {
		t.Errorf("the loopback listener got %d connections", n)
	}
}
