package egress_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/internal/dnstest"
	"github.com/dmarcd/dmarcd/internal/egress"
)

// server is an HTTPS server on loopback that counts the connections it
// gets, so a test can tell a refusal before dialling from one after.
type server struct {
	*httptest.Server
	conns atomic.Int32
}

func newServer(t *testing.T, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{Server: httptest.NewUnstartedServer(h)}
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are expected
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

// pool trusts the server's certificate, as a CA file would.
func (s *server) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(s.Certificate())
	return p
}

func (s *server) port() string {
	u, _ := url.Parse(s.URL)
	return u.Port()
}

// TestGet ensures Get returns the status, type and body of an answer under
// the size limit, refuses a longer body, answers a redirect with the 3xx
// rather than following it, and refuses URLs the policy refuses before
// dialling anything.
func TestGet(t *testing.T) {
	var followed atomic.Bool
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/policy":
			if r.Header.Get("User-Agent") != egress.UserAgent {
				http.Error(w, "user agent "+r.Header.Get("User-Agent"), http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "version: STSv1\n")
		case "/moved":
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		case "/elsewhere":
			followed.Store(true)
		}
	})
	c := egress.NewClient(mustResolver(t, dnstest.Start(t)), egress.Policy{AllowPrivate: true, RootCAs: s.pool()})
	ctx := context.Background()
	status, ctype, body, err := c.Get(ctx, s.URL+"/policy", 100)
	if err != nil || status != 200 || ctype != "text/plain" || string(body) != "version: STSv1\n" {
		t.Fatalf("Get: %d %q %q %v", status, ctype, body, err)
	}
	if _, _, _, err := c.Get(ctx, s.URL+"/policy", 5); err == nil || !strings.Contains(err.Error(), "larger than allowed") {
		t.Errorf("Get over the limit: %v, want an error", err)
	}
	if status, _, _, err := c.Get(ctx, s.URL+"/moved", 100); err != nil || status != http.StatusFound || followed.Load() {
		t.Errorf("Get of a redirect: %d %v, followed %v; want the 302, not followed", status, err, followed.Load())
	}
	before := s.conns.Load()
	for _, u := range []string{strings.Replace(s.URL, "https:", "http:", 1), "https://2130706433:" + s.port() + "/", "https://u:p@" + strings.TrimPrefix(s.URL, "https://")} {
		if _, _, _, err := c.Get(ctx, u, 100); err == nil {
			t.Errorf("Get(%s) passed, want a refusal", u)
		}
	}
	if n := s.conns.Load(); n != before {
		t.Errorf("refused URLs made %d connections", n-before)
	}
}

// TestLoopbackRefusedWithoutAllowPrivate ensures a loopback URL is refused
// by validation and, if requested anyway, by the dial-time check, so the
// server never sees a connection.
func TestLoopbackRefusedWithoutAllowPrivate(t *testing.T) {
	s := newServer(t, func(http.ResponseWriter, *http.Request) {})
	r := mustResolver(t, dnstest.Start(t))
	p := egress.Policy{RootCAs: s.pool()}
	if err := egress.ValidateURL(context.Background(), s.URL, r, p); !errors.Is(err, egress.ErrUnsafeURL) {
		t.Fatalf("ValidateURL(%s) = %v, want ErrUnsafeURL", s.URL, err)
	}
	_, _, _, err := egress.NewClient(r, p).Get(context.Background(), s.URL, 100)
	if err == nil || !strings.Contains(err.Error(), "refused by policy: 127.0.0.1 is a loopback address") {
		t.Errorf("Get: %v; want a refusal naming the address", err)
	}
	if n := s.conns.Load(); n != 0 {
		t.Errorf("the server got %d connections", n)
	}
}

