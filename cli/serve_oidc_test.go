package cli

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/internal/egress"
	"github.com/dmarcd/dmarcd/internal/oidctest"
)

// TestOIDCFlags ensures the --oidc-* flags are checked at start with a
// message naming the flag, that the secret comes from its file (trimmed)
// and appears in no message, and that the issuer is held to the egress
// rules (https, no loopback unless --oidc-allow-private).
func TestOIDCFlags(t *testing.T) {
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "secret")
	if err := os.WriteFile(secretFile, []byte("  very-secret-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := oidcOptions{Issuer: "https://auth.example.net/realms/x", ClientID: "dmarcd", ClientSecretFile: secretFile}
	for name, c := range map[string]struct {
		o      oidcOptions
		public string
		want   string
	}{
		"only without issuer": {oidcOptions{Only: true}, "https://d.example", "need --oidc-issuer"},
		"http issuer":         {oidcOptions{Issuer: "http://auth.example.net", ClientID: "x", ClientSecretFile: secretFile}, "https://d.example", "https"},
		"loopback issuer":     {oidcOptions{Issuer: "https://localhost:9000", ClientID: "x", ClientSecretFile: secretFile}, "https://d.example", "loopback"},
		"no client id":        {oidcOptions{Issuer: good.Issuer, ClientSecretFile: secretFile}, "https://d.example", "--oidc-client-id"},
		"no public url":       {good, "", "--public-url"},
		"missing secret file": {oidcOptions{Issuer: good.Issuer, ClientID: "x", ClientSecretFile: filepath.Join(dir, "nope")}, "https://d.example", "--oidc-client-secret-file"},
		"empty secret file":   {oidcOptions{Issuer: good.Issuer, ClientID: "x", ClientSecretFile: empty}, "https://d.example", "is empty"},
		"bad CA file":         {oidcOptions{Issuer: good.Issuer, ClientID: "x", ClientSecretFile: secretFile, CAFile: secretFile}, "https://d.example", "--oidc-ca-file"},
	} {
		_, err := c.o.config(c.public, egress.SystemResolver{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "very-secret-value") {
			t.Errorf("%s: the error shows the secret", name)
		}
	}
	if cfg, err := (&oidcOptions{}).config("", egress.SystemResolver{}); cfg != nil || err != nil {
		t.Errorf("no flags: %v %v", cfg, err)
	}
	cfg, err := good.config("https://d.example", egress.SystemResolver{})
	if err != nil || cfg.ClientSecret != "very-secret-value" || cfg.HTTPClient == nil || cfg.Issuer != good.Issuer {
		t.Fatalf("good flags: %+v %v", cfg, err)
	}
	local := good
	local.Issuer, local.AllowPrivate = "https://127.0.0.1:9443", true
	if _, err := local.config("https://d.example", egress.SystemResolver{}); err != nil {
		t.Errorf("--oidc-allow-private with a loopback issuer: %v", err)
	}
}

// TestServeWithOIDC builds serve with --oidc-* against a real provider on
// loopback: discovery runs at start and says so with the redirect URL,
// and the sign-in page sends the browser to the provider's authorization
// endpoint with PKCE; an unreachable provider is said in the log and does
// not stop the server.
func TestServeWithOIDC(t *testing.T) {
	prov := oidctest.Start(t)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte(prov.ClientSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	build := func(issuer string) (*server, string) {
		o, err := parseServe(t, "--reporting-domain", "reports.test", "--listen", "127.0.0.1:0", "--smtp-listen", "",
			"--public-url", "https://dmarc.example.net", "--oidc-issuer", issuer, "--oidc-client-id", prov.ClientID,
			"--oidc-client-secret-file", secret, "--oidc-allow-private", "--oidc-ca-file", prov.CAFile)
		if err != nil {
			t.Fatal(err)
		}
		var out, logs bytes.Buffer
		s, err := newServer(&globalOptions{DataDir: t.TempDir(), stdout: &out, stderr: &logs}, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.close)
		return s, logs.String()
	}
	s, logs := build(prov.Issuer)
	if !strings.Contains(logs, "single sign-on ready") || !strings.Contains(logs, "https://dmarc.example.net/login/oidc/callback") ||
		strings.Contains(logs, prov.ClientSecret) {
		t.Errorf("start-up log: %s", logs)
	}
	rec := httptest.NewRecorder()
	s.apiSrv.Handler.ServeHTTP(rec, httptest.NewRequest("GET", "/auth/oidc", nil))
	loc, _ := url.Parse(rec.Header().Get("Location"))
	if rec.Code != http.StatusFound || !strings.HasPrefix(loc.String(), prov.Issuer) ||
		loc.Query().Get("redirect_uri") != "https://dmarc.example.net/login/oidc/callback" || loc.Query().Get("code_challenge") == "" {
		t.Errorf("GET /auth/oidc: %d %s", rec.Code, loc)
	}

	_, logs = build("https://127.0.0.1:1/")
	if !strings.Contains(logs, "single sign-on unavailable") {
		t.Errorf("an unreachable provider at start: %s", logs)
	}
}
