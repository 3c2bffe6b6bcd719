package https

import (
	"bytes"
	"compress/gzip"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/ingest/ingesttest"
	"github.com/dmarcd/dmarcd/internal/clientaddr"
	"github.com/dmarcd/dmarcd/internal/reportgen"
	"github.com/dmarcd/dmarcd/store"
)

func testdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "dmarc", "tlsrpt", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// server is a real HTTPS server on loopback serving a Handler over a real
// pipeline, counting the body bytes the handler read.
type server struct {
	env    *ingesttest.Env
	srv    *httptest.Server
	client *http.Client
	read   atomic.Int64
	// last is the status and body of the handler's latest answer, as it
	// wrote them (the client may not see an answer sent before it
	// finished sending its body: the server then closes the connection).
	mu         sync.Mutex
	lastStatus int
	lastBody   bytes.Buffer
}

// recorder tees what the handler writes into the server's last answer.
type recorder struct {
	http.ResponseWriter
	s *server
}

func (r *recorder) WriteHeader(code int) {
	r.s.mu.Lock()
	r.s.lastStatus = code
	r.s.mu.Unlock()
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.s.mu.Lock()
	r.s.lastBody.Write(b)
	r.s.mu.Unlock()
	return r.ResponseWriter.Write(b)
}

func newServer(t testing.TB, cfg Config) *server {
	t.Helper()
	s := &server{env: ingesttest.New(t, "acme/example.com/abc")}
	cfg.Ingest, cfg.Store, cfg.ReportingDomain = s.env.Pipeline.Ingest, s.env.DB, "reports.test"
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = &countingBody{r: r.Body, n: &s.read}
		s.mu.Lock()
		s.lastStatus = 0
		s.lastBody.Reset()
		s.mu.Unlock()
		h.ServeHTTP(&recorder{ResponseWriter: w, s: s}, r)
	}))
	t.Cleanup(s.srv.Close)
	s.client = s.srv.Client()
	s.client.Transport.(*http.Transport).TLSClientConfig.MinVersion = tls.VersionTLS12
	return s
}

type countingBody struct {
	r io.ReadCloser
	n *atomic.Int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (c *countingBody) Close() error { return c.r.Close() }

// post sends body (length unknown when chunked) and returns the status
// and the error body's message, if any.
func (s *server) post(t testing.TB, local, ctype string, body io.Reader, length int64) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", s.srv.URL+PathPrefix+local, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = length
	req.Header.Set("Content-Type", ctype)
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	defer resp.Body.Close()
	var e struct {
		Error struct{ Code, Message string }
		Answer
	}
	_ = json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e.Error.Code + ": " + e.Error.Message
}

// postOversized is post for a body the server refuses before reading it
// all: when the client's write fails because the server answered and
// closed the connection first (a race the client may lose under load),
// the answer is the one the handler wrote.
func (s *server) postOversized(t testing.TB, local, ctype string, body io.Reader, length int64) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", s.srv.URL+PathPrefix+local, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = length
	req.Header.Set("Content-Type", ctype)
	var raw []byte
	code := 0
	resp, err := s.client.Do(req)
	switch {
	case err == nil:
		defer resp.Body.Close()
		code = resp.StatusCode
		raw, _ = io.ReadAll(resp.Body)
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE):
		s.mu.Lock()
		code, raw = s.lastStatus, bytes.Clone(s.lastBody.Bytes())
		s.mu.Unlock()
	default:
		t.Fatalf("POST: %v", err)
	}
	var e struct {
		Error struct{ Code, Message string }
	}
	_ = json.Unmarshal(raw, &e)
	return code, e.Error.Code + ": " + e.Error.Message
}

func (s *server) postBytes(t testing.TB, local, ctype string, b []byte) (int, string) {
	t.Helper()
	return s.post(t, local, ctype, bytes.NewReader(b), int64(len(b)))
}

func (s *server) tlsCount(t testing.TB) int {
	t.Helper()
	d := s.env.Domains["abc@reports.test"]
	l, err := s.env.DB.ListTLSReports(d.OrgID, store.TLSFilter{DomainID: d.ID, Page: store.Page{Page: 1, Limit: 100}})
	if err != nil {
		t.Fatal(err)
	}
	return len(l.Reports)
}

// TestPostStores ensures Google's (gzip) and Microsoft's (plain) reports
// POSTed over HTTPS are stored (201), again are 200, and that the local
// part is matched without case while unknown or malformed ones are 404.
func TestPostStores(t *testing.T) {
	s := newServer(t, Config{})
	if code, msg := s.postBytes(t, "abc", "application/tlsrpt+gzip", gz(t, testdata(t, "google.json"))); code != 201 {
		t.Fatalf("google gzip: %d %s", code, msg)
	}
	if code, msg := s.postBytes(t, "ABC", "application/tlsrpt+json", testdata(t, "microsoft.json")); code != 201 {
		t.Fatalf("microsoft: %d %s", code, msg)
	}
	if code, msg := s.postBytes(t, "abc", "application/tlsrpt+json", testdata(t, "google.json")); code != 200 {
		t.Fatalf("google again: %d %s", code, msg)
	}
	for _, local := range []string{"nobody", "abc@reports.test", "a%2Fb", strings.Repeat("a", 65)} {
		if code, _ := s.postBytes(t, local, "application/tlsrpt+json", testdata(t, "google.json")); code != 404 {
			t.Errorf("local %q: %d, want 404", local, code)
		}
	}
	if n := s.tlsCount(t); n != 2 {
		t.Fatalf("%d TLS reports, want 2", n)
	}
	resp, err := s.client.Get(s.srv.URL + PathPrefix + "abc")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Fatalf("GET: %d", resp.StatusCode)
	}
}

