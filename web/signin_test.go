package web_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/dmarcd/dmarcd/internal/clientaddr"
	"github.com/dmarcd/dmarcd/internal/egress"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
	"github.com/dmarcd/dmarcd/web"
)

// logSink is a log the server's goroutines and the test share.
type logSink struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logSink) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// newLoggedEnv is newEnv with the web interface logging to the returned sink.
func newLoggedEnv(t *testing.T) (*env, *logSink) {
	var logs logSink
	e := newEnvUI(t, egress.Policy{}, nil, func(c *web.Config) { c.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	return e, &logs
}

// TestSignInWithRevokedKeyLocksOutNobody ensures sign-ins with a revoked
// key fail with the one message but count against that key, not the
// address (issue 24 item 10), and that sign-ins are logged: who signed in
// from where, and why a refused one was refused, never the key.
func TestSignInWithRevokedKeyLocksOutNobody(t *testing.T) {
	e, logs := newLoggedEnv(t)
	k, revoked := storetest.MustAPIKey(t, e.db, e.orgA.ID, store.ScopeFull)
	if _, err := e.db.RevokeAPIKey(k.ID); err != nil {
		t.Fatal(err)
	}
	for i := range 35 {
		if p := e.send("POST", "/login", "", url.Values{"key": {revoked}}); p.status != http.StatusUnauthorized {
			t.Fatalf("revoked key, sign-in %d: %d", i+1, p.status)
		}
	}
	e.signIn(e.readA)
	if p := e.send("GET", "/api/v1/domains", "", nil, "X-API-Key", e.fullA); p.status != http.StatusOK {
		t.Errorf("API after 35 revoked-key sign-ins: %d", p.status)
	}
	e.send("POST", "/login", "", url.Values{"key": {"dmk_" + strings.Repeat("0", 32)}})
	log := logs.String()
	for _, want := range []string{`"msg":"sign-in refused"`, `"reason":"revoked key"`, `"key_id":"` + k.ID + `"`,
		`"reason":"unknown key"`, `"msg":"signed in"`, `"remote":"127.0.0.1"`} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %s:\n%s", want, log)
		}
	}
	if strings.Contains(log, revoked) || strings.Contains(log, e.readA) {
		t.Errorf("a key is in the log:\n%s", log)
	}
}

// TestSignInBehindTrustedProxy ensures that behind a trusted proxy the
// failed-sign-in limit and the sign-in log use the forwarded client
// address: one client's failures lock out that client only.
func TestSignInBehindTrustedProxy(t *testing.T) {
	e, logs := newLoggedEnv(t)
	proxies, err := clientaddr.ParseProxies([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	h := e.srv.Config.Handler
	e.srv.Close()
	e.srv = httptest.NewServer(proxies.Wrap(h))
	t.Cleanup(e.srv.Close)
	for range 30 {
		e.send("POST", "/login", "", url.Values{"key": {"wrong"}}, "X-Forwarded-For", "203.0.113.5")
	}
	if p := e.send("POST", "/login", "", url.Values{"key": {e.fullA}}, "X-Forwarded-For", "203.0.113.5"); p.status != http.StatusTooManyRequests {
		t.Errorf("the failing client: %d, want 429", p.status)
	}
	if p := e.send("POST", "/login", "", url.Values{"key": {e.fullA}}, "X-Forwarded-For", "203.0.113.6"); p.status != http.StatusSeeOther {
		t.Errorf("another client behind the proxy: %d, want 303", p.status)
	}
	log := logs.String()
	if !strings.Contains(log, `"reason":"too many failed sign-ins"`) || !strings.Contains(log, `"remote":"203.0.113.6"`) {
		t.Errorf("the sign-in log does not name the forwarded clients:\n%s", log)
	}
}

// TestOriginMismatchSaysSo ensures a sign-in or form whose Origin is not
// the address dmarcd answers as (behind a proxy: --public-url, or the Host
// the proxy passed) is refused with a page that says so and names both
// origins, not "this form is stale", and that the log says why (issue 24
// item 13); a missing CSRF token is still the stale form.
func TestOriginMismatchSaysSo(t *testing.T) {
	var logs logSink
	e := newEnvUI(t, egress.Policy{}, nil, func(c *web.Config) {
		c.PublicURL = "https://dmarc.example.net"
		c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	p := e.send("POST", "/login", "", url.Values{"key": {e.fullA}}, "Origin", "https://dmarc.internal.example:8443")
	if p.status != http.StatusForbidden || strings.Contains(p.body, "stale") ||
		!strings.Contains(p.body, "https://dmarc.internal.example:8443") || !strings.Contains(p.body, "https://dmarc.example.net") ||
		!strings.Contains(p.body, "--public-url") {
		t.Errorf("sign-in from another origin: %d\n%s", p.status, p.body)
	}
	if log := logs.String(); !strings.Contains(log, `"msg":"sign-in refused"`) || !strings.Contains(log, `"reason":"origin does not match --public-url"`) ||
		!strings.Contains(log, `"origin":"https://dmarc.internal.example:8443"`) || !strings.Contains(log, `"expected":"https://dmarc.example.net"`) {
		t.Errorf("the log does not say why:\n%s", log)
	}
	cookie := e.signIn(e.fullA) // no Origin header: the CSRF token guards it
	token := e.csrf(cookie)
	p = e.send("POST", "/logout", cookie, url.Values{"csrf_token": {token}}, "Origin", "http://127.0.0.1:8080")
	if p.status != http.StatusForbidden || strings.Contains(p.body, "stale") || !strings.Contains(p.body, "--public-url") {
		t.Errorf("form from another origin: %d\n%s", p.status, p.body)
	}
	p = e.send("POST", "/logout", cookie, url.Values{"csrf_token": {"0"}})
	if p.status != http.StatusForbidden || !strings.Contains(p.body, "stale") {
		t.Errorf("form without its token: %d\n%s", p.status, p.body)
	}
	if !strings.Contains(logs.String(), `"reason":"stale form`) {
		t.Errorf("the log does not say a form was stale:\n%s", logs.String())
	}

	// Without --public-url a proxy that does not pass Host: the page says
	// what to set.
	e2, logs2 := newLoggedEnv(t)
	p = e2.send("POST", "/login", "", url.Values{"key": {e2.fullA}}, "Origin", "https://dmarc.example.net")
	if p.status != http.StatusForbidden || strings.Contains(p.body, "stale") || !strings.Contains(p.body, "https://dmarc.example.net") ||
		!strings.Contains(p.body, "--public-url") || !strings.Contains(p.body, "Host") {
		t.Errorf("sign-in through a proxy that rewrites Host: %d\n%s", p.status, p.body)
	}
	if !strings.Contains(logs2.String(), `"reason":"origin does not match the Host header"`) {
		t.Errorf("the log does not say why:\n%s", logs2.String())
	}
}