// TestDNSRebindingRefusedAtDial ensures a host that resolved to a public
// address when validated and to loopback when fetched is refused at
// connection time, while the same resolution path reaches the server when
// private addresses are allowed.
func TestDNSRebindingRefusedAtDial(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	dns := dnstest.Start(t)
	r := mustResolver(t, dns)
	// httptest certificates are issued for example.com, so TLS checks the
	// name that was resolved.
	u := "https://example.com:" + s.port() + "/"
	strict := egress.NewClient(r, egress.Policy{RootCAs: s.pool()})

	dns.SetA("example.com", publicIP)
	if err := egress.ValidateURL(context.Background(), u, r, egress.Policy{}); err != nil {
		t.Fatalf("validation with a public address: %v", err)
	}
	dns.SetA("example.com", "127.0.0.1") // the rebinding
	if _, _, _, err := strict.Get(context.Background(), u, 100); err == nil || !strings.Contains(err.Error(), "refused by policy: 127.0.0.1 is a loopback address") {
		t.Fatalf("rebound fetch: %v; want a dial-time refusal", err)
	}
	if n := s.conns.Load(); n != 0 {
		t.Fatalf("the server got %d connections", n)
	}
	if dns.Queries("example.com") < 2 {
		t.Errorf("the fetch did not resolve the host again (%d queries)", dns.Queries("example.com"))
	}

	dns.SetA("example.com", "::1", "127.0.0.1") // both refused, both tried
	if _, _, _, err := strict.Get(context.Background(), u, 100); err == nil || !strings.Contains(err.Error(), "loopback") || s.conns.Load() != 0 {
		t.Fatalf("two loopback addresses: %v, %d connections", err, s.conns.Load())
	}

	allowing := egress.NewClient(r, egress.Policy{AllowPrivate: true, RootCAs: s.pool()})
	dns.SetA("example.com", "127.0.0.1")
	if _, _, body, err := allowing.Get(context.Background(), u, 100); err != nil || string(body) != "ok" || s.conns.Load() == 0 {
		t.Errorf("with AllowPrivate the same host: %q %v", body, err)
	}
}

// TestNewDialer ensures the dialer other clients use (IMAP, a mail relay)
// holds plain TCP to the policy: a refusal RefusedReason explains, a name
// that does not resolve UnresolvedHost names, and with AllowPrivate the
// connection made.
func TestNewDialer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	dns := dnstest.Start(t)
	dns.SetA("mail.example.com", "127.0.0.1")
	r := mustResolver(t, dns)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ctx := context.Background()

	_, err = egress.NewDialer(r, egress.Policy{}, time.Second)(ctx, "tcp", net.JoinHostPort("mail.example.com", port))
	if why, ok := egress.RefusedReason(err); !ok || why != "127.0.0.1 is a loopback address" {
		t.Errorf("strict dial: %v; RefusedReason %q %v", err, why, ok)
	}
	_, err = egress.NewDialer(r, egress.Policy{AllowPrivate: true}, time.Second)(ctx, "tcp", net.JoinHostPort("nowhere.example.com", port))
	if host, ok := egress.UnresolvedHost(err); !ok || host != "nowhere.example.com" {
		t.Errorf("unresolvable: %v; UnresolvedHost %q %v", err, host, ok)
	}
	if _, ok := egress.RefusedReason(err); ok {
		t.Errorf("a failed lookup reads as a refusal: %v", err)
	}
	if accepted.Load() != 0 {
		t.Fatalf("%d connections before any was allowed", accepted.Load())
	}
	conn, err := egress.NewDialer(r, egress.Policy{AllowPrivate: true}, time.Second)(ctx, "tcp", net.JoinHostPort("mail.example.com", port))
	if err != nil {
		t.Fatalf("dial with AllowPrivate: %v", err)
	}
	conn.Close()
	conn, err = egress.NewDialer(egress.SystemResolver{}, egress.Policy{AllowPrivate: true}, 0)(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial of an address with the system resolver: %v", err)
	}
	conn.Close()
	for deadline := time.Now().Add(5 * time.Second); accepted.Load() < 2 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if accepted.Load() != 2 {
		t.Errorf("%d connections accepted, want 2", accepted.Load())
	}
}

// TestLoadCAFile ensures a CA file is trusted on top of the system's
// authorities, and that a missing file or one without a certificate is a
// clear error.
func TestLoadCAFile(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	dir := t.TempDir()
	good := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(good, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := egress.LoadCAFile(filepath.Join(dir, "missing.pem")); err == nil || !strings.Contains(err.Error(), "missing.pem") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := egress.LoadCAFile(junk); err == nil || !strings.Contains(err.Error(), "holds no PEM certificate") {
		t.Errorf("file without a certificate: %v", err)
	}
	pool, err := egress.LoadCAFile(good)
	if err != nil {
		t.Fatal(err)
	}
	r := mustResolver(t, dnstest.Start(t))
	if _, _, _, err := egress.NewClient(r, egress.Policy{AllowPrivate: true}).Get(context.Background(), s.URL, 10); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without the CA file: %v, want an untrusted certificate", err)
	}
	if _, _, body, err := egress.NewClient(r, egress.Policy{AllowPrivate: true, RootCAs: pool}).Get(context.Background(), s.URL, 10); err != nil || string(body) != "ok" {
		t.Errorf("with the CA file: %q %v", body, err)
	}
}