// endless is a body of n bytes of JSON-ish filler.
type endless struct{ left int64 }

func (e *endless) Read(p []byte) (int, error) {
	if e.left <= 0 {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), e.left))
	for i := range p[:n] {
		p[i] = ' '
	}
	e.left -= int64(n)
	return n, nil
}

// TestPostHostile ensures each hostile body is refused with its reason
// (400), a 20 MB body with 413 after at most 1 MiB read (announced or
// chunked), nothing is stored or quarantined, and the server still
// stores a good report afterwards.
func TestPostHostile(t *testing.T) {
	s := newServer(t, Config{RateLimit: 1000})
	head := `{"report-id":"r","policies":[],"x":`
	var bomb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&bomb, gzip.BestCompression)
	zw.Write([]byte(`{"report-id":"bomb","policies":[{"x":"`))
	zw.Write(bytes.Repeat([]byte("A"), 64<<20))
	zw.Close()
	for _, c := range []struct{ name, body, reason string }{
		{"invalid JSON", head + `{"organization-name": "x",`, "unexpected end"},
		{"deep nesting", head + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + "}", "nesting deeper than"},
		{"huge array", head + "[" + strings.TrimSuffix(strings.Repeat("1,", 20000), ",") + "]}", "more than 10000 elements"},
		{"negative count", strings.Replace(string(testdata(t, "google.json")), "1200", "-1200", 1), "is negative"},
		{"gzip bomb", bomb.String(), "gzip"},
		{"not a report", `{"hello": "world"}`, "no TLS report"},
		{"aggregate report", string(reportgen.Generate(1, 1, reportgen.Options{})), "no TLS report"},
		{"empty", "", "no TLS report"},
	} {
		code, msg := s.postBytes(t, "abc", "application/tlsrpt+json", []byte(c.body))
		if code != 400 || !strings.Contains(msg, "bad_request") || !strings.Contains(msg, c.reason) {
			t.Errorf("%s: %d %q, want 400 saying %q", c.name, code, msg, c.reason)
		}
		// The reason says it once, without package prefixes (issue 24).
		if strings.Count(msg, "no TLS report") > 1 || strings.Contains(msg, "dmarc: ") || strings.Contains(msg, "report found") {
			t.Errorf("%s: %q repeats itself", c.name, msg)
		}
	}
	for _, announced := range []bool{true, false} {
		s.read.Store(0)
		length := int64(-1)
		if announced {
			length = 20 << 20
		}
		code, msg := s.postOversized(t, "abc", "application/tlsrpt+json", &endless{left: 20 << 20}, length)
		if code != 413 || !strings.Contains(msg, "payload_too_large") {
			t.Errorf("20 MB (announced %v): %d %s", announced, code, msg)
		}
		if n := s.read.Load(); n > 1<<20+64<<10 {
			t.Errorf("20 MB (announced %v): handler read %d bytes", announced, n)
		}
	}
	if n := s.tlsCount(t); n != 0 {
		t.Fatalf("%d TLS reports stored", n)
	}
	if q := s.env.Quarantine(t); len(q) != 0 {
		t.Fatalf("%d quarantined", len(q))
	}
	if code, msg := s.postBytes(t, "abc", "application/tlsrpt+gzip", gz(t, testdata(t, "google.json"))); code != 201 {
		t.Fatalf("good report after hostile ones: %d %s", code, msg)
	}
}

// TestPostRateLimit ensures a client address gets RateLimit POSTs at once,
// then 429 with Retry-After until the bucket refills.
func TestPostRateLimit(t *testing.T) {
	now := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	var clock atomic.Pointer[time.Time]
	clock.Store(&now)
	s := newServer(t, Config{RateLimit: 2, Now: func() time.Time { return *clock.Load() }})
	for i := range 2 {
		if code, _ := s.postBytes(t, "nobody", "application/json", nil); code != 404 {
			t.Fatalf("post %d: %d", i, code)
		}
	}
	req, _ := http.NewRequest("POST", s.srv.URL+PathPrefix+"abc", strings.NewReader("{}"))
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "30" {
		t.Fatalf("third: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	later := now.Add(30 * time.Second)
	clock.Store(&later)
	if code, msg := s.postBytes(t, "abc", "application/json", testdata(t, "google.json")); code != 201 {
		t.Fatalf("after refill: %d %s", code, msg)
	}
}

// TestPostRateLimitBehindTrustedProxy ensures the per-address limit
// counts the address a trusted proxy forwarded (issue 24 item 10): two
// reporters behind one proxy each get their own budget.
func TestPostRateLimitBehindTrustedProxy(t *testing.T) {
	env := ingesttest.New(t, "acme/example.com/abc")
	h, err := New(Config{Ingest: env.Pipeline.Ingest, Store: env.DB, ReportingDomain: "reports.test", RateLimit: 2})
	if err != nil {
		t.Fatal(err)
	}
	proxies, err := clientaddr.ParseProxies([]string{"127.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(proxies.Wrap(h))
	defer srv.Close()
	post := func(from string) int {
		req, _ := http.NewRequest("POST", srv.URL+PathPrefix+"nobody", strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Forwarded-For", from)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for range 2 {
		if code := post("203.0.113.5"); code != 404 {
			t.Fatalf("within the limit: %d", code)
		}
	}
	if code := post("203.0.113.5"); code != 429 {
		t.Errorf("the same reporter a third time: %d, want 429", code)
	}
	if code := post("203.0.113.6"); code != 404 {
		t.Errorf("another reporter behind the proxy: %d, want 404", code)
	}
}

// TestNewNeedsIngestAndStore ensures a handler is not built half
// configured.
func TestNewNeedsIngestAndStore(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Fatal("New without Ingest and Store succeeded")
	}
}
