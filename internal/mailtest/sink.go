package mailtest

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/dmarcd/dmarcd/internal/imaptest"
)

// Sink is a real SMTP server (emersion/go-smtp) on a loopback port that
// keeps what it accepts: the relay of outbound mail tests. It offers
// STARTTLS (or implicit TLS) with a self-signed certificate for
// 127.0.0.1 and localhost (Cert), and requires AUTH PLAIN with User and
// Pass when they are set.
type Sink struct {
	// Addr is host:port of the listener.
	Addr string
	// Cert is the server's certificate; Cert.Pool trusts it.
	Cert *imaptest.Cert

	cfg      SinkConfig
	srv      *smtp.Server
	mu       sync.Mutex
	received []Received
	attempts int
}

// SinkConfig configures StartSink.
type SinkConfig struct {
	// TLS is "starttls" (the default), "tls" (implicit) or "none".
	TLS string
	// User and Pass, when set, must sign in (AUTH PLAIN) before MAIL.
	User, Pass string
	// Respond, when set, answers each message after its data was read:
	// attempt counts every DATA from 1; nil accepts (250), an
	// *smtp.SMTPError refuses with its code.
	Respond func(attempt int, data []byte) error
}

// Received is one message the sink accepted (answered 250).
type Received struct {
	From     string
	To       []string
	Data     []byte
	TLS      bool   // the session was encrypted
	AuthUser string // who signed in; "" for nobody
}

// StartSink starts a sink on 127.0.0.1 and stops it when the test ends.
func StartSink(tb testing.TB, cfg SinkConfig) *Sink {
	tb.Helper()
	if cfg.TLS == "" {
		cfg.TLS = "starttls"
	}
	s := &Sink{Cert: imaptest.NewCert(tb), cfg: cfg}
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		_, isTLS := c.TLSConnectionState()
		return &sinkSession{sink: s, conn: c, tls: isTLS}, nil
	}))
	srv.Domain = "sink.test"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	srv.MaxMessageBytes = 10 << 20
	tlsCfg := &tls.Config{Certificates: []tls.Certificate{s.Cert.TLS}, MinVersion: tls.VersionTLS12}
	var ln net.Listener
	var err error
	switch cfg.TLS {
	case "tls":
		ln, err = tls.Listen("tcp", "127.0.0.1:0", tlsCfg)
	case "starttls":
		srv.TLSConfig = tlsCfg
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	default:
		srv.AllowInsecureAuth = true
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		tb.Fatal(err)
	}
	s.Addr, s.srv = ln.Addr().String(), srv
	go srv.Serve(ln)
	tb.Cleanup(func() { srv.Close() })
	return s
}

// Received returns the messages accepted so far.
func (s *Sink) Received() []Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Received(nil), s.received...)
}

// Attempts is how many messages were sent to the sink (DATA), accepted
// or not.
func (s *Sink) Attempts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts
}

// WaitReceived waits up to d for n accepted messages and returns them.
func (s *Sink) WaitReceived(tb testing.TB, n int, d time.Duration) []Received {
	tb.Helper()
	for end := time.Now().Add(d); ; time.Sleep(10 * time.Millisecond) {
		if got := s.Received(); len(got) >= n || time.Now().After(end) {
			if len(got) < n {
				tb.Fatalf("the sink received %d messages in %s, want %d", len(got), d, n)
			}
			return got
		}
	}
}

type sinkSession struct {
	sink *Sink
	conn *smtp.Conn
	tls  bool
	user string
	from string
	to   []string
}

func (ss *sinkSession) AuthMechanisms() []string {
	if ss.sink.cfg.User == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (ss *sinkSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != ss.sink.cfg.User || pass != ss.sink.cfg.Pass {
			return smtp.ErrAuthFailed
		}
		ss.user = user
		return nil
	}), nil
}

func (ss *sinkSession) Mail(from string, _ *smtp.MailOptions) error {
	if ss.sink.cfg.User != "" && ss.user == "" {
		return smtp.ErrAuthRequired
	}
	_, ss.tls = ss.conn.TLSConnectionState()
	ss.from = from
	return nil
}

func (ss *sinkSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	ss.to = append(ss.to, to)
	return nil
}

func (ss *sinkSession) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s := ss.sink
	s.mu.Lock()
	s.attempts++
	n := s.attempts
	s.mu.Unlock()
	if s.cfg.Respond != nil {
		if err := s.cfg.Respond(n, data); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.received = append(s.received, Received{From: ss.from, To: ss.to, Data: bytes.Clone(data), TLS: ss.tls, AuthUser: ss.user})
	s.mu.Unlock()
	return nil
}

func (ss *sinkSession) Reset()        { ss.from, ss.to = "", nil }
func (ss *sinkSession) Logout() error { return nil }
