package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/internal/dnstest"
)

// TestCheckTLSCommand ensures check-tls prints the records it finds, as
// text and as JSON, against a loopback DNS server, and that a bad domain
// is a usage error.
func TestCheckTLSCommand(t *testing.T) {
	s := dnstest.Start(t)
	s.AddTXT("_smtp._tls.example.com", "v=TLSRPTv1; rua=mailto:tls@example.com")
	code, out, errOut := run(t, nil, "check-tls", "--dns-server", s.Addr, "example.com")
	if code != 0 || !strings.Contains(out, "rua:     mailto:tls@example.com") || !strings.Contains(out, "warning: no MTA-STS record") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, _ = run(t, nil, "check-tls", "--json", "--dns-server", s.Addr, "example.com")
	var res struct {
		Domain string `json:"domain"`
		TLSRPT struct {
			Found bool     `json:"found"`
			RUA   []string `json:"rua"`
		} `json:"tlsrpt"`
	}
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || !res.TLSRPT.Found || res.Domain != "example.com" {
		t.Fatalf("exit %d, %v, %q", code, err, out)
	}
	if code, _, errOut := run(t, nil, "check-tls", "not a domain"); code != 2 || !strings.Contains(errOut, "domain") {
		t.Errorf("bad domain: exit %d, %q", code, errOut)
	}
}
