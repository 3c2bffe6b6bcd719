package e2e

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/internal/dnstest"
)

// readmeSection returns the ```sh code blocks of the README section whose
// heading is title, in order.
func readmeSection(t *testing.T, title string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	start := strings.Index(s, "\n## "+title+"\n")
	if start < 0 {
		t.Fatalf("README has no section %q", title)
	}
	s = s[start+len(title)+5:]
	if end := strings.Index(s, "\n## "); end >= 0 {
		s = s[:end]
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)\n```sh\n(.*?)\n```\n").FindAllStringSubmatch(s, -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestReadmeTour runs the README's two-minute tour as written, block by
// block in one shell, against the built binary: the only changes are the
// binary copied instead of built, a free port instead of 8080 (and for
// SMTP) and the test DNS server. It fails when a block fails (set -e,
// curl failing on HTTP errors) or the report does not show up.
func TestReadmeTour(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("the tour needs curl")
	}
	blocks := readmeSection(t, "Two-minute tour")
	if len(blocks) < 4 {
		t.Fatalf("the tour has %d sh blocks", len(blocks))
	}
	dir := t.TempDir()
	sample, err := os.ReadFile(filepath.Join("..", "testdata", "tour", "report.xml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "testdata", "tour"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "testdata", "tour", "report.xml"), sample, 0o644); err != nil {
		t.Fatal(err)
	}
	api := freeAddr(t)
	ns := dnstest.Start(t)

	var script strings.Builder
	// curl fails on HTTP errors but still shows the error body.
	// A server the tour leaves running (a block failed before kill %1) is
	// stopped on exit.
	script.WriteString("set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" +
		"curl() { case \" $* \" in *\" -sf \"*) command curl \"$@\";; *) command curl --fail-with-body \"$@\";; esac; }\n")
	for i, b := range blocks {
		b = strings.ReplaceAll(b, "go build -o dmarcd .", "cp '"+binary+"' dmarcd")
		b = strings.ReplaceAll(b, "127.0.0.1:8080", api)
		script.WriteString("echo '### block " + string(rune('1'+i)) + "'\n" + b + "\n")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "DMARCD_LISTEN="+api, "DMARCD_SMTP_LISTEN=127.0.0.1:0", "DMARCD_DNS_SERVER="+ns.Addr, "DMARCD_DNS_TIMEOUT=300ms")
	out, err := cmd.CombinedOutput()
	log, _ := os.ReadFile(filepath.Join(dir, "tour.log"))
	if err != nil {
		t.Fatalf("the tour failed: %v\nscript:\n%s\noutput:\n%s\nserver log:\n%s", err, script.String(), out, log)
	}
	for _, want := range []string{
		`"reporting_email"`,                      // the domain was registered
		"imported",                               // the import summary
		"1 of 1 reports of organization default", // reports list
		`"org_name":"google.com"`,                // the API lists it
		`"total":1`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the tour's output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(log), "level=ERROR") {
		t.Errorf("the server logged an error:\n%s", log)
	}
	if _, err := os.Stat(filepath.Join(dir, "tour")); !os.IsNotExist(err) {
		t.Errorf("the last block did not clean up: %v", err)
	}
}
