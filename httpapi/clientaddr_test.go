package httpapi

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/internal/clientaddr"
	"github.com/dmarcd/dmarcd/store"
)

// syncBuffer is a log sink the server's goroutines and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRevokedKeyKeepsItsFailuresToItself ensures a client still sending a
// revoked key gets 401s counted against that key, not against its
// address (issue 24 item 10): the other keys from the address keep
// working, the revoked key is slowed down on its own past the limit, the
// log says once a minute that a revoked key is still in use, and unknown
// keys still count against the address.
func TestRevokedKeyKeepsItsFailuresToItself(t *testing.T) {
	e := newEnv(t, 1000)
	var logs syncBuffer
	e.api.log = slog.New(slog.NewJSONHandler(&logs, nil))
	e.withApp(func(c *app.Config) { c.Logger = e.api.log })
	k, revoked, err := e.db.CreateAPIKey(e.orgA.ID, "old-ci", store.ScopeFull)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.RevokeAPIKey(k.ID); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		r := e.do("GET", "/api/v1/domains", revoked, nil)
		if r.status != 401 || r.errorCode(t) != "unauthorized" {
			t.Fatalf("revoked key, request %d: %d %s", i+1, r.status, r.body)
		}
	}
	if r := e.do("GET", "/api/v1/domains", e.keyA, nil); r.status != 200 {
		t.Fatalf("another key from the same address after 30 revoked-key failures: %d %s", r.status, r.body)
	}
	r := e.do("GET", "/api/v1/domains", revoked, nil)
	if r.status != 429 || r.header.Get("Retry-After") == "" {
		t.Errorf("revoked key past its own limit: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/api/v1/domains", e.readA, nil); r.status != 200 {
		t.Errorf("another key while the revoked one is slowed down: %d", r.status)
	}
	if n := strings.Count(logs.String(), "revoked API key still in use"); n != 1 {
		t.Errorf("%d log lines about the revoked key in one minute, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), k.ID) || strings.Contains(logs.String(), revoked) {
		t.Errorf("the log line does not name the key's id, or shows the key:\n%s", logs.String())
	}
	e.clock.Advance(time.Minute)
	if r := e.do("GET", "/api/v1/domains", revoked, nil); r.status != 401 {
		t.Errorf("revoked key after the minute: %d", r.status)
	}
	// Unknown keys are guesses: they count against the address.
	for i := range 30 {
		if r := e.do("GET", "/api/v1/domains", fmt.Sprintf("dmk_%032x", i), nil); r.status != 401 {
			t.Fatalf("unknown key %d: %d", i+1, r.status)
		}
	}
	if r := e.do("GET", "/api/v1/domains", e.keyA, nil); r.status != 429 {
		t.Errorf("after 30 unknown keys: %d, want 429", r.status)
	}
}

// TestTrustedProxyClientAddress ensures that behind a trusted proxy the
// failed-authentication limit and the request log use the address the
// proxy forwarded, so one client's failures lock out only that client,
// and that X-Forwarded-For from an untrusted peer changes nothing.
func TestTrustedProxyClientAddress(t *testing.T) {
	e := newEnv(t, 1000)
	var logs syncBuffer
	e.api.log = slog.New(slog.NewJSONHandler(&logs, nil))
	proxies, err := clientaddr.ParseProxies([]string{"127.0.0.0/8", "::1"})
	if err != nil {
		t.Fatal(err)
	}
	e.srv.Close()
	e.srv = httptest.NewServer(proxies.Wrap(e.api))
	t.Cleanup(e.srv.Close)

	for i := range 30 {
		if r := e.do("GET", "/api/v1/domains", fmt.Sprintf("dmk_%032x", i), nil, "X-Forwarded-For", "198.51.100.1, 203.0.113.5"); r.status != 401 {
			t.Fatalf("failure %d: %d", i+1, r.status)
		}
	}
	if r := e.do("GET", "/api/v1/domains", e.keyA, nil, "X-Forwarded-For", "203.0.113.5"); r.status != 429 {
		t.Errorf("the failing client itself: %d, want 429", r.status)
	}
	if r := e.do("GET", "/api/v1/domains", e.keyA, nil, "X-Forwarded-For", "203.0.113.6"); r.status != 200 {
		t.Errorf("another client behind the same proxy: %d, want 200", r.status)
	}
	// A forged left part does not move the failing client elsewhere.
	if r := e.do("GET", "/api/v1/domains", e.keyA, nil, "X-Forwarded-For", "203.0.113.99, 203.0.113.5"); r.status != 429 {
		t.Errorf("the failing client with a forged hop in front: %d, want 429", r.status)
	}
	if !strings.Contains(logs.String(), `"remote":"203.0.113.6"`) {
		t.Errorf("the request log does not name the forwarded client:\n%s", logs.String())
	}

	// Without trusted proxies the header is the client's word: ignored.
	e2 := newEnv(t, 1000)
	for i := range 30 {
		e2.do("GET", "/api/v1/domains", fmt.Sprintf("dmk_%032x", i), nil, "X-Forwarded-For", fmt.Sprintf("203.0.113.%d", i))
	}
	if r := e2.do("GET", "/api/v1/domains", e2.keyA, nil, "X-Forwarded-For", "203.0.113.200"); r.status != 429 {
		t.Errorf("untrusted X-Forwarded-For escaped the limit: %d", r.status)
	}
}
