package imap_test

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	imapin "github.com/dmarcd/dmarcd/ingest/imap"
	"github.com/dmarcd/dmarcd/internal/imaptest"
	"github.com/dmarcd/dmarcd/internal/secret"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

const serverProcessEnv = "DMARCD_IMAP_SERVER_PROCESS"

// TestIMAPServerProcess is not a test: run by BenchmarkIdleMailboxes in a
// child process, it serves the memory IMAP server there (so that the
// server's CPU time is not the benchmark's), prints its port and
// certificate, and serves until its standard input closes.
func TestIMAPServerProcess(t *testing.T) {
	if os.Getenv(serverProcessEnv) != "1" {
		t.Skip("helper process of BenchmarkIdleMailboxes")
	}
	srv := imaptest.NewServer(t)
	fmt.Printf("PORT %d\n%s", srv.Port, srv.Cert.CertPEM)
	os.Stdout.Sync()
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// countingDir counts recorded polls.
type countingDir struct {
	imapin.StoreDirectory
	polls atomic.Int64
}

func (d *countingDir) RecordPoll(id string, at time.Time, res imapin.PollResult, err error) error {
	d.polls.Add(1)
	return d.StoreDirectory.RecordPoll(id, at, res, err)
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkIdleMailboxes measures what 200 configured mailboxes cost when
// no mail arrives: the Manager with its defaults (64 IDLE connections, the
// others polled every --imap-interval) over a real store, against the
// memory server in another process. It reports the process's CPU time
// over the window (DMARCD_IDLE_WINDOW, default 60s) as a share of one
// core; the target is under 1 %. Run with -benchtime=1x. The interval is
// DMARCD_IDLE_INTERVAL (default 5m, the flag's default; 1m makes every
// mailbox poll within the window).
func BenchmarkIdleMailboxes(b *testing.B) {
	window, interval := 60*time.Second, 5*time.Minute
	if d, err := time.ParseDuration(os.Getenv("DMARCD_IDLE_WINDOW")); err == nil {
		window = d
	}
	if d, err := time.ParseDuration(os.Getenv("DMARCD_IDLE_INTERVAL")); err == nil {
		interval = d
	}
	const n = 200
	cmd := exec.Command(os.Args[0], "-test.run=^TestIMAPServerProcess$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), serverProcessEnv+"=1")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stdin.Close(); _ = cmd.Wait() })
	rd := bufio.NewReader(stdout)
	line, err := rd.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "PORT ") {
		b.Fatalf("helper server: %q %v", line, err)
	}
	port, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "PORT ")))
	var pemBytes []byte
	for {
		l, err := rd.ReadString('\n')
		pemBytes = append(pemBytes, l...)
		if err != nil || strings.HasPrefix(l, "-----END") {
			break
		}
	}
	blk, _ := pem.Decode(pemBytes)
	if blk == nil {
		b.Fatal("no certificate from the helper")
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		b.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)

	db := storetest.Open(b)
	org := storetest.MustOrganization(b, db, "msp", store.PlanUnlimited)
	box, err := secret.LoadOrCreate(secret.KeyPath(b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	sealed, _ := imapin.SealCredentials(box, imapin.Credentials{Password: imaptest.Pass})
	for range n {
		m := &store.Mailbox{OrgID: org.ID, Host: "127.0.0.1", Port: port, Security: "tls", Username: imaptest.User,
			Auth: "password", Folder: "INBOX", ArchiveFolder: "Archive"}
		if err := db.CreateMailbox(m, sealed); err != nil {
			b.Fatal(err)
		}
	}
	dir := &countingDir{StoreDirectory: imapin.StoreDirectory{DB: db, Box: box}}
	opts := &imapin.Options{AllowPrivate: true, RootCAs: pool, Timeout: 30 * time.Second}
	mgr := imapin.NewManager(dir, newSink(), dir, opts)
	mgr.Interval = interval
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = mgr.Run(ctx) }()
	defer func() { cancel(); <-done }()

	// Warm up: every mailbox polled once (the first poll is not idle cost).
	for deadline := time.Now().Add(2 * time.Minute); dir.polls.Load() < n; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d mailboxes polled", dir.polls.Load(), n)
		}
	}
	time.Sleep(2 * time.Second)
	b.ResetTimer()
	startPolls, startCPU, start := dir.polls.Load(), cpuTime(), time.Now()
	time.Sleep(window)
	cpu, wall := cpuTime()-startCPU, time.Since(start)
	b.StopTimer()
	b.ReportMetric(100*cpu.Seconds()/wall.Seconds(), "%core")
	b.ReportMetric(float64(dir.polls.Load()-startPolls), "polls")
}
