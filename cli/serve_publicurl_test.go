package cli

import (
	"testing"

	"github.com/spf13/cobra"
)

// TestPublicURLFlag ensures --public-url takes an http(s) URL, drops its
// trailing slash, and refuses anything else with a usage error, as it
// refuses a --tlsrpt-rate-limit under 1.
func TestPublicURLFlag(t *testing.T) {
	parse := func(args ...string) (*serveOptions, error) {
		var o serveOptions
		cmd := &cobra.Command{Use: "serve", RunE: func(*cobra.Command, []string) error { return nil }}
		o.AddFlags(cmd)
		if err := cmd.ParseFlags(args); err != nil {
			return nil, err
		}
		return &o, o.validate()
	}
	for in, want := range map[string]string{
		"":                             "",
		"https://dmarc.example.net":    "https://dmarc.example.net",
		"https://dmarc.example.net/":   "https://dmarc.example.net",
		"https://example.net/dmarcd//": "https://example.net/dmarcd",
		"http://127.0.0.1:8080":        "http://127.0.0.1:8080",
	} {
		o, err := parse("--public-url", in)
		if err != nil || o.PublicURL != want {
			t.Errorf("%q: %q, %v; want %q", in, o.PublicURL, err, want)
		}
	}
	for _, bad := range []string{"dmarc.example.net", "ftp://x.example", "https://", "https://x.example/?a=b", "https://x.example/#f", "https://u:p@x.example", "://"} {
		if _, err := parse("--public-url", bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := parse("--tlsrpt-rate-limit", "0"); err == nil {
		t.Error("--tlsrpt-rate-limit 0 accepted")
	}
}
