package cli

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/store/storetest"
)

// TestBootstrapKeyNotOnAPipe ensures that with standard output no terminal
// (a pipe, the journal) the first key goes to <data-dir>/bootstrap-key
// with mode 0600 and appears neither on stdout nor in the log, which names
// the file; a second start on the same database creates nothing.
func TestBootstrapKeyNotOnAPipe(t *testing.T) {
	dir := t.TempDir()
	db := storetest.Open(t)
	var out, logBuf bytes.Buffer
	g := &globalOptions{DataDir: dir, stdout: &out}
	log := slog.New(slog.NewJSONHandler(&logBuf, nil))
	k, err := bootstrap(db, g, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.announce(g, "0.0.0.0:8080", "", false); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, bootstrapKeyFile)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	key := regexp.MustCompile(`^dmk_[0-9a-f]{32}\n$`).FindString(string(raw))
	if key == "" {
		t.Fatalf("%s holds %q, want one key and a newline", path, raw)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	key = strings.TrimSpace(key)
	if strings.Contains(out.String(), key) || strings.Contains(logBuf.String(), key) {
		t.Errorf("the key leaked:\nstdout: %s\nlog: %s", out.String(), logBuf.String())
	}
	if !strings.Contains(logBuf.String(), path) || !strings.Contains(out.String(), "cat "+path+" && rm "+path) {
		t.Errorf("the path is not named:\nstdout: %s\nlog: %s", out.String(), logBuf.String())
	}
	if !strings.Contains(out.String(), "http://127.0.0.1:8080/api/v1/domains") {
		t.Errorf("the try-it line does not reach the unspecified address's loopback:\n%s", out.String())
	}
	if n, _ := db.CountOrganizations(); n != 1 {
		t.Fatalf("%d organizations", n)
	}
	out.Reset()
	if k, err := bootstrap(db, g, log); err != nil || k != nil || out.Len() != 0 {
		t.Errorf("second bootstrap: %v, %v, printed %q", k, err, out.String())
	}
}

// TestBootstrapKeyFileNotReplaced ensures an existing key file (an old key,
// or a link an attacker planted) is never overwritten: serve fails instead.
func TestBootstrapKeyFileNotReplaced(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, bootstrapKeyFile)
	if err := os.WriteFile(path, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := &globalOptions{DataDir: dir, stdout: &bytes.Buffer{}}
	db := storetest.Open(t)
	_, err := bootstrap(db, g, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "delete it") {
		t.Fatalf("err = %v, want one naming %s and what to do", err, path)
	}
	if b, _ := os.ReadFile(path); string(b) != "old\n" {
		t.Errorf("file replaced: %q", b)
	}
	// No key was made that nobody saw: after the file is gone, the next
	// start bootstraps.
	if n, _ := db.CountOrganizations(); n != 0 {
		t.Errorf("%d organizations created although the key could not be written", n)
	}
	os.Remove(path)
	if _, err := bootstrap(db, g, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); !strings.HasPrefix(string(b), "dmk_") {
		t.Errorf("key file after the retry: %q", b)
	}
}

// TestCommandName ensures hints name the command as it was started.
func TestCommandName(t *testing.T) {
	defer func(a string) { os.Args[0] = a }(os.Args[0])
	for arg0, want := range map[string]string{
		"/tmp/go-build123/b001/exe/dmarcd": "go run .",
		"./dmarcd":                         "./dmarcd",
		"dmarcd":                           "dmarcd",
		"/opt/my tools/dmarcd":             "'/opt/my tools/dmarcd'",
	} {
		os.Args[0] = arg0
		if got := commandName(); got != want {
			t.Errorf("commandName() with os.Args[0] %q = %q, want %q", arg0, got, want)
		}
	}
}

// TestReportingDomainWarningNamesFlag ensures a host named "vm" is used
// for trying out, with a warning that names the flag to set.
func TestReportingDomainWarningNamesFlag(t *testing.T) {
	defer func(h func() (string, error)) { hostname = h }(hostname)
	for host, want := range map[string]string{"vm": "vm", "box.example.org": "box.example.org"} {
		hostname = func() (string, error) { return host, nil }
		var logBuf bytes.Buffer
		got, err := resolveReportingDomain("", slog.New(slog.NewTextHandler(&logBuf, nil)))
		if err != nil || got != want {
			t.Errorf("%s: %q, %v", host, got, err)
		}
		if !strings.Contains(logBuf.String(), "set --reporting-domain (or DMARCD_REPORTING_DOMAIN)") {
			t.Errorf("%s: the warning does not name the flag:\n%s", host, logBuf.String())
		}
	}
	var logBuf bytes.Buffer
	if got, err := resolveReportingDomain("Reports.Example.NET", slog.New(slog.NewTextHandler(&logBuf, nil))); err != nil || got != "reports.example.net" || logBuf.Len() != 0 {
		t.Errorf("flag set: %q, %v, log %q", got, err, logBuf.String())
	}
	if _, err := resolveReportingDomain("vm", slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "--reporting-domain") {
		t.Errorf("an unusable --reporting-domain given: %v", err)
	}
}
