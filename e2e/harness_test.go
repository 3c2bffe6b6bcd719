// Package e2e runs the real dmarcd binary the way a user does: built once
// per test process, started as `dmarcd serve` on a temporary data dir and
// loopback ports, against a real DNS server serving fixture zones, and
// driven over HTTP, the admin socket and the command line.
//
// The harness is meant to grow with the project: intake tests add an SMTP
// client, alert tests an HTTPS receiver, each starting a Server with extra
// flags.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/internal/dnstest"
	"github.com/dmarcd/dmarcd/store"
)

var binary string // path of the dmarcd binary built by TestMain

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "dmarcd-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "dmarcd")
	args := []string{"build", "-buildvcs=auto", "-o", binary} // stamped with the revision, whatever GOFLAGS says
	if raceEnabled {
		// The server under test runs with the race detector too, so e2e
		// tests catch races in code paths unit tests do not reach.
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "..")...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building dmarcd:", err)
		return 1
	}
	return m.Run()
}

// Server is one running `dmarcd serve` process.
type Server struct {
	t       testing.TB
	DataDir string
	URL     string // http://127.0.0.1:port
	Key     string // the bootstrap key printed on first start, "" on later starts
	args    []string

	cmd    *exec.Cmd
	done   chan struct{}
	boot   bool // the log said the bootstrap key was created (guarded by mu)
	mu     sync.Mutex
	stdout bytes.Buffer
	stderr bytes.Buffer
	err    error
}

// Options shape a Server.
type Options struct {
	DataDir string // "" makes a fresh one
	DNS     *dnstest.Server
	Args    []string // extra serve flags
	Env     []string // extra environment, KEY=VALUE
}

var keyRE = regexp.MustCompile(`dmk_[0-9a-f]{32}`)

// StartServer starts dmarcd serve and waits until its API answers. The
// process is stopped with SIGTERM at cleanup, must exit 0, and its database
// must pass bbolt's consistency check afterwards.
func StartServer(t testing.TB, o Options) *Server {
	t.Helper()
	if o.DataDir == "" {
		o.DataDir = t.TempDir()
	}
	args := []string{"serve", "--data-dir", o.DataDir, "--listen", "127.0.0.1:0",
		"--reporting-domain", "reports.dmarcd.test", "--log-format", "json", "--log-level", "debug",
		"--smtp-listen", "127.0.0.1:0"} // a free port: tests run side by side
	if o.DNS == nil {
		// Domains are registered only once their DNS has answered: a
		// loopback server that knows no name answers NXDOMAIN.
		o.DNS = dnstest.Start(t)
	}
	args = append(args, "--dns-server", o.DNS.Addr, "--dns-timeout", "300ms")
	args = append(args, o.Args...)
	s := &Server{t: t, DataDir: o.DataDir, args: args, done: make(chan struct{})}
	s.cmd = exec.Command(binary, args...)
	s.cmd.Env = append(os.Environ(), o.Env...)
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stdout = &lockedWriter{mu: &s.mu, w: &s.stdout}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started := make(chan string, 1)
	go s.readLog(stderr, started)
	go func() {
		s.err = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() { s.Stop() })

	select {
	case addr := <-started:
		s.URL = "http://" + addr
	case <-s.done:
		t.Fatalf("dmarcd serve exited before it started: %v\nstderr:\n%s", s.err, s.Stderr())
	case <-time.After(60 * time.Second):
		t.Fatalf("dmarcd serve did not start within 60s\nstderr:\n%s", s.Stderr())
	}
	// Standard output is a pipe, so the first key is in
	// <data-dir>/bootstrap-key, never on stdout; the log says when it was
	// created (one stream, so before the "started" line).
	s.mu.Lock()
	boot := s.boot
	s.mu.Unlock()
	if boot {
		b, err := os.ReadFile(filepath.Join(s.DataDir, "bootstrap-key"))
		if s.Key = keyRE.FindString(string(b)); s.Key == "" {
			t.Fatalf("the log says a bootstrap key was created but %s/bootstrap-key holds none (%v)\nstdout:\n%s", s.DataDir, err, s.Stdout())
		}
		// Standard output and the log are two pipes, each copied by its
		// own goroutine: the "started" line can arrive before the
		// bootstrap text the server wrote earlier. Wait for that text to
		// finish ("Try it" comes last) so tests read all of it; a server
		// that never prints it fails the tests that look for it.
		s.waitStdout("Try it", 10*time.Second)
	}
	return s
}

