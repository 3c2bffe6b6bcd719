package smtp

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/smtp"
	"net/textproto"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/ingest/ingesttest"
	"github.com/dmarcd/dmarcd/internal/reportgen"
)

// startSMTP serves env's pipeline on a loopback port.
func startSMTP(t *testing.T, env *ingesttest.Env, cfg Config) (string, *Server) {
	t.Helper()
	cfg.Intake = env.Pipeline
	if cfg.Hostname == "" {
		cfg.Hostname = "mx.reports.test"
	}
	cfg.SpoolDir = t.TempDir()
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String(), srv
}

// smtpCode returns the SMTP reply code and text of a net/smtp error.
func smtpCode(err error) (int, string) {
	var te *textproto.Error
	if errors.As(err, &te) {
		return te.Code, te.Msg
	}
	return 0, fmt.Sprint(err)
}

// send runs one transaction on c and returns the error of the first
// command that failed.
func send(c *smtp.Client, from string, to []string, msg []byte) error {
	if err := c.Mail(from); err != nil {
		return err
	}
	for _, rcpt := range to {
		if err := c.Rcpt(rcpt); err != nil {
			return err
		}
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(msg); err != nil {
		return err
	}
	return w.Close()
}

func dial(t *testing.T, addr string) *smtp.Client {
	t.Helper()
	c, err := smtp.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Hello("sender.test"); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSMTPStoresReportOnce ensures a report mail is answered 250 only once
// stored, with the counts of the report, and that the same report sent
// again is not stored twice.
func TestSMTPStoresReportOnce(t *testing.T) {
	env := ingesttest.New(t, "acme/example.com/abc")
	addr, _ := startSMTP(t, env, Config{})
	msg, stats := ingesttest.ReportMail("noreply-dmarc-support@google.com", "abc@reports.test", 7, 25, reportgen.Options{Domain: "example.com"})
	for i := range 2 {
		if err := smtp.SendMail(addr, nil, "noreply-dmarc-support@google.com", []string{"abc@reports.test"}, msg); err != nil {
			t.Fatalf("send %d: %v", i+1, err)
		}
		reps := env.Reports(t, "abc@reports.test")
		if len(reps) != 1 {
			t.Fatalf("after send %d: %d reports stored, want 1", i+1, len(reps))
		}
		r := reps[0]
		if r.RecordCount != stats.Records || r.MessageCount != stats.Messages || r.DMARCPassCount != stats.DMARCPass {
			t.Errorf("report counts records=%d messages=%d pass=%d, want %d %d %d",
				r.RecordCount, r.MessageCount, r.DMARCPassCount, stats.Records, stats.Messages, stats.DMARCPass)
		}
	}
	if q := env.Quarantine(t); len(q) != 0 {
		t.Errorf("quarantine holds %d entries, want none", len(q))
	}
}

// TestSMTPRecipients ensures RCPT TO is refused with 550 5.1.1 for an
// address no domain has, before any data, and that addresses compare
// without case.
func TestSMTPRecipients(t *testing.T) {
	env := ingesttest.New(t, "acme/example.com/abc")
	addr, _ := startSMTP(t, env, Config{})
	c := dial(t, addr)
	if err := c.Mail("a@sender.test"); err != nil {
		t.Fatal(err)
	}
	for _, rcpt := range []string{"nobody@reports.test", "abc@other.test", "abcd@reports.test", "postmaster@reports.test"} {
		code, msg := smtpCode(c.Rcpt(rcpt))
		if code != 550 || !strings.HasPrefix(msg, "5.1.1") {
			t.Errorf("RCPT %s: %d %q, want 550 5.1.1", rcpt, code, msg)
		}
	}
	if err := c.Rcpt("ABC@Reports.TEST"); err != nil {
		t.Errorf("RCPT in upper case: %v", err)
	}
}

// TestSMTPRefusesOversizedMessage ensures a message over MaxBytes gets
// 552 5.3.4 and leaves nothing behind, and that the session goes on.
func TestSMTPRefusesOversizedMessage(t *testing.T) {
	env := ingesttest.New(t, "acme/example.com/abc")
	addr, _ := startSMTP(t, env, Config{MaxBytes: 8 << 10})
	big, _ := ingesttest.ReportMail("a@sender.test", "abc@reports.test", 1, 1000, reportgen.Options{Domain: "example.com"})
	if len(big) <= 8<<10 {
		t.Fatalf("test message of %d bytes is not over the limit", len(big))
	}
	c := dial(t, addr)
	code, msg := smtpCode(send(c, "a@sender.test", []string{"abc@reports.test"}, big))
	if code != 552 || !strings.HasPrefix(msg, "5.3.4") {
		t.Errorf("oversized message: %d %q, want 552 5.3.4", code, msg)
	}
	if n := len(env.Reports(t, "abc@reports.test")); n != 0 {
		t.Errorf("%d reports stored from an oversized message", n)
	}
	if q := env.Quarantine(t); len(q) != 0 {
		t.Errorf("oversized message quarantined: %+v", q[0])
	}
	small, _ := ingesttest.ReportMail("a@sender.test", "abc@reports.test", 2, 3, reportgen.Options{Domain: "example.com"})
	if err := send(c, "a@sender.test", []string{"abc@reports.test"}, small); err != nil {
		t.Errorf("message after the refused one: %v", err)
	}
}

// TestSMTPQuarantinesMailWithoutReport ensures a mail with no report is
// accepted and kept in the quarantine, named by its envelope.
func TestSMTPQuarantinesMailWithoutReport(t *testing.T) {
	env := ingesttest.New(t, "acme/example.com/abc")
	addr, _ := startSMTP(t, env, Config{})
	msg := []byte("From: a@sender.test\r\nSubject: hello\r\n\r\nJust saying hello.\r\n")
	if err := smtp.SendMail(addr, nil, "a@sender.test", []string{"abc@reports.test"}, msg); err != nil {
		t.Fatal(err)
	}
	q := env.Quarantine(t)
	if len(q) != 1 || q[0].Source != "smtp" || q[0].Name != "a@sender.test -> abc@reports.test" || q[0].Reason == "" {
		t.Fatalf("quarantine = %+v, want one smtp entry named by the envelope", q)
	}
}

// TestSMTPSeveralRecipients ensures one message to the reporting addresses
// of two organizations is stored once for each, however often an address
// is repeated.
func TestSMTPSeveralRecipients(t *testing.T) {
	env := ingesttest.New(t, "acme/example.com/abc", "globex/example.com/xyz")
	addr, _ := startSMTP(t, env, Config{})
	msg, stats := ingesttest.ReportMail("a@sender.test", "abc@reports.test, xyz@reports.test", 3, 10, reportgen.Options{Domain: "example.com"})
	c := dial(t, addr)
	if err := send(c, "a@sender.test", []string{"abc@reports.test", "xyz@reports.test", "ABC@reports.test"}, msg); err != nil {
		t.Fatal(err)
	}
	for _, rcpt := range []string{"abc@reports.test", "xyz@reports.test"} {
		reps := env.Reports(t, rcpt)
		if len(reps) != 1 || reps[0].RecordCount != stats.Records {
			t.Errorf("%s: %d reports, want 1 of %d records", rcpt, len(reps), stats.Records)
		}
	}
}

// TestSMTPStoreFailureIs451 ensures a message the pipeline cannot store is
// answered 451 4.3.0, so that the sender keeps it and retries.
func TestSMTPStoreFailureIs451(t *testing.T) {
	env := ingesttest.New(t, "acme/example.com/abc")
	addr, _ := startSMTP(t, env, Config{})
	env.Stop()
	msg, _ := ingesttest.ReportMail("a@sender.test", "abc@reports.test", 4, 5, reportgen.Options{Domain: "example.com"})
	c := dial(t, addr)
	code, text := smtpCode(send(c, "a@sender.test", []string{"abc@reports.test"}, msg))
	if code != 451 || !strings.HasPrefix(text, "4.3.0") {
		t.Errorf("store failure: %d %q, want 451 4.3.0", code, text)
	}
}

// TestSMTPConnectionLimit ensures connections beyond MaxConns are told 421
// and closed, and that a freed slot is served again.
func TestSMTPConnectionLimit(t *testing.T) {
	env := ingesttest.New(t, "acme/example.com/abc")
	addr, _ := startSMTP(t, env, Config{MaxConns: 2})
	a, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ar := bufio.NewReader(a)
	if line, _ := ar.ReadString('\n'); !strings.HasPrefix(line, "220 ") {
		t.Fatalf("first connection got %q", line)
	}
	dial(t, addr)
	third, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(third).ReadString('\n')
	third.Close()
	if !strings.HasPrefix(line, "421 4.3.2") {
		t.Errorf("third connection got %q, want 421 4.3.2", line)
	}
	// The server frees the slot before it closes the connection, so once
	// the first client reads EOF after QUIT, a new one is served.
	fmt.Fprintf(a, "QUIT\r\n")
	if _, err := io.Copy(io.Discard, ar); err != nil {
		t.Fatal(err)
	}
	c := dial(t, addr)
	if err := c.Noop(); err != nil {
		t.Errorf("connection after a slot was freed: %v", err)
	}
}

// TestSMTPStartTLS ensures STARTTLS is offered with a certificate and a
// report sent over it is stored; without one it is not offered.
func TestSMTPStartTLS(t *testing.T) {
	env := ingesttest.New(t, "acme/example.com/abc")
	cert, pool := selfSigned(t, "mx.reports.test")
	addr, _ := startSMTP(t, env, Config{TLS: &tls.Config{Certificates: []tls.Certificate{cert}}})
	c := dial(t, addr)
	if ok, _ := c.Extension("STARTTLS"); !ok {
		t.Fatal("STARTTLS not offered")
	}
	if err := c.StartTLS(&tls.Config{ServerName: "mx.reports.test", RootCAs: pool}); err != nil {
		t.Fatal(err)
	}
	msg, _ := ingesttest.ReportMail("a@sender.test", "abc@reports.test", 5, 4, reportgen.Options{Domain: "example.com"})
	if err := send(c, "a@sender.test", []string{"abc@reports.test"}, msg); err != nil {
		t.Fatal(err)
	}
	if n := len(env.Reports(t, "abc@reports.test")); n != 1 {
		t.Errorf("%d reports over TLS, want 1", n)
	}

	plainAddr, _ := startSMTP(t, env, Config{})
	if ok, _ := dial(t, plainAddr).Extension("STARTTLS"); ok {
		t.Error("STARTTLS offered without a certificate")
	}
}

func selfSigned(t *testing.T, host string) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// TestSMTPShutdownSaysGoodbye ensures Shutdown tells an idle client 421
// and returns once it is gone, without waiting for its read timeout.
func TestSMTPShutdownSaysGoodbye(t *testing.T) {
	env := ingesttest.New(t, "acme/example.com/abc")
	addr, srv := startSMTP(t, env, Config{ReadTimeout: time.Hour})
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	br := bufio.NewReader(raw)
	if line, _ := br.ReadString('\n'); !strings.HasPrefix(line, "220 ") {
		t.Fatalf("greeting %q", line)
	}
	fmt.Fprintf(raw, "EHLO sender.test\r\n")
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "250 ") {
			break
		}
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if line, _ := br.ReadString('\n'); !strings.HasPrefix(line, "421 ") {
		t.Errorf("idle client got %q at shutdown, want 421", line)
	}
}

// TestSMTPSpoolsLargeMessages ensures a message larger than the in-memory
// spool is stored whole, from the temporary file, which is then removed.
func TestSMTPSpoolsLargeMessages(t *testing.T) {
	env := ingesttest.New(t, "acme/example.com/abc")
	addr, srv := startSMTP(t, env, Config{})
	xml := new(bytes.Buffer)
	stats, _ := reportgen.WriteReport(xml, 6, 3000, reportgen.Options{Domain: "example.com"})
	msg := ingesttest.MailWith("a@sender.test", "abc@reports.test", xml.Bytes(), "text/xml", "report.xml")
	if len(msg) <= spoolMemBytes {
		t.Fatalf("test message of %d bytes fits the memory spool", len(msg))
	}
	if err := smtp.SendMail(addr, nil, "a@sender.test", []string{"abc@reports.test"}, msg); err != nil {
		t.Fatal(err)
	}
	reps := env.Reports(t, "abc@reports.test")
	if len(reps) != 1 || reps[0].RecordCount != stats.Records {
		t.Fatalf("stored %d reports, want 1 of %d records", len(reps), stats.Records)
	}
	assertEmptyDir(t, srv.cfg.SpoolDir)
}

func assertEmptyDir(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("%s left behind in %s", e.Name(), dir)
	}
}
