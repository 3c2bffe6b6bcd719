// Package imaptest runs IMAP servers for tests: go-imap's in-memory server
// on a loopback port (implicit TLS, STARTTLS or plaintext, optional SASL
// XOAUTH2) and a real Dovecot started unprivileged from a temporary
// directory (skipped with a reason when it is not installed).
package imaptest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-imap/v2/imapserver/imapmemserver"
	"github.com/emersion/go-sasl"
)

// User and Pass sign in to every test server.
const (
	User = "dmarc@example.com"
	Pass = "correct horse"
)

// Cert is a self-signed certificate for 127.0.0.1 and localhost.
type Cert struct {
	TLS     tls.Certificate
	Pool    *x509.CertPool // trusts the certificate
	CertPEM []byte
	KeyPEM  []byte
}

// NewCert makes a certificate valid for a day.
func NewCert(t testing.TB) *Cert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	c := &Cert{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
		Pool:    x509.NewCertPool(),
	}
	c.TLS, err = tls.X509KeyPair(c.CertPEM, c.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	c.Pool.AddCert(cert)
	return c
}

// WriteFiles writes cert.pem and key.pem into dir.
func (c *Cert) WriteFiles(t testing.TB, dir string) (certFile, keyFile string) {
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, c.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, c.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// Server is go-imap's in-memory server on a loopback port, with the user
// User (password Pass) and an INBOX.
type Server struct {
	t    testing.TB
	mem  *imapmemserver.Server
	User *imapmemserver.User
	Cert *Cert
	caps imap.CapSet
	// Mode is "tls", "starttls" or "plain".
	Mode   string
	token  string // accepted XOAUTH2 bearer token; "" offers no XOAUTH2
	srv    *imapserver.Server
	ln     net.Listener
	Port   int
	mu     sync.Mutex
	closed bool
}

// Option configures a Server.
type Option func(*Server)

// WithCaps replaces the capabilities (default IMAP4rev1, MOVE, UIDPLUS).
func WithCaps(caps ...imap.Cap) Option {
	return func(s *Server) {
		s.caps = imap.CapSet{imap.CapIMAP4rev1: {}}
		for _, c := range caps {
			s.caps[c] = struct{}{}
		}
	}
}

// SetToken changes the token the server accepts from the next connection.
func (s *Server) SetToken(tok string) {
	s.mu.Lock()
	s.token = tok
	s.mu.Unlock()
}

// WithToken makes the server offer SASL XOAUTH2 only, accepting bearer token tok.
func WithToken(tok string) Option { return func(s *Server) { s.token = tok } }

// WithMode sets Mode: "tls" (the default), "starttls" or "plain".
func WithMode(m string) Option { return func(s *Server) { s.Mode = m } }

// NewServer starts a server that stops when the test ends.
func NewServer(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s := &Server{t: t, mem: imapmemserver.New(), Cert: NewCert(t), Mode: "tls",
		caps: imap.CapSet{imap.CapIMAP4rev1: {}, imap.CapMove: {}, imap.CapUIDPlus: {}}}
	for _, o := range opts {
		o(s)
	}
	s.User = imapmemserver.NewUser(User, Pass)
	if err := s.User.Create("INBOX", nil); err != nil {
		t.Fatal(err)
	}
	s.mem.AddUser(s.User)
	s.Start(0)
	t.Cleanup(s.Stop)
	return s
}

// Start serves on port (0: a free one), again after Stop.
func (s *Server) Start(port int) {
	s.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		s.t.Fatal(err)
	}
	tlsCfg := &tls.Config{Certificates: []tls.Certificate{s.Cert.TLS}}
	o := &imapserver.Options{
		NewSession: func(*imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
			inner := s.mem.NewSession()
			s.mu.Lock()
			tok := s.token
			s.mu.Unlock()
			sess := idleSession{inner.(moveSession)}
			if tok != "" {
				return &oauthSession{moveSession: sess, token: tok}, nil, nil
			}
			return sess, nil, nil
		},
		Caps:         s.caps,
		Logger:       discardLogger{},
		InsecureAuth: s.Mode == "plain",
	}
	switch s.Mode {
	case "tls":
		ln = tls.NewListener(ln, tlsCfg)
	case "starttls":
		o.TLSConfig = tlsCfg
	}
	s.srv = imapserver.New(o)
	s.ln = ln
	s.Port = ln.Addr().(*net.TCPAddr).Port
	s.mu.Lock()
	s.closed = false
	s.mu.Unlock()
	go func() { _ = s.srv.Serve(ln) }()
}

// Stop closes the listener and every connection.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		_ = s.srv.Close()
	}
}

type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}

// Append adds raw to mailbox with flags; UIDs are assigned in order.
func (s *Server) Append(mailbox string, raw []byte, flags ...imap.Flag) {
	s.t.Helper()
	if _, err := s.User.Append(mailbox, bytes.NewReader(raw), &imap.AppendOptions{Flags: flags}); err != nil {
		s.t.Fatal(err)
	}
}

// Count is the number of messages in mailbox (0 when it does not exist).
func (s *Server) Count(mailbox string) int {
	s.t.Helper()
	st, err := s.User.Status(mailbox, &imap.StatusOptions{NumMessages: true})
	if err != nil {
		var ie *imap.Error
		if errors.As(err, &ie) && ie.Code == imap.ResponseCodeNonExistent {
			return 0
		}
		s.t.Fatal(err)
	}
	return int(*st.NumMessages)
}

// idleSession fixes a gap of the memory server: its IDLE announces only
// changes queued after IDLE began, so mail appended between a client's
// last command and its IDLE went unannounced. This IDLE sends whatever is
// queued, and keeps doing so until the client ends it, as Dovecot does.
type idleSession struct{ moveSession }

func (s idleSession) Idle(w *imapserver.UpdateWriter, stop <-chan struct{}) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if err := s.moveSession.Poll(w, true); err != nil {
			return err
		}
		select {
		case <-stop:
			return nil
		case <-t.C:
		}
	}
}

// oauthSession adds SASL XOAUTH2 to the memory server's session: the
// bearer token must be token, then the user is signed in.
type oauthSession struct {
	moveSession
	token string
}

// moveSession is the memory server's session, MOVE included.
type moveSession interface {
	imapserver.Session
	imapserver.SessionMove
}

func (s *oauthSession) AuthenticateMechanisms() []string { return []string{"XOAUTH2"} }

func (s *oauthSession) Authenticate(mech string) (sasl.Server, error) {
	return &xoauth2Server{sess: s}, nil
}

type xoauth2Server struct {
	sess   *oauthSession
	failed bool
}

func (x *xoauth2Server) Next(resp []byte) ([]byte, bool, error) {
	if x.failed {
		return nil, true, imapserver.ErrAuthFailed
	}
	parts := strings.Split(string(resp), "\x01")
	user, _ := strings.CutPrefix(parts[0], "user=")
	var tok string
	if len(parts) > 1 {
		tok, _ = strings.CutPrefix(parts[1], "auth=Bearer ")
	}
	if user != User || tok != x.sess.token {
		x.failed = true
		return []byte(`{"status":"401","schemes":"bearer","scope":"https://mail.google.com/"}`), false, nil
	}
	return nil, true, x.sess.moveSession.Login(User, Pass)
}
