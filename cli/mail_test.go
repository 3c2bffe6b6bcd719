package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-message/mail"
	"github.com/emersion/go-smtp"

	"github.com/dmarcd/dmarcd/internal/mailtest"
)

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestMailTestCommand starts 'dmarcd serve' with a relay (a real SMTP
// sink on loopback: STARTTLS with a test certificate, AUTH PLAIN with the
// password from DMARCD_MAIL_RELAY_PASSWORD) and runs 'dmarcd mail test'
// through its socket: the message arrives, parses, and the password is
// in no log line. A relay refusing with 550 makes the command fail,
// saying so.
func TestMailTestCommand(t *testing.T) {
	const password = "relay-pass-7d2e9f"
	var refuse atomic.Bool
	sink := mailtest.StartSink(t, mailtest.SinkConfig{User: "dmarcd", Pass: password, Respond: func(int, []byte) error {
		if refuse.Load() {
			return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"}
		}
		return nil
	}})
	dir := t.TempDir()
	ca := filepath.Join(dir, "relay-ca.pem")
	if err := os.WriteFile(ca, sink.Cert.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(dir, "data")
	t.Setenv(mailPasswordEnv, password)
	ctx, cancel := context.WithCancel(context.Background())
	var serveErr syncBuffer
	done := make(chan int)
	go func() {
		done <- execute(ctx, []string{"serve", "--data-dir", dataDir, "--reporting-domain", "reports.test", "--listen", "127.0.0.1:0",
			"--smtp-listen", "", "--public-url", "https://dmarc.example.net", "--mail-relay", sink.Addr, "--mail-relay-user", "dmarcd",
			"--mail-from", "dmarcd@example.net", "--mail-relay-allow-private", "--mail-relay-ca-file", ca, "--log-level", "debug"},
			strings.NewReader(""), &bytes.Buffer{}, &serveErr)
	}()
	defer func() {
		cancel()
		<-done
		if strings.Contains(serveErr.String(), password) {
			t.Errorf("the relay password is in the server's log:\n%s", serveErr.String())
		}
	}()
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dataDir, "dmarcd.sock")); err == nil {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the server did not start:\n%s", serveErr.String())
		}
	}

	code, out, errOut := run(t, nil, "--data-dir", dataDir, "mail", "test", "--to", "ops@example.org")
	if code != 0 || !strings.Contains(out, "Sent a test message to ops@example.org") {
		t.Fatalf("mail test: exit %d\n%s%s\nserver:\n%s", code, out, errOut, serveErr.String())
	}
	got := sink.Received()
	if len(got) != 1 || !got[0].TLS || got[0].AuthUser != "dmarcd" || got[0].From != "dmarcd@example.net" {
		t.Fatalf("received %+v", got)
	}
	r, err := mail.CreateReader(bytes.NewReader(got[0].Data))
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := r.Header.MessageID(); !strings.HasSuffix(id, "@dmarc.example.net") {
		t.Errorf("Message-ID %q", id)
	}
	if r.Header.Get("List-Unsubscribe") != "<https://dmarc.example.net/settings/notifications?email=ops%40example.org>" {
		t.Errorf("List-Unsubscribe %q", r.Header.Get("List-Unsubscribe"))
	}

	refuse.Store(true)
	code, out, errOut = run(t, nil, "--data-dir", dataDir, "--json", "mail", "test", "--to", "nobody@example.org")
	if code != 1 || !strings.Contains(out, `"permanent": true`) || !strings.Contains(out, "550") || !strings.Contains(errOut, "did not take") {
		t.Errorf("refused test: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := run(t, nil, "--data-dir", dataDir, "mail", "test", "--to", "not an address"); code != 1 || !strings.Contains(errOut, "no mail address") {
		t.Errorf("bad address: exit %d %s", code, errOut)
	}
	if code, out, _ := run(t, nil, "--data-dir", dataDir, "mail", "list"); code != 0 || !strings.Contains(out, "No mail yet") {
		t.Errorf("mail list: exit %d %s", code, out)
	}
}

// TestMailTestNeedsServer: without a running server, mail test says so.
func TestMailTestNeedsServer(t *testing.T) {
	code, _, errOut := run(t, nil, "--data-dir", t.TempDir(), "mail", "test", "--to", "ops@example.org")
	if code != 1 || !strings.Contains(errOut, "needs the running server") {
		t.Errorf("exit %d %s", code, errOut)
	}
	if code, _, errOut := run(t, nil, "--data-dir", t.TempDir(), "mail", "test"); code != 2 || !strings.Contains(errOut, "--to") {
		t.Errorf("no --to: exit %d %s", code, errOut)
	}
}

// TestMailRelayFlags: the relay flags are checked before serve starts,
// each refusal naming its flag.
func TestMailRelayFlags(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--mail-relay", "smtp.example.net:25", "--mail-relay-tls", "none", "--mail-from", "a@example.net"}, nil, "only for a relay on loopback"},
		{[]string{"--mail-relay", "smtp.example.net:587"}, nil, "needs --mail-from"},
		{[]string{"--mail-relay", "smtp.example.net:587", "--mail-from", "a@example.net", "--mail-relay-user", "u"}, nil, "needs a password"},
		{[]string{"--mail-relay", "smtp.example.net:587", "--mail-from", "a@example.net", "--mail-relay-password-file", pw}, nil, "needs --mail-relay-user"},
		{[]string{"--mail-relay", "smtp.example.net:587", "--mail-from", "a@example.net", "--mail-relay-user", "u", "--mail-relay-password-file", "/nonexistent"}, nil, "--mail-relay-password-file"},
		{[]string{"--mail-relay", "smtp.example.net:587", "--mail-from", "a@example.net", "--mail-relay-tls", "ssl"}, nil, "starttls, tls or none"},
		{[]string{"--mail-from", "a@example.net"}, nil, "need --mail-relay"},
		{[]string{"--mail-relay", "smtp.example.net:587", "--mail-from", "a@example.net", "--mail-retry-delays", "0s"}, nil, "must all be positive"},
		{nil, map[string]string{"DMARCD_MAIL_RELAY": "smtp.example.net", "DMARCD_MAIL_FROM": "a@example.net"}, "host:port"},
	} {
		args := append([]string{"serve", "--data-dir", t.TempDir(), "--reporting-domain", "reports.test", "--listen", "127.0.0.1:0", "--smtp-listen", ""}, c.args...)
		code, _, errOut := run(t, c.env, args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d %q, want exit 2 with %q", c.args, code, errOut, c.want)
		}
		if strings.Contains(errOut, "secret") {
			t.Errorf("%v: the password shows in %q", c.args, errOut)
		}
	}
}
