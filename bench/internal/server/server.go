// Package server starts a real dmarcd for the benchmark tools, the way a
// user does, and calls its API.
package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/miekg/dns"
)

// Dmarcd is a running `dmarcd serve` on loopback with a fresh data dir.
type Dmarcd struct {
	API  string // http://127.0.0.1:port
	SMTP string // 127.0.0.1:port of the SMTP listener
	Key  string // the bootstrap API key

	cmd *exec.Cmd
	dns *dns.Server
}

// nxdomain serves NXDOMAIN to every question on a loopback UDP port: the
// benchmarks' domains exist nowhere, and dmarcd registers a domain only
// once its DNS has answered (503 dns_unavailable otherwise).
func nxdomain() (*dns.Server, string, error) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetRcode(r, dns.RcodeNameError)
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	return srv, pc.LocalAddr().String(), nil
}

// Start runs bin serve with its data and log (dmarcd.log) in dir, the rate
// limit raised to rateLimit, and waits for its start-up line and key.
func Start(bin, dir, logLevel string, rateLimit int) (*Dmarcd, error) {
	return StartWith(bin, dir, logLevel, rateLimit)
}

// StartWith is Start with more flags for serve (--geoip-city, say).
func StartWith(bin, dir, logLevel string, rateLimit int, extra ...string) (*Dmarcd, error) {
	ns, nsAddr, err := nxdomain()
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, "dmarcd.log"))
	if err != nil {
		_ = ns.Shutdown()
		return nil, err
	}
	cmd := exec.Command(bin, "serve", "--data-dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0",
		"--smtp-listen", "127.0.0.1:0", "--reporting-domain", "reports.bench.test", "--log-format", "json",
		"--log-level", logLevel, "--dns-server", nsAddr, "--dns-timeout", "500ms",
		"--rate-limit", strconv.Itoa(rateLimit))
	cmd.Args = append(cmd.Args, extra...)
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		_ = ns.Shutdown()
		return nil, err
	}
	d := &Dmarcd{cmd: cmd, dns: ns}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	type started struct{ API, SMTP string }
	found := make(chan started, 1)
	go func() {
		defer logFile.Close()
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		for sc.Scan() {
			line := sc.Bytes()
			logFile.Write(append(line, '\n'))
			var e struct{ Msg, API, SMTP string }
			if !sent && json.Unmarshal(line, &e) == nil && e.Msg == "dmarcd started" {
				found <- started{e.API, e.SMTP}
				sent = true
			}
		}
	}()
	select {
	case st := <-found:
		d.API, d.SMTP = "http://"+st.API, st.SMTP
	case <-time.After(30 * time.Second):
		d.Stop()
		return nil, fmt.Errorf("dmarcd did not start within 30s (see %s)", filepath.Join(dir, "dmarcd.log"))
	}
	// stdout is a pipe: the first key is written to <data-dir>/bootstrap-key.
	b, err := os.ReadFile(filepath.Join(dir, "data", "bootstrap-key"))
	if d.Key = regexp.MustCompile(`dmk_[0-9a-f]{32}`).FindString(string(b)); d.Key == "" {
		d.Stop()
		return nil, fmt.Errorf("dmarcd wrote no bootstrap key: %v", err)
	}
	return d, nil
}

// Stop kills the server and waits for it.
func (d *Dmarcd) Stop() {
	_ = d.cmd.Process.Kill()
	_ = d.cmd.Wait()
	_ = d.dns.Shutdown()
}

// Shutdown stops the server as systemd does (SIGTERM), so that it ends
// cleanly (and writes its DMARCD_CPUPROFILE), killing it after 30s.
func (d *Dmarcd) Shutdown() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	t := time.AfterFunc(30*time.Second, func() { _ = d.cmd.Process.Kill() })
	_ = d.cmd.Wait()
	t.Stop()
	_ = d.dns.Shutdown()
}

// Call sends one API request with key and a JSON body ("" for none) and
// returns the answer's body, or an error unless the status is want.
func Call(method, url, key, body string, want int) ([]byte, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-API-Key", key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		return nil, fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, bytes.TrimSpace(b))
	}
	return b, nil
}

// CPU returns the seconds of CPU the server process has used so far (user
// and system, from /proc), or 0 when that cannot be read.
func (d *Dmarcd) CPU() float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", d.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which ends with ')': state is field 3,
	// utime and stime are fields 14 and 15 (in clock ticks, 100 a second).
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100
}

// PID returns the server's process id (for /proc/<pid>/status, say).
func (d *Dmarcd) PID() int { return d.cmd.Process.Pid }