// waitStdout waits until standard output holds substr, the process ends,
// or d passes, whichever comes first.
func (s *Server) waitStdout(substr string, d time.Duration) {
	deadline := time.Now().Add(d)
	for !strings.Contains(s.Stdout(), substr) && time.Now().Before(deadline) {
		select {
		case <-s.done:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// readLog copies the JSON log into s.stderr and reports the API address
// from the "dmarcd started" line.
func (s *Server) readLog(r io.Reader, started chan<- string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var entry struct {
			Msg string `json:"msg"`
			API string `json:"api"`
		}
		parsed := json.Unmarshal(line, &entry) == nil
		s.mu.Lock()
		s.stderr.Write(line)
		s.stderr.WriteByte('\n')
		if parsed && strings.HasPrefix(entry.Msg, "empty database: created organization default") {
			s.boot = true
		}
		s.mu.Unlock()
		if parsed && entry.Msg == "dmarcd started" {
			started <- entry.API
		}
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Stdout returns what the server printed on standard output so far.
func (s *Server) Stdout() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stdout.String()
}

// Stderr returns the server's log so far.
func (s *Server) Stderr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

// Stop sends SIGTERM, waits for the process, and checks that it exited 0
// and left a consistent database. Calling it again is a no-op.
func (s *Server) Stop() {
	s.t.Helper()
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		s.t.Errorf("dmarcd did not stop within 30s of SIGTERM\nstderr:\n%s", s.Stderr())
		return
	}
	if s.err != nil {
		s.t.Errorf("dmarcd exited with %v\nstderr:\n%s", s.err, s.Stderr())
	}
	CheckDatabase(s.t, s.DataDir)
}

// Kill stops the process with SIGKILL, as a crash would.
func (s *Server) Kill() {
	_ = s.cmd.Process.Kill()
	<-s.done
}

// CheckDatabase runs bbolt's consistency check over the data dir's file.
func CheckDatabase(t testing.TB, dataDir string) {
	t.Helper()
	path := filepath.Join(dataDir, "dmarcd.db")
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return
	}
	if err := store.VerifyFile(path); err != nil {
		t.Errorf("database %s failed its check: %v", path, err)
	}
}

// Response is a decoded API answer.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a generic map.
func (r *Response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("response is not a JSON object: %v\n%s", err, r.Body)
	}
	return m
}

// ErrorCode returns error.code of an API error body.
func (r *Response) ErrorCode(t testing.TB) string {
	t.Helper()
	e, _ := r.JSON(t)["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

// Do sends one request with key (none when "") and a JSON body (none when nil).
func (s *Server) Do(method, path, key string, body any) *Response {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			s.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.URL+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// Must is Do that fails the test unless the status is want, and decodes
// the JSON object answered.
func (s *Server) Must(want int, method, path, key string, body any) map[string]any {
	s.t.Helper()
	r := s.Do(method, path, key, body)
	if r.Status != want {
		s.t.Fatalf("%s %s: status %d, want %d\n%s", method, path, r.Status, want, r.Body)
	}
	if len(r.Body) == 0 {
		return nil
	}
	return r.JSON(s.t)
}

// CLIResult is one finished command.
type CLIResult struct {
	Code           int
	Stdout, Stderr string
}

// RunCLI runs the dmarcd binary with args (and env, KEY=VALUE) and waits.
func RunCLI(t testing.TB, env []string, args ...string) CLIResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	res := CLIResult{Stdout: out.String(), Stderr: errOut.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		res.Code = ee.ExitCode()
	case err != nil:
		t.Fatalf("dmarcd %s: %v", strings.Join(args, " "), err)
	}
	return res
}

// MustCLI is RunCLI that fails the test unless the command exits 0.
func MustCLI(t testing.TB, args ...string) CLIResult {
	t.Helper()
	r := RunCLI(t, nil, args...)
	if r.Code != 0 {
		t.Fatalf("dmarcd %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
	}
	return r
}
