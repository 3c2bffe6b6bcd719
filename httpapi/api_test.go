package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/internal/dnstest"
	"github.com/dmarcd/dmarcd/metrics"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// env is one API server over a real store and a real DNS server, with two
// organizations: A (unlimited, a full and a read key) and B (starter).
type env struct {
	t       *testing.T
	api     *Server
	srv     *httptest.Server
	db      *store.DB
	dns     *dnstest.Server
	clock   *storetest.Clock
	reg     *metrics.Registry
	orgA    *store.Organization
	orgB    *store.Organization
	keyA    string // full scope, org A
	readA   string // read scope, org A
	keyB    string // full scope, org B
	keyAID  string
	limitOf int
	appCfg  app.Config // what e.api's application layer was built from
}

func newEnv(t *testing.T, rateLimit int) *env {
	t.Helper()
	clock := storetest.NewClock(time.Date(2026, 11, 22, 9, 30, 0, 0, time.UTC))
	db := storetest.OpenWithClock(t, clock)
	ns := dnstest.Start(t)
	res, err := dnscheck.NewResolver(dnscheck.Config{Servers: []string{ns.Addr}, Timeout: 300 * time.Millisecond, Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, db: db, dns: ns, clock: clock, reg: metrics.NewRegistry(), limitOf: rateLimit}
	e.appCfg = app.Config{
		Store:           db,
		DNS:             &dnscheck.Checker{Resolver: res, SuggestTimeout: time.Second},
		TLS:             &dnscheck.TLSChecker{Resolver: res},
		ReportingDomain: "reports.example.net",
		Now:             clock.Now,
	}
	e.api = New(Config{
		App:       app.New(e.appCfg),
		Store:     db,
		RateLimit: rateLimit,
		Metrics:   e.reg,
		Now:       clock.Now,
	})
	e.api.handle("GET", "/test/panic", public, func(http.ResponseWriter, *request) error { panic("boom") })
	e.srv = httptest.NewServer(e.api)
	t.Cleanup(e.srv.Close)

	if e.orgA, err = db.CreateOrganization("alpha", store.PlanUnlimited); err != nil {
		t.Fatal(err)
	}
	if e.orgB, err = db.CreateOrganization("beta", store.PlanStarter); err != nil {
		t.Fatal(err)
	}
	var k *store.APIKey
	k, e.keyA, _ = db.CreateAPIKey(e.orgA.ID, "a-full", store.ScopeFull)
	e.keyAID = k.ID
	_, e.readA, _ = db.CreateAPIKey(e.orgA.ID, "a-read", store.ScopeRead)
	_, e.keyB, err = db.CreateAPIKey(e.orgB.ID, "b-full", store.ScopeFull)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// withApp rebuilds the API's application layer from its config changed
// by mod (a pipeline for quarantine retries, a mailbox intake, ...).
func (e *env) withApp(mod func(*app.Config)) {
	mod(&e.appCfg)
	e.api.app = app.New(e.appCfg)
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body is not a JSON object: %v: %q", err, r.body)
	}
	return m
}

// errorCode checks the API.md error shape and returns its code.
func (r resp) errorCode(t *testing.T) string {
	t.Helper()
	var body struct {
		Error *struct {
			Code    string       `json:"code"`
			Message string       `json:"message"`
			Details []FieldError `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil || body.Error == nil {
		t.Fatalf("not an error body: %q", r.body)
	}
	if body.Error.Message == "" || body.Error.Details == nil {
		t.Errorf("error body lacks message or details: %q", r.body)
	}
	return body.Error.Code
}

// do sends a request; body may be nil, a string (sent raw) or a value
// encoded as JSON. headers are name, value pairs.
func (e *env) do(method, path, key string, body any, headers ...string) resp {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

func (e *env) createDomain(key, name string) map[string]any {
	e.t.Helper()
	r := e.do("POST", "/api/v1/domains", key, map[string]string{"name": name})
	if r.status != http.StatusCreated {
		e.t.Fatalf("create %s: %d %s", name, r.status, r.body)
	}
	return r.json(e.t)
}

// TestAuthentication ensures every way of failing authentication gets the
// same 401 and body, so the API is no oracle for keys.
func TestAuthentication(t *testing.T) {
	e := newEnv(t, 1000)
	revoked := func() string {
		k, secret, err := e.db.CreateAPIKey(e.orgA.ID, "to-revoke", store.ScopeFull)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.db.RevokeAPIKey(k.ID); err != nil {
			t.Fatal(err)
		}
		return secret
	}()
	var first []byte
	for _, c := range []struct{ name, key string }{
		{"missing", ""},
		{"malformed", "not-a-key"},
		{"wrong prefix", "abc_0123456789abcdef0123456789abcdef"},
		{"uppercase hex", strings.ToUpper(e.keyA)},
		{"unknown", "dmk_0123456789abcdef0123456789abcdef"},
		{"revoked", revoked},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.do("GET", "/api/v1/domains", c.key, nil)
			if r.status != http.StatusUnauthorized || r.errorCode(t) != "unauthorized" {
				t.Fatalf("status %d body %s", r.status, r.body)
			}
			if first == nil {
				first = r.body
			} else if !bytes.Equal(first, r.body) {
				t.Errorf("401 bodies differ:\n%s\n%s", first, r.body)
			}
		})
	}
	if r := e.do("GET", "/api/v1/domains", e.keyA, nil); r.status != http.StatusOK {
		t.Fatalf("valid key: %d %s", r.status, r.body)
	}
}

// TestScopes ensures read keys can read and check, but not write.
func TestScopes(t *testing.T) {
	e := newEnv(t, 1000)
	d := e.createDomain(e.keyA, "scoped.example")
	id := d["id"].(string)
	for _, c := range []struct {
		method, path string
		body         any
		status       int
	}{
		{"GET", "/api/v1/domains", nil, 200},
		{"GET", "/api/v1/domains/" + id, nil, 200},
		{"POST", "/api/v1/check-dmarc", map[string]string{"domain": "scoped.example"}, 200},
		{"POST", "/api/v1/domains", map[string]string{"name": "other.example"}, 403},
		{"POST", "/api/v1/domains/" + id + "/verify", nil, 403},
		{"DELETE", "/api/v1/domains/" + id, nil, 403},
	} {
		r := e.do(c.method, c.path, e.readA, c.body)
		if r.status != c.status {
			t.Errorf("%s %s with a read key: %d, want %d: %s", c.method, c.path, r.status, c.status, r.body)
		}
		if c.status == 403 && r.errorCode(t) != "insufficient_scope" {
			t.Errorf("%s %s: code %s", c.method, c.path, r.errorCode(t))
		}
	}
}

// TestCreateDomainBadInput ensures every malformed or invalid creation
// request gets its own clear status and code, and creates nothing.
func TestCreateDomainBadInput(t *testing.T) {
	e := newEnv(t, 1000)
	cases := []struct {
		name    string
		body    any
		headers []string
		status  int
		code    string
	}{
		{"malformed JSON", `{"name": `, nil, 400, "bad_request"},
		{"not JSON", `name=example.com`, nil, 400, "bad_request"},
		{"empty body", ``, nil, 400, "bad_request"},
		{"array", `["example.com"]`, nil, 400, "bad_request"},
		{"unknown field", `{"name": "example.com", "nmae": "x"}`, nil, 400, "bad_request"},
		{"wrong type", `{"name": 42}`, nil, 400, "bad_request"},
		{"two objects", `{"name": "a.example"} {"name": "b.example"}`, nil, 400, "bad_request"},
		{"missing name", `{}`, nil, 422, "validation_failed"},
		{"null name", `{"name": null}`, nil, 422, "validation_failed"},
		{"empty name", `{"name": "  "}`, nil, 422, "validation_failed"},
		{"single label", `{"name": "com"}`, nil, 422, "validation_failed"},
		{"IPv4", `{"name": "192.0.2.1"}`, nil, 422, "validation_failed"},
		{"IPv6", `{"name": "2001:db8::1"}`, nil, 422, "validation_failed"},
		{"localhost", `{"name": "localhost"}`, nil, 422, "validation_failed"},
		{"wildcard", `{"name": "*.example.com"}`, nil, 422, "validation_failed"},
		{"label too long", `{"name": "` + strings.Repeat("a", 64) + `.com"}`, nil, 422, "validation_failed"},
		{"bad characters", `{"name": "exa mple.com"}`, nil, 422, "validation_failed"},
		{"text/plain", `{"name": "example.com"}`, []string{"Content-Type", "text/plain"}, 415, "unsupported_media_type"},
		{"form", `{"name": "example.com"}`, []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "unsupported_media_type"},
		{"too large", `{"name": "` + strings.Repeat("a", maxBodyBytes) + `"}`, nil, 413, "payload_too_large"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do("POST", "/api/v1/domains", e.keyA, c.body, c.headers...)
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %s", r.status, c.status, r.body)
			}
			if code := r.errorCode(t); code != c.code {
				t.Errorf("code %q, want %q", code, c.code)
			}
		})
	}
	if _, total, err := e.db.ListDomains(e.orgA.ID, store.Page{Page: 1, Limit: 10}); err != nil || total != 0 {
		t.Fatalf("bad requests created %d domains (err %v)", total, err)
	}
	// Field errors name the field.
	r := e.do("POST", "/api/v1/domains", e.keyA, `{}`)
	if !strings.Contains(string(r.body), `"field":"name"`) {
		t.Errorf("422 details do not name the field: %s", r.body)
	}
}

// TestCreateDomainNamesTheRefusedLabel ensures the 422 of a name that can
// never be registered says which label is refused and why (issue 24 item
// 19), in its message and in the field's details.
func TestCreateDomainNamesTheRefusedLabel(t *testing.T) {
	e := newEnv(t, 1000)
	for name, want := range map[string]string{
		"a-domain.localhost":           "a-domain.localhost: .localhost is reserved",
		"A-Domain.LOCALHOST.":          "a-domain.localhost: .localhost is reserved",
		"_dmarc.example.com":           `label "_dmarc"`,
		"mail.-bad.example":            `label "-bad"`,
		"a." + strings.Repeat("b", 64): `label "` + strings.Repeat("b", 64) + `"`,
		"host.1.2.300":                 `label "300"`,
		"example..com":                 "empty label",
	} {
		r := e.do("POST", "/api/v1/domains", e.keyA, map[string]string{"name": name})
		var body struct {
			Error struct {
				Code, Message string
				Details       []struct{ Field, Message string }
			}
		}
		if err := json.Unmarshal(r.body, &body); err != nil {
			t.Fatal(err)
		}
		if r.status != 422 || body.Error.Code != "validation_failed" || !strings.Contains(body.Error.Message, want) ||
			len(body.Error.Details) != 1 || body.Error.Details[0].Field != "name" || !strings.Contains(body.Error.Details[0].Message, want) {
			t.Errorf("%q: %d %s; want a 422 saying %q", name, r.status, r.body, want)
		}
	}
}

// TestCreateDomainNormalizesAndSuggests ensures names are normalized (IDN
// included) and the suggested record never weakens a published one.
func TestCreateDomainNormalizesAndSuggests(t *testing.T) {
	e := newEnv(t, 1000)
	d := e.createDomain(e.keyA, "Bücher.Example.")
	if d["name"] != "xn--bcher-kva.example" {
		t.Errorf("name = %v, want xn--bcher-kva.example", d["name"])
	}
	e.dns.SetTXT("_dmarc.strict.example", []string{"v=DMARC1; p=reject; pct=100; rua=mailto:soc@strict.example; adkim=s"})
	s := e.createDomain(e.keyA, "strict.example")
	rec := s["dmarc_record"].(string)
	email := s["reporting_email"].(string)
	for _, want := range []string{"p=reject", "adkim=s", "mailto:soc@strict.example", "mailto:" + email} {
		if !strings.Contains(rec, want) {
			t.Errorf("suggested record %q lacks %q", rec, want)
		}
	}
	recs, _ := json.Marshal(s["dns_records"])
	if !strings.Contains(string(recs), "strict.example._report._dmarc.reports.example.net") {
		t.Errorf("dns_records lack the authorization record: %s", recs)
	}
	if got := e.do("POST", "/api/v1/domains", e.keyA, map[string]string{"name": "STRICT.example"}); got.status != http.StatusConflict || got.errorCode(t) != "conflict" {
		t.Errorf("duplicate: %d %s", got.status, got.body)
	}
}

// TestTenantIsolation ensures an organization never sees or touches another
// organization's domains: their ids are 404, as unknown ones are.
func TestTenantIsolation(t *testing.T) {
	e := newEnv(t, 1000)
	a := e.createDomain(e.keyA, "alpha.example")
	b := e.createDomain(e.keyB, "alpha.example") // the same name in another org is allowed
	if a["reporting_email"] == b["reporting_email"] {
		t.Fatal("two organizations share a reporting address")
	}
	aid := a["id"].(string)
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/v1/domains/" + aid},
		{"DELETE", "/api/v1/domains/" + aid},
		{"POST", "/api/v1/domains/" + aid + "/verify"},
	} {
		r := e.do(c.method, c.path, e.keyB, nil)
		if r.status != http.StatusNotFound || r.errorCode(t) != "not_found" {
			t.Errorf("B %s %s: %d %s", c.method, c.path, r.status, r.body)
		}
	}
	list := e.do("GET", "/api/v1/domains", e.keyB, nil).json(t)
	data := list["data"].([]any)
	if len(data) != 1 || data[0].(map[string]any)["id"] != b["id"] {
		t.Errorf("B's list = %v", data)
	}
	if r := e.do("GET", "/api/v1/domains/"+aid, e.keyA, nil); r.status != http.StatusOK {
		t.Errorf("A lost its domain: %d", r.status)
	}
}

// TestNotFoundAndMethods ensures unknown ids, unknown paths and wrong
// methods get JSON errors with the right status (and Allow on 405).
func TestNotFoundAndMethods(t *testing.T) {
	e := newEnv(t, 1000)
	for _, c := range []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", "/api/v1/domains/00000000-0000-7000-8000-000000000000", 404, "not_found"},
		{"GET", "/api/v1/domains/not-a-uuid", 404, "not_found"},
		{"DELETE", "/api/v1/domains/not-a-uuid", 404, "not_found"},
		{"POST", "/api/v1/domains/not-a-uuid/verify", 404, "not_found"},
		{"GET", "/api/v1/nope", 404, "not_found"},
		{"PUT", "/api/v1/domains", 405, "method_not_allowed"},
		{"GET", "/api/v1/check-dmarc", 405, "method_not_allowed"},
		{"GET", "/test/panic", 500, "internal"},
	} {
		r := e.do(c.method, c.path, e.keyA, nil)
		if r.status != c.status || r.errorCode(t) != c.code {
			t.Errorf("%s %s: %d %s, want %d %s", c.method, c.path, r.status, r.body, c.status, c.code)
		}
		if c.status == 405 && r.header.Get("Allow") == "" {
			t.Errorf("%s %s: 405 without Allow", c.method, c.path)
		}
		if c.status == 500 && !strings.Contains(string(r.body), r.header.Get("X-Request-Id")) {
			t.Errorf("500 message lacks the request id: %s", r.body)
		}
		if r.header.Get("Content-Type") != "application/json" || r.header.Get("X-Request-Id") == "" {
			t.Errorf("%s %s: headers %v", c.method, c.path, r.header)
		}
	}
}

// TestPagination ensures page and limit are validated and honoured.
func TestPagination(t *testing.T) {
	e := newEnv(t, 1000)
	var ids []string
	for i := 0; i < 25; i++ {
		ids = append(ids, e.createDomain(e.keyA, fmt.Sprintf("d%02d.example", i))["id"].(string))
		e.clock.Advance(time.Second)
	}
	for _, q := range []string{"limit=0", "limit=101", "limit=x", "page=0", "page=-1", "page=x", "page=1.5"} {
		r := e.do("GET", "/api/v1/domains?"+q, e.keyA, nil)
		if r.status != 400 || r.errorCode(t) != "bad_request" {
			t.Errorf("%s: %d %s", q, r.status, r.body)
		}
	}
	var page struct {
		Data       []map[string]any `json:"data"`
		Pagination pagination       `json:"pagination"`
	}
	r := e.do("GET", "/api/v1/domains?limit=10&page=3", e.keyA, nil)
	if err := json.Unmarshal(r.body, &page); err != nil {
		t.Fatal(err)
	}
	if page.Pagination != (pagination{Page: 3, Limit: 10, Total: 25, TotalPages: 3}) || len(page.Data) != 5 {
		t.Fatalf("page 3: %+v with %d items", page.Pagination, len(page.Data))
	}
	if page.Data[4]["id"] != ids[0] {
		t.Errorf("last item of the last page should be the oldest domain")
	}
	r = e.do("GET", "/api/v1/domains", e.keyA, nil)
	json.Unmarshal(r.body, &page)
	if page.Pagination.Limit != 20 || len(page.Data) != 20 || page.Data[0]["id"] != ids[24] {
		t.Errorf("default page: %+v, first %v", page.Pagination, page.Data[0]["id"])
	}
	r = e.do("GET", "/api/v1/domains?page=9", e.keyA, nil)
	if r.status != 200 || !strings.Contains(string(r.body), `"data":[]`) {
		t.Errorf("page past the end: %d %s", r.status, r.body)
	}
}

// TestPlanLimit ensures a starter organization stops at 3 domains.
func TestPlanLimit(t *testing.T) {
	e := newEnv(t, 1000)
	for i := 0; i < 3; i++ {
		e.createDomain(e.keyB, fmt.Sprintf("b%d.example", i))
	}
	r := e.do("POST", "/api/v1/domains", e.keyB, map[string]string{"name": "b4.example"})
	if r.status != http.StatusForbidden || r.errorCode(t) != "plan_limit_exceeded" {
		t.Fatalf("4th domain on starter: %d %s", r.status, r.body)
	}
}

// TestVerify ensures each verification outcome: the reasons of a 422, the
// 200 that activates, and 503 when DNS is down.
func TestVerify(t *testing.T) {
	e := newEnv(t, 1000)
	d := e.createDomain(e.keyA, "verify.example")
	id, email := d["id"].(string), d["reporting_email"].(string)
	path := "/api/v1/domains/" + id + "/verify"
	for _, c := range []struct {
		name    string
		setup   func()
		status  int
		code    string
		message string
	}{
		{"no record", func() {}, 422, "verification_failed", "no DMARC record"},
		{"not DMARC", func() { e.dns.SetTXT("_dmarc.verify.example", []string{"v=spf1 -all"}) }, 422, "verification_failed", "is not a DMARC record"},
		{"invalid", func() { e.dns.SetTXT("_dmarc.verify.example", []string{"v=DMARC1; p=maybe; rua=mailto:" + email}) }, 422, "verification_failed", "not a valid DMARC record"},
		{"two records", func() {
			e.dns.SetTXT("_dmarc.verify.example", []string{"v=DMARC1; p=none; rua=mailto:" + email}, []string{"v=DMARC1; p=none"})
		}, 422, "verification_failed", "more than one"},
		{"address missing", func() {
			e.dns.SetTXT("_dmarc.verify.example", []string{"v=DMARC1; p=none; rua=mailto:x@verify.example"})
		}, 422, "verification_failed", email},
		{"servfail", func() { e.dns.SetRcode("_dmarc.verify.example", dns.RcodeServerFailure) }, 503, "dns_unavailable", "DNS"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e.dns.Remove("_dmarc.verify.example")
			c.setup()
			r := e.do("POST", path, e.keyA, nil)
			if r.status != c.status || r.errorCode(t) != c.code {
				t.Fatalf("%d %s", r.status, r.body)
			}
			if !strings.Contains(string(r.body), c.message) {
				t.Errorf("message lacks %q: %s", c.message, r.body)
			}
		})
	}
	e.dns.Remove("_dmarc.verify.example")
	e.dns.SetTXT("_dmarc.verify.example", []string{"v=DMARC1; p=none; rua=mailto:" + strings.ToUpper(email) + "!10m"})
	r := e.do("POST", path, e.keyA, nil)
	if r.status != 200 {
		t.Fatalf("verify: %d %s", r.status, r.body)
	}
	dom := r.json(t)["domain"].(map[string]any)
	if dom["status"] != "active" || dom["verified_at"] != "2026-11-22T09:30:00Z" {
		t.Errorf("verified domain = %v", dom)
	}
	if r := e.do("POST", path, e.keyA, nil); r.status != 200 {
		t.Errorf("re-verifying an active domain: %d", r.status)
	}
}

// TestCheckDMARCBadInput ensures check-dmarc validates its body like
// domain creation does.
func TestCheckDMARCBadInput(t *testing.T) {
	e := newEnv(t, 1000)
	for _, c := range []struct {
		body   any
		status int
		code   string
	}{
		{`{"domain": }`, 400, "bad_request"},
		{`{"name": "example.com"}`, 400, "bad_request"},
		{`{}`, 422, "validation_failed"},
		{`{"domain": "not a domain"}`, 422, "validation_failed"},
		{`{"domain": "10.0.0.1"}`, 422, "validation_failed"},
	} {
		r := e.do("POST", "/api/v1/check-dmarc", e.keyA, c.body)
		if r.status != c.status || r.errorCode(t) != c.code {
			t.Errorf("%v: %d %s", c.body, r.status, r.body)
		}
	}
	e.dns.SetTXT("_dmarc.checked.example", []string{"v=DMARC1; p=none; rua=mailto:d@elsewhere.example"})
	r := e.do("POST", "/api/v1/check-dmarc", e.keyB, map[string]string{"domain": "checked.example"})
	m := r.json(t)
	if r.status != 200 || m["found"] != true || m["record_name"] != "_dmarc.checked.example" {
		t.Fatalf("check-dmarc: %d %s", r.status, r.body)
	}
	for _, f := range []string{"tags", "policy", "rua", "ruf", "external_authorization", "warnings", "errors", "inherited_from"} {
		if _, ok := m[f]; !ok {
			t.Errorf("check-dmarc result lacks %q", f)
		}
	}
}

// TestRateLimit ensures the per-key token bucket, its headers and the 429,
// driven by the injected clock.
func TestRateLimit(t *testing.T) {
	e := newEnv(t, 6) // 6 per minute: one token every 10 s
	for i := 0; i < 6; i++ {
		r := e.do("GET", "/api/v1/domains", e.keyA, nil)
		if r.status != 200 {
			t.Fatalf("request %d: %d", i+1, r.status)
		}
		if got := r.header.Get("X-RateLimit-Remaining"); got != strconv.Itoa(5-i) {
			t.Errorf("request %d: remaining %s, want %d", i+1, got, 5-i)
		}
		if r.header.Get("X-RateLimit-Limit") != "6" || r.header.Get("X-RateLimit-Reset") == "" {
			t.Errorf("headers: %v", r.header)
		}
	}
	r := e.do("GET", "/api/v1/domains", e.keyA, nil)
	if r.status != 429 || r.errorCode(t) != "rate_limited" || r.header.Get("Retry-After") != "10" {
		t.Fatalf("7th request: %d Retry-After=%q %s", r.status, r.header.Get("Retry-After"), r.body)
	}
	if reset, _ := strconv.ParseInt(r.header.Get("X-RateLimit-Reset"), 10, 64); reset != e.clock.Now().Add(time.Minute).Unix() {
		t.Errorf("X-RateLimit-Reset = %d, want now+60s", reset)
	}
	// Another key of the same organization has its own bucket.
	if r := e.do("GET", "/api/v1/domains", e.readA, nil); r.status != 200 {
		t.Errorf("another key limited too: %d", r.status)
	}
	e.clock.Advance(10 * time.Second)
	if r := e.do("GET", "/api/v1/domains", e.keyA, nil); r.status != 200 {
		t.Fatalf("after one refill interval: %d", r.status)
	}
	if r := e.do("GET", "/api/v1/domains", e.keyA, nil); r.status != 429 {
		t.Fatalf("bucket should be empty again: %d", r.status)
	}
}

// TestFailedAuthLimit ensures more than 30 failed authentications in a
// minute from one address block it, valid key or not, until the minute ends.
func TestFailedAuthLimit(t *testing.T) {
	e := newEnv(t, 1000)
	for i := 0; i < 30; i++ {
		if r := e.do("GET", "/api/v1/domains", fmt.Sprintf("dmk_%032x", i), nil); r.status != 401 {
			t.Fatalf("failure %d: %d", i+1, r.status)
		}
	}
	r := e.do("GET", "/api/v1/domains", e.keyA, nil)
	if r.status != 429 || r.header.Get("Retry-After") == "" {
		t.Fatalf("31st attempt: %d %s", r.status, r.body)
	}
	e.clock.Advance(time.Minute)
	if r := e.do("GET", "/api/v1/domains", e.keyA, nil); r.status != 200 {
		t.Fatalf("after the minute: %d %s", r.status, r.body)
	}
}

// TestPublicEndpointsAndMetrics ensures health, readiness, the OpenAPI
// document and metrics need no key, and metrics count requests by route.
func TestPublicEndpointsAndMetrics(t *testing.T) {
	e := newEnv(t, 1000)
	for _, p := range []string{"/healthz", "/readyz", "/api/v1/openapi.json", "/metrics"} {
		if r := e.do("GET", p, "", nil); r.status != 200 {
			t.Errorf("GET %s: %d", p, r.status)
		}
	}
	e.do("GET", "/api/v1/domains", e.keyA, nil)
	e.do("GET", "/api/v1/domains/not-a-uuid", e.keyA, nil)
	r := e.do("GET", "/metrics", "", nil)
	for _, want := range []string{
		`dmarcd_http_requests_total{route="/api/v1/domains",method="GET",status="200"} 1`,
		`dmarcd_http_requests_total{route="/api/v1/domains/:id",method="GET",status="404"} 1`,
		`dmarcd_http_request_duration_seconds_count{route="/api/v1/domains",method="GET"} 1`,
	} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if r := e.do("GET", "/readyz", "", nil); r.status != 200 {
		t.Errorf("readyz: %d", r.status)
	}
}

// TestRequestID ensures a sane incoming X-Request-Id is kept and a bad one
// replaced.
func TestRequestID(t *testing.T) {
	e := newEnv(t, 1000)
	if r := e.do("GET", "/healthz", "", nil, "X-Request-Id", "abc-123"); r.header.Get("X-Request-Id") != "abc-123" {
		t.Errorf("request id not kept: %q", r.header.Get("X-Request-Id"))
	}
	if r := e.do("GET", "/healthz", "", nil, "X-Request-Id", "bad id {}"); r.header.Get("X-Request-Id") == "bad id {}" || r.header.Get("X-Request-Id") == "" {
		t.Errorf("bad request id echoed: %q", r.header.Get("X-Request-Id"))
	}
}

// TestKeyUsageIsFlushed ensures last_used_at reaches the store in a batch.
func TestKeyUsageIsFlushed(t *testing.T) {
	e := newEnv(t, 1000)
	e.do("GET", "/api/v1/domains", e.keyA, nil)
	if err := e.api.app.FlushKeyUsage(); err != nil {
		t.Fatal(err)
	}
	k := storetest.APIKey(t, e.db, e.orgA.ID, e.keyAID)
	if k.LastUsedAt == nil || !k.LastUsedAt.Equal(e.clock.Now()) {
		t.Errorf("last_used_at = %v, want %v", k.LastUsedAt, e.clock.Now())
	}
}

// TestDeleteDomain ensures delete is 204 with no body and final.
func TestDeleteDomain(t *testing.T) {
	e := newEnv(t, 1000)
	id := e.createDomain(e.keyA, "gone.example")["id"].(string)
	r := e.do("DELETE", "/api/v1/domains/"+id, e.keyA, nil)
	if r.status != 204 || len(r.body) != 0 {
		t.Fatalf("delete: %d %q", r.status, r.body)
	}
	if r := e.do("DELETE", "/api/v1/domains/"+id, e.keyA, nil); r.status != 404 {
		t.Errorf("second delete: %d", r.status)
	}
	// The name is free again.
	e.createDomain(e.keyA, "gone.example")
}

// TestListIsNeverStale ensures the cached list pages follow every write:
// creation, verification (a status change) and deletion.
func TestListIsNeverStale(t *testing.T) {
	e := newEnv(t, 1000)
	names := func() string {
		var got []string
		for _, d := range e.do("GET", "/api/v1/domains", e.keyA, nil).json(t)["data"].([]any) {
			m := d.(map[string]any)
			got = append(got, m["name"].(string)+"="+m["status"].(string))
		}
		return strings.Join(got, ",")
	}
	one := e.createDomain(e.keyA, "one.example")
	if got := names(); got != "one.example=pending" {
		t.Fatalf("list = %s", got)
	}
	e.clock.Advance(time.Second)
	e.createDomain(e.keyA, "two.example")
	if got := names(); got != "two.example=pending,one.example=pending" {
		t.Fatalf("after create: %s", got)
	}
	e.dns.SetTXT("_dmarc.one.example", []string{"v=DMARC1; p=none; rua=mailto:" + one["reporting_email"].(string)})
	if r := e.do("POST", "/api/v1/domains/"+one["id"].(string)+"/verify", e.keyA, nil); r.status != 200 {
		t.Fatalf("verify: %d %s", r.status, r.body)
	}
	if got := names(); got != "two.example=pending,one.example=active" {
		t.Fatalf("after verify: %s", got)
	}
	e.do("DELETE", "/api/v1/domains/"+one["id"].(string), e.keyA, nil)
	if got := names(); got != "two.example=pending" {
		t.Fatalf("after delete: %s", got)
	}
	// Another organization's writes do not show up here, and its list is its own.
	e.createDomain(e.keyB, "b.example")
	if got := names(); got != "two.example=pending" {
		t.Fatalf("after B's write: %s", got)
	}
}
