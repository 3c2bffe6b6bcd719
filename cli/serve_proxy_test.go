package cli

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// parseServe parses serve's flags (and DMARCD_* variables) as serve does,
// then checks them.
func parseServe(t *testing.T, args ...string) (serveOptions, error) {
	t.Helper()
	o, _, err := parseServeOutput(t, args...)
	return o, err
}

// parseServeOutput is parseServe also returning what the parse printed
// (warnings of deprecated flags).
func parseServeOutput(t *testing.T, args ...string) (serveOptions, string, error) {
	t.Helper()
	var o serveOptions
	cmd := &cobra.Command{
		Use:               "serve",
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error { return bindEnv(cmd) },
		RunE:              func(*cobra.Command, []string) error { return nil },
	}
	o.AddFlags(cmd)
	cmd.SetArgs(args)
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	if err := cmd.Execute(); err != nil {
		return o, out.String(), err
	}
	return o, out.String(), o.validate()
}

// TestTrustedProxyFlag ensures --trusted-proxy (and DMARCD_TRUSTED_PROXY)
// takes CIDRs and addresses, refuses anything else naming the flag, and
// that serve's API handler then limits failed authentications by the
// forwarded client address (issue 24 item 10).
func TestTrustedProxyFlag(t *testing.T) {
	dir := t.TempDir()
	code, _, errOut := run(t, nil, "serve", "--data-dir", dir, "--reporting-domain", "reports.test",
		"--listen", "127.0.0.1:0", "--trusted-proxy", "proxy.example")
	if code != 2 || !strings.Contains(errOut, "--trusted-proxy") || !strings.Contains(errOut, "proxy.example") {
		t.Errorf("a host name: exit %d, stderr %q; want exit 2 naming the flag and the value", code, errOut)
	}
	t.Setenv("DMARCD_TRUSTED_PROXY", "10.0.0.0/8, 127.0.0.1")
	o, err := parseServe(t, "--reporting-domain", "reports.test", "--listen", "127.0.0.1:0", "--smtp-listen", "")
	if err != nil || o.proxies.String() != "10.0.0.0/8,127.0.0.1/32" {
		t.Fatalf("from the environment: %q, %v", o.proxies.String(), err)
	}

	var out, logs bytes.Buffer
	g := &globalOptions{DataDir: dir, stdout: &out, stderr: &logs}
	s, err := newServer(g, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	call := func(from, key string) int {
		req := httptest.NewRequest("GET", "/api/v1/domains", nil)
		req.RemoteAddr = "127.0.0.1:40000"
		req.Header.Set("X-Forwarded-For", from)
		req.Header.Set("X-API-Key", key)
		rec := httptest.NewRecorder()
		s.apiSrv.Handler.ServeHTTP(rec, req)
		return rec.Code
	}
	for i := range 30 {
		if code := call("203.0.113.5", fmt.Sprintf("dmk_%032x", i)); code != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d", i+1, code)
		}
	}
	if code := call("203.0.113.5", fmt.Sprintf("dmk_%032x", 99)); code != http.StatusTooManyRequests {
		t.Errorf("the failing client: %d, want 429", code)
	}
	if code := call("203.0.113.6", fmt.Sprintf("dmk_%032x", 99)); code != http.StatusUnauthorized {
		t.Errorf("another client behind the proxy: %d, want 401", code)
	}
	// The wrapper is around the one mux: the web interface's sign-in
	// sees the forwarded client too, and shares the limit.
	signIn := func(from string) int {
		req := httptest.NewRequest("POST", "/login", strings.NewReader(url.Values{"key": {"wrong"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.RemoteAddr = "127.0.0.1:40000"
		req.Header.Set("X-Forwarded-For", from)
		rec := httptest.NewRecorder()
		s.apiSrv.Handler.ServeHTTP(rec, req)
		return rec.Code
	}
	if code := signIn("203.0.113.5"); code != http.StatusTooManyRequests {
		t.Errorf("sign-in of the failing client: %d, want 429", code)
	}
	if code := signIn("203.0.113.6"); code != http.StatusUnauthorized {
		t.Errorf("sign-in of another client behind the proxy: %d, want 401", code)
	}
}
