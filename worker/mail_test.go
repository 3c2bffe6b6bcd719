package worker_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/emersion/go-message/mail"
	"github.com/emersion/go-smtp"

	"github.com/dmarcd/dmarcd/internal/egress"
	"github.com/dmarcd/dmarcd/internal/mailtest"
	"github.com/dmarcd/dmarcd/mailout"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
	"github.com/dmarcd/dmarcd/worker"
)

// mailEnv is a store, an organization, a real SMTP sink on loopback
// (STARTTLS, AUTH PLAIN) and the sending job over a relay to it.
type mailEnv struct {
	db     *store.DB
	clock  *storetest.Clock
	org    *store.Organization
	sink   *mailtest.Sink
	sender *worker.MailSender
}

func newMailEnv(t *testing.T, respond func(int, []byte) error, delays ...time.Duration) *mailEnv {
	t.Helper()
	e := &mailEnv{clock: storetest.NewClock(storetest.Epoch())}
	e.db = storetest.OpenWithClock(t, e.clock)
	e.org = storetest.MustOrganization(t, e.db, "acme", store.PlanUnlimited)
	e.sink = mailtest.StartSink(t, mailtest.SinkConfig{User: "relay", Pass: "pw", Respond: respond})
	relay, err := mailout.NewRelay(mailout.RelayConfig{Addr: e.sink.Addr, User: "relay", Password: "pw", From: "dmarcd@example.net",
		Policy: egress.Policy{AllowPrivate: true, RootCAs: e.sink.Cert.Pool}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if delays == nil {
		delays = []time.Duration{time.Minute, 2 * time.Minute}
	}
	e.sender = &worker.MailSender{Store: e.db, Relay: relay, MessageHost: "dmarc.example.net", RetryDelays: delays, Now: e.clock.Now}
	return e
}

func (e *mailEnv) enqueue(t *testing.T) *store.MailStatus {
	t.Helper()
	st, err := e.db.EnqueueMail(&store.OutgoingMail{OrgID: e.org.ID, Kind: store.MailKindDigest, To: "ops@example.org",
		Subject: "Weekly digest", Text: "pass rate 99.5 %", HTML: "<p>pass rate 99.5 %</p>"})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func (e *mailEnv) send(t *testing.T) {
	t.Helper()
	if err := e.sender.SendDue(context.Background(), e.clock.Now()); err != nil {
		t.Fatal(err)
	}
}

func (e *mailEnv) status(t *testing.T, id string) *store.MailStatus {
	t.Helper()
	st, err := e.db.MailStatusOf(id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func messageID(t *testing.T, raw []byte) string {
	t.Helper()
	r, err := mail.CreateReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	id, err := r.Header.MessageID()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func refuse(code int) error {
	return &smtp.SMTPError{Code: code, EnhancedCode: smtp.EnhancedCode{code / 100, 0, 0}, Message: "try later"}
}

func TestMailSenderRetriesA4xxAndDeliversOnce(t *testing.T) {
	var seen [][]byte
	e := newMailEnv(t, func(n int, data []byte) error {
		seen = append(seen, data)
		if n == 1 {
			return refuse(451)
		}
		return nil
	})
	st := e.enqueue(t)
	e.send(t)
	got := e.status(t, st.ID)
	if got.Status != store.MailQueued || got.Attempts != 1 || !strings.Contains(got.LastError, "451") ||
		got.NextAttemptAt == nil || !got.NextAttemptAt.Equal(e.clock.Now().Add(time.Minute)) {
		t.Fatalf("after a 451: %+v", got)
	}
	e.send(t) // not due yet
	if e.sink.Attempts() != 1 {
		t.Fatalf("%d attempts before the retry was due", e.sink.Attempts())
	}
	e.clock.Advance(time.Minute)
	e.send(t)
	e.clock.Advance(time.Hour)
	e.send(t)
	if got := e.sink.Received(); len(got) != 1 {
		t.Fatalf("received %d messages, want 1", len(got))
	}
	got = e.status(t, st.ID)
	if got.Status != store.MailSent || got.Attempts != 2 || got.LastError != "" || got.DoneAt == nil {
		t.Fatalf("after the retry: %+v", got)
	}
	want := st.ID + "@dmarc.example.net"
	if a, b := messageID(t, seen[0]), messageID(t, seen[1]); a != want || b != want {
		t.Errorf("Message-IDs %q and %q, want %q on both attempts", a, b, want)
	}
	if n, _ := e.db.MailOutboxDepth(); n != 0 {
		t.Errorf("outbox depth %d", n)
	}
}

func TestMailSenderGivesUpOn5xx(t *testing.T) {
	e := newMailEnv(t, func(int, []byte) error { return refuse(550) })
	st := e.enqueue(t)
	e.send(t)
	e.clock.Advance(24 * time.Hour)
	e.send(t)
	got := e.status(t, st.ID)
	if got.Status != store.MailFailed || got.Attempts != 1 || !strings.Contains(got.LastError, "550") || got.DoneAt == nil {
		t.Fatalf("after a 550: %+v", got)
	}
	if e.sink.Attempts() != 1 {
		t.Errorf("%d attempts, want 1 (no retry after 5xx)", e.sink.Attempts())
	}
	log, err := e.db.MailLog(e.org.ID, 10)
	if err != nil || len(log) != 1 || log[0].Status != store.MailFailed {
		t.Fatalf("mail log %+v (%v)", log, err)
	}
}

func TestMailSenderRetriesRunOut(t *testing.T) {
	e := newMailEnv(t, func(int, []byte) error { return refuse(421) }, time.Minute)
	st := e.enqueue(t)
	for range 4 {
		e.send(t)
		e.clock.Advance(time.Minute)
	}
	if got := e.status(t, st.ID); got.Status != store.MailFailed || got.Attempts != 2 {
		t.Fatalf("%+v, want failed after 2 attempts", got)
	}
	if e.sink.Attempts() != 2 {
		t.Errorf("%d attempts, want 2", e.sink.Attempts())
	}
}

// TestMailSenderNoConnection: a relay that does not answer is a temporary
// failure, retried.
func TestMailSenderNoConnection(t *testing.T) {
	e := newMailEnv(t, nil)
	relay, err := mailout.NewRelay(mailout.RelayConfig{Addr: "127.0.0.1:1", TLS: mailout.TLSNone, From: "dmarcd@example.net"})
	if err != nil {
		t.Fatal(err)
	}
	e.sender.Relay = relay
	st := e.enqueue(t)
	e.send(t)
	if got := e.status(t, st.ID); got.Status != store.MailQueued || !strings.Contains(got.LastError, "connect") {
		t.Fatalf("%+v", got)
	}
}

// Environment of the child process of TestMailKilledBeforeTheRelayAnswered.
const (
	childEnv     = "DMARCD_TEST_MAIL_CHILD"
	childDB      = "DMARCD_TEST_MAIL_DB"
	childRelay   = "DMARCD_TEST_MAIL_RELAY"
	childCA      = "DMARCD_TEST_MAIL_CA"
	childStarted = "DMARCD_TEST_MAIL_STARTED"
)

// TestMailChild is the child process: it opens the database and runs the
// sending job once (what a restarted server does first).
func TestMailChild(t *testing.T) {
	if os.Getenv(childEnv) != "1" {
		t.Skip("the child process of TestMailKilledBeforeTheRelayAnswered")
	}
	db, err := store.Open(os.Getenv(childDB), &store.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pool, err := egress.LoadCAFile(os.Getenv(childCA))
	if err != nil {
		t.Fatal(err)
	}
	relay, err := mailout.NewRelay(mailout.RelayConfig{Addr: os.Getenv(childRelay), User: "relay", Password: "pw", From: "dmarcd@example.net",
		Policy: egress.Policy{AllowPrivate: true, RootCAs: pool}, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(os.Getenv(childStarted), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s := &worker.MailSender{Store: db, Relay: relay, MessageHost: "dmarc.example.net"}
	if err := s.SendDue(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
}

// TestMailKilledBeforeTheRelayAnswered queues a mail, starts a process
// that sends it, kills it with SIGKILL while the relay holds its answer,
// and starts the process again: the mail is sent exactly once, and a
// third start sends nothing.
func TestMailKilledBeforeTheRelayAnswered(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	sink := mailtest.StartSink(t, mailtest.SinkConfig{User: "relay", Pass: "pw", Respond: func(n int, _ []byte) error {
		if n == 1 {
			arrived <- struct{}{}
			<-release
			return refuse(451) // the client is dead; nothing was accepted
		}
		return nil
	}})
	dir := t.TempDir()
	path := filepath.Join(dir, "dmarcd.db")
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := db.EnqueueMail(&store.OutgoingMail{Kind: store.MailKindTest, To: "ops@example.org", Subject: "once", Text: "t", HTML: "<p>h</p>"})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, sink.Cert.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	child := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMailChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), childEnv+"=1", childDB+"="+path, childRelay+"="+sink.Addr, childCA+"="+ca,
			childStarted+"="+filepath.Join(dir, "started"))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("child output:\n%s", out.String())
			}
		})
		return cmd
	}
	first := child()
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		first.Process.Kill()
		t.Fatal("the child never reached the relay")
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	close(release)
	if ws, ok := first.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the first child ended with %v, not SIGKILL", first.ProcessState)
	}
	if got := sink.Received(); len(got) != 0 {
		t.Fatalf("the sink accepted %d messages before the restart", len(got))
	}
	for i := range 2 { // the restart, then one more start with nothing due
		if err := child().Run(); err != nil {
			t.Fatalf("child %d: %v", i+2, err)
		}
	}
	got := sink.Received()
	if len(got) != 1 {
		t.Fatalf("the sink accepted %d messages after the restarts, want exactly 1", len(got))
	}
	if id := messageID(t, got[0].Data); id != st.ID+"@dmarc.example.net" {
		t.Errorf("Message-ID %q", id)
	}
	if sink.Attempts() != 2 {
		t.Errorf("%d DATA commands, want 2 (the killed one and the one after the restart)", sink.Attempts())
	}
	db, err = store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	final, err := db.MailStatusOf(st.ID)
	if err != nil || final.Status != store.MailSent || final.Attempts != 1 {
		t.Fatalf("status %+v (%v), want sent at its first recorded attempt", final, err)
	}
}
