package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// execute runs the command line args as main does, with stdin, and
// returns the exit code.
func execute(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := NewRootCommand(stdin, stdout, stderr)
	root.SetArgs(args)
	return ExitCode(root, root.ExecuteContext(ctx))
}

func run(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	var out, errOut bytes.Buffer
	code = execute(context.Background(), args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestEveryCommandHasHelp ensures every command parses its --help (which
// catches duplicate flags), and every runnable command explains itself
// with a Short line and an example or a long text.
func TestEveryCommandHasHelp(t *testing.T) {
	root := newRootCommand(&globalOptions{})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		path := c.CommandPath()
		t.Run(path, func(t *testing.T) {
			args := append(strings.Fields(path)[1:], "--help")
			code, out, errOut := run(t, nil, args...)
			if code != 0 || !strings.Contains(out, "Usage:") {
				t.Fatalf("%s --help: exit %d\n%s%s", path, code, out, errOut)
			}
			if c.Short == "" {
				t.Errorf("%s has no Short description", path)
			}
			if c.Runnable() && c.Example == "" && c.Long == "" {
				t.Errorf("%s has neither an example nor a long description", path)
			}
		})
		for _, sub := range c.Commands() {
			if !sub.Hidden && sub.Name() != "help" && sub.Name() != "completion" {
				walk(sub)
			}
		}
	}
	walk(root)
}

// TestUsageErrorsExitTwo ensures wrong calls exit 2 with a hint, and a
// failing command exits 1.
func TestUsageErrorsExitTwo(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"frobnicate"}, 2, "unknown command"},
		{[]string{"keys", "create", "--name", "x"}, 2, "--org"},
		{[]string{"org", "create"}, 2, "NAME"},
		{[]string{"org", "create", "x", "--plan", "gold", "--data-dir", dir}, 2, "plan"},
		{[]string{"serve", "--log-format", "xml", "--data-dir", dir}, 2, "log-format"},
		{[]string{"check-dmarc", "not a domain"}, 2, "domain"},
		{[]string{"keys", "list", "--org", "x", "--data-dir", dir}, 1, "no database"},
	} {
		code, _, errOut := run(t, nil, c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("dmarcd %s: exit %d, stderr %q; want exit %d mentioning %s", strings.Join(c.args, " "), code, errOut, c.code, c.want)
		}
	}
}

// TestEnvironmentFillsUnsetFlags ensures DMARCD_<FLAG> variables reach
// flags the command line left unset, lists split on commas, and the
// command line wins.
func TestEnvironmentFillsUnsetFlags(t *testing.T) {
	var got checkDMARCOptions
	cmd := newCheckDMARCCommand(&globalOptions{})
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return nil }
	t.Setenv("DMARCD_DNS_SERVER", "127.0.0.1:5353, 127.0.0.2:53")
	t.Setenv("DMARCD_TIMEOUT", "3s")
	cmd.SetArgs([]string{"--timeout", "7s", "example.com"})
	cmd.PreRunE = func(cmd *cobra.Command, _ []string) error {
		if err := bindEnv(cmd); err != nil {
			return err
		}
		got.DNSServers, _ = cmd.Flags().GetStringSlice("dns-server")
		got.Timeout, _ = cmd.Flags().GetDuration("timeout")
		return nil
	}
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got.DNSServers, "|") != "127.0.0.1:5353|127.0.0.2:53" {
		t.Errorf("dns-server from env = %q", got.DNSServers)
	}
	if got.Timeout.String() != "7s" {
		t.Errorf("timeout = %s, want the command line's 7s", got.Timeout)
	}

	t.Setenv("DMARCD_RATE_LIMIT", "lots")
	code, _, errOut := run(t, map[string]string{"DMARCD_DATA_DIR": t.TempDir()}, "serve")
	if code != 2 || !strings.Contains(errOut, "DMARCD_RATE_LIMIT") {
		t.Errorf("bad env value: exit %d, %q", code, errOut)
	}
}

