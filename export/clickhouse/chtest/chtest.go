// Package chtest runs real ClickHouse servers for tests: clickhouse-server
// (Debian's package, or any release) on loopback with a generated config
// in a temporary directory, on free ports. Tests skip, saying why, when
// the binary is absent.
package chtest

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Password is the password of the user "dmarcd" every server has (the
// user "default" has none, for the tests' own queries).
const Password = "ch-test-secret-5d1f"

// Binary returns the clickhouse-server executable, "" when there is none.
func Binary() string {
	for _, name := range []string{"clickhouse-server", "/usr/sbin/clickhouse-server", "/usr/bin/clickhouse-server"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("clickhouse"); err == nil {
		return p + " server"
	}
	return ""
}

// Skip skips tb when no clickhouse-server is installed.
func Skip(tb testing.TB) {
	tb.Helper()
	if Binary() == "" {
		tb.Skip("clickhouse-server not installed (apt-get install clickhouse-server): ClickHouse tests skipped")
	}
}

// Server is one running ClickHouse.
type Server struct {
	Dir      string
	HTTPPort int
	TCPPort  int
	cmd      *exec.Cmd
	done     chan struct{}
	clusters string
}

// URL returns the sink's URL for database db as user dmarcd.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("http://dmarcd@127.0.0.1:%d/?database=%s", s.HTTPPort, db)
}

// Start starts a server; it is stopped when tb ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	return StartCluster(tb, 1, "")[0]
}

// StartCluster starts n servers that all know the cluster name (when
// not "") with each server one shard of it.
func StartCluster(tb testing.TB, n int, cluster string) []*Server {
	tb.Helper()
	Skip(tb)
	srvs := make([]*Server, n)
	for i := range srvs {
		srvs[i] = &Server{Dir: filepath.Join(tb.TempDir(), fmt.Sprintf("ch%d", i)), HTTPPort: freePort(tb), TCPPort: freePort(tb)}
	}
	if cluster != "" {
		var shards strings.Builder
		for _, s := range srvs {
			fmt.Fprintf(&shards, "<shard><replica><host>127.0.0.1</host><port>%d</port></replica></shard>", s.TCPPort)
		}
		for _, s := range srvs {
			s.clusters = fmt.Sprintf("<remote_servers><%s>%s</%s></remote_servers>", cluster, shards.String(), cluster)
		}
	}
	for _, s := range srvs {
		s.start(tb)
		tb.Cleanup(s.Stop)
	}
	return srvs
}

func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

const configTmpl = `<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>{{dir}}/server.log</log><errorlog>{{dir}}/server.err.log</errorlog><size>10M</size><count>1</count></logger>
  <listen_host>127.0.0.1</listen_host>
  <http_port>{{http}}</http_port>
  <tcp_port>{{tcp}}</tcp_port>
  <path>{{dir}}/data/</path>
  <tmp_path>{{dir}}/tmp/</tmp_path>
  <user_files_path>{{dir}}/user_files/</user_files_path>
  <format_schema_path>{{dir}}/format_schemas/</format_schema_path>
  <mark_cache_size>5368709</mark_cache_size>
  <max_concurrent_queries>50</max_concurrent_queries>
  {{clusters}}
  <users>
    <default><password></password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks><profile>default</profile><quota>default</quota></default>
    <dmarcd><password>{{password}}</password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks><profile>default</profile><quota>default</quota></dmarcd>
  </users>
  <profiles><default></default></profiles>
  <quotas><default></default></quotas>
</yandex>
`

func (s *Server) start(tb testing.TB) {
	tb.Helper()
	if err := s.launch(); err != nil {
		tb.Fatal(err)
	}
}

// Launch starts a server in dir (created) on free ports, outside any
// test (bench/chbench); Stop ends it.
func Launch(dir string) (*Server, error) {
	if Binary() == "" {
		return nil, fmt.Errorf("clickhouse-server not installed")
	}
	hp, err := port()
	if err != nil {
		return nil, err
	}
	tp, err := port()
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, HTTPPort: hp, TCPPort: tp}
	return s, s.launch()
}

func port() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) launch() error {
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return err
	}
	cfg := strings.NewReplacer("{{dir}}", s.Dir, "{{http}}", fmt.Sprint(s.HTTPPort), "{{tcp}}", fmt.Sprint(s.TCPPort),
		"{{password}}", Password, "{{clusters}}", s.clusters).Replace(configTmpl)
	path := filepath.Join(s.Dir, "config.xml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return err
	}
	bin := strings.Fields(Binary())
	cmd := exec.Command(bin[0], append(bin[1:], "--config-file="+path)...)
	cmd.Dir = s.Dir
	out, err := os.Create(filepath.Join(s.Dir, "stdout.log"))
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("clickhouse-server: %w", err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); out.Close(); close(s.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/ping", s.HTTPPort))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		select {
		case <-s.done:
			log, _ := os.ReadFile(filepath.Join(s.Dir, "stdout.log"))
			elog, _ := os.ReadFile(filepath.Join(s.Dir, "server.err.log"))
			return fmt.Errorf("clickhouse-server exited at start: %s\n%s", log, elog)
		default:
		}
		if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("clickhouse-server did not answer within 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop kills the server (SIGKILL: what was acknowledged is on disk, and
// ClickHouse's orderly shutdown waits seconds for its connections); it
// may be called again.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// CPUTime returns the CPU time (user and system) the running server has
// used, read from /proc (Linux); 0 when unknown.
func (s *Server) CPUTime() time.Duration {
	if s.cmd == nil {
		return 0
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses: utime and
	// stime are the 14th and 15th fields of the line.
	i := strings.LastIndexByte(string(raw), ')')
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 13 {
		return 0
	}
	var ut, st int64
	fmt.Sscan(f[11], &ut)
	fmt.Sscan(f[12], &st)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// Restart starts a stopped server again on its ports and data.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	s.Stop()
	s.start(tb)
}

// Query runs sql as the user default and returns the answer trimmed.
func (s *Server) Query(tb testing.TB, sql string) string {
	tb.Helper()
	out, err := s.TryQuery(sql)
	if err != nil {
		tb.Fatalf("clickhouse %q: %v", sql, err)
	}
	return out
}

// TryQuery is Query returning its error.
func (s *Server) TryQuery(sql string) (string, error) {
	resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/?query=%s", s.HTTPPort, url.QueryEscape(sql)), "text/plain", nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
	}
	return strings.TrimSpace(string(b)), nil
}
