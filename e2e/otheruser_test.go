package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestCLIAsAnotherUser ensures a command run by another user than the
// server's says that a server runs and that its socket needs its user,
// instead of a bare "permission denied".
func TestCLIAsAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the CLI as another user (uid 65534)")
	}
	// A folder the other user may enter, with a copy of the binary; serve
	// makes the data directory inside it (mode 0700).
	dir, err := os.MkdirTemp("", "dmarcd-otheruser-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) }) // after the server stopped (cleanups run last first)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "dmarcd")
	raw, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, raw, 0o755); err != nil {
		t.Fatal(err)
	}
	s := StartServer(t, Options{DataDir: filepath.Join(dir, "data")})
	cmd := exec.Command(bin, "keys", "list", "--org", "default", "--data-dir", s.DataDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("exit %d (%v), want 1:\n%s", code, err, out)
	}
	for _, want := range []string{"a dmarcd server may be running", "run this command as that user", "sudo -u root"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
