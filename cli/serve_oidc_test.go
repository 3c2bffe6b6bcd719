package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/internal/egress"
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
