package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestCPUProfileWrittenOnEveryExit ensures main's deferred work runs
// whatever the exit code: DMARCD_CPUPROFILE gets a complete profile (a
// gzip stream that pprof closed) from a command that succeeds and from
// one that fails.
func TestCPUProfileWrittenOnEveryExit(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		code int
		args []string
	}{
		{"ok", 0, []string{"version"}},
		{"failed", 1, []string{"--data-dir", filepath.Join(dir, "no-such-dir"), "org", "list"}},
		{"usage", 2, []string{"org", "list", "--no-such-flag"}},
	} {
		prof := filepath.Join(dir, tc.name+".pprof")
		res := RunCLI(t, []string{"DMARCD_CPUPROFILE=" + prof}, tc.args...)
		if res.Code != tc.code {
			t.Errorf("%s: exit %d, want %d\n%s", tc.name, res.Code, tc.code, res.Stderr)
		}
		b, err := os.ReadFile(prof)
		if err != nil || len(b) < 20 || !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
			t.Errorf("%s: profile %d bytes (%v), want a gzip-compressed profile", tc.name, len(b), err)
		}
	}
}
