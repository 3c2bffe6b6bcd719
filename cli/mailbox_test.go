package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/internal/imaptest"
	"github.com/dmarcd/dmarcd/internal/secret"
)

func runStdin(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := execute(context.Background(), args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestMailboxOffline adds, lists and removes a mailbox without a server:
// the login is tried by the command, the password is never an argument
// and is stored sealed with the data directory's key.
func TestMailboxOffline(t *testing.T) {
	dir := t.TempDir()
	dd := "--data-dir=" + dir
	db, err := (&globalOptions{DataDir: dir}).openStore(false)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if code, _, errOut := run(t, nil, dd, "org", "create", "acme"); code != 0 {
		t.Fatal(errOut)
	}
	srv := imaptest.NewServer(t)
	certFile, _ := srv.Cert.WriteFiles(t, t.TempDir())
	passFile := filepath.Join(t.TempDir(), "pass")
	if err := os.WriteFile(passFile, []byte(imaptest.Pass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{dd, "mailbox", "add", "--org", "acme", "--host", "127.0.0.1", "--port", strconv.Itoa(srv.Port),
		"--username", imaptest.User, "--imap-ca-file", certFile, "--imap-allow-private"}

	if code, _, errOut := runStdin(t, "wrong\n", base...); code != 1 || !strings.Contains(errOut, "AUTHENTICATIONFAILED") {
		t.Errorf("wrong password: %d %s", code, errOut)
	}
	if code, _, errOut := runStdin(t, "", base...); code != 2 || !strings.Contains(errOut, "password is empty") {
		t.Errorf("no password: %d %s", code, errOut)
	}
	if code, _, errOut := runStdin(t, imaptest.Pass+"\n", base[:len(base)-1]...); code != 1 || !strings.Contains(errOut, "imap-allow-private") {
		t.Errorf("without --imap-allow-private a loopback host is refused: %d %s", code, errOut)
	}
	if code, _, errOut := runStdin(t, "", append(base, "--password", "x")...); code != 2 || !strings.Contains(errOut, "unknown flag") {
		t.Errorf("--password must not exist: %d %s", code, errOut)
	}
	code, out, errOut := runStdin(t, "", append(base, "--password-file", passFile, "--json")...)
	var m struct{ ID, Host, ArchiveFolder string }
	if code != 0 || json.Unmarshal([]byte(out), &m) != nil || m.ID == "" {
		t.Fatalf("add: %d %s %s", code, out, errOut)
	}
	if strings.Contains(out, imaptest.Pass) {
		t.Error("the password is printed")
	}
	if code, _, errOut := runStdin(t, imaptest.Pass+"\n", base...); code != 0 {
		t.Errorf("password on stdin: %d %s", code, errOut)
	}
	if _, err := os.Stat(secret.KeyPath(dir)); err != nil {
		t.Errorf("no secret key created: %v", err)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "dmarcd.db"))
	if bytes.Contains(raw, []byte(imaptest.Pass)) {
		t.Error("the database holds the password in clear")
	}

	code, out, _ = run(t, nil, dd, "mailbox", "list", "--org", "acme")
	if code != 0 || !strings.Contains(out, m.ID) || !strings.Contains(out, "127.0.0.1") || strings.Count(out, "\n") != 3 {
		t.Errorf("list:\n%s", out)
	}
	if code, _, errOut := run(t, nil, dd, "mailbox", "poll", "--org", "acme", m.ID); code != 1 || !strings.Contains(errOut, "running server") {
		t.Errorf("offline poll: %d %s", code, errOut)
	}
	if code, _, errOut := run(t, nil, dd, "mailbox", "remove", "--org", "nobody", m.ID); code != 1 || !strings.Contains(errOut, "not found") {
		t.Errorf("remove with another org: %d %s", code, errOut)
	}
	if code, out, errOut := run(t, nil, dd, "mailbox", "remove", "--org", "acme", m.ID); code != 0 || !strings.Contains(out, "Removed") {
		t.Errorf("remove: %d %s %s", code, out, errOut)
	}
	if code, _, errOut := run(t, nil, dd, "mailbox", "remove", "--org", "acme", m.ID); code != 1 || !strings.Contains(errOut, "not found") {
		t.Errorf("remove again: %d %s", code, errOut)
	}
}