// TestOfflineAdministration ensures org and key commands work on the file
// with no server running, with text and JSON output.
func TestOfflineAdministration(t *testing.T) {
	dir := t.TempDir()
	dd := "--data-dir=" + dir
	// Only serve and restore create a database; make one the way restore does.
	db, err := (&globalOptions{DataDir: dir}).openStore(false)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	if code, out, errOut := run(t, nil, dd, "org", "create", "acme", "--plan", "business"); code != 0 || !strings.Contains(out, `"acme"`) {
		t.Fatalf("org create: %d %s %s", code, out, errOut)
	}
	if code, _, errOut := run(t, nil, dd, "org", "create", "ACME"); code != 1 || !strings.Contains(errOut, "exists") && !strings.Contains(errOut, "taken") && !strings.Contains(errOut, "already") {
		t.Errorf("duplicate org: %d %s", code, errOut)
	}
	code, out, _ := run(t, nil, dd, "keys", "create", "--org", "acme", "--name", "ci", "--json")
	var created struct {
		ID, Prefix, Secret, Scope string
	}
	if code != 0 || json.Unmarshal([]byte(out), &created) != nil || !strings.HasPrefix(created.Secret, created.Prefix) || created.Scope != "full" {
		t.Fatalf("keys create --json: %d %s", code, out)
	}
	for i := 0; i < 4; i++ {
		run(t, nil, dd, "keys", "create", "--org", "acme", "--name", "more")
	}
	if code, _, errOut := run(t, nil, dd, "keys", "create", "--org", "acme", "--name", "sixth"); code != 1 || !strings.Contains(errOut, "5") {
		t.Errorf("6th active key: %d %s", code, errOut)
	}
	if code, out, _ := run(t, nil, dd, "keys", "revoke", created.ID); code != 0 || !strings.Contains(out, "Revoked") {
		t.Errorf("revoke: %d %s", code, out)
	}
	if code, _, errOut := run(t, nil, dd, "keys", "create", "--org", "acme", "--name", "sixth"); code != 0 {
		t.Errorf("a revoked key should free its slot: %d %s", code, errOut)
	}
	code, out, _ = run(t, nil, dd, "keys", "list", "--org", "acme")
	if code != 0 || !strings.Contains(out, "revoked") || strings.Contains(out, created.Secret) {
		t.Errorf("keys list:\n%s", out)
	}
	if code, out, _ := run(t, nil, dd, "org", "set-plan", "acme", "starter"); code != 0 || !strings.Contains(out, "starter") {
		t.Errorf("set-plan: %d %s", code, out)
	}
	if code, _, errOut := run(t, nil, dd, "keys", "list", "--org", "nobody"); code != 1 || !strings.Contains(errOut, "not found") {
		t.Errorf("unknown org: %d %s", code, errOut)
	}
	backup := filepath.Join(t.TempDir(), "b.db")
	if code, _, errOut := run(t, nil, dd, "backup", backup); code != 0 {
		t.Fatalf("offline backup: %s", errOut)
	}
	fresh := t.TempDir()
	if code, _, errOut := run(t, nil, "--data-dir", fresh, "restore", backup); code != 0 {
		t.Fatalf("restore: %s", errOut)
	}
	if code, out, _ := run(t, nil, "--data-dir", fresh, "org", "list", "--json"); code != 0 || !strings.Contains(out, `"acme"`) {
		t.Errorf("restored orgs: %s", out)
	}
	// Restoring over an existing database keeps the old one beside it.
	code, out, _ = run(t, nil, "--data-dir", fresh, "restore", backup)
	if code != 0 || !strings.Contains(out, "before-restore") {
		t.Errorf("second restore: %d %s", code, out)
	}
	if m, _ := filepath.Glob(filepath.Join(fresh, "dmarcd.db.before-restore-*")); len(m) != 1 {
		t.Errorf("previous database not kept: %v", m)
	}
}
