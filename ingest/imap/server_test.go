package imap_test

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

const (
	testUser = "dmarc@example.com"
	testPass = "correct horse"
)

// testCert is a self-signed certificate for 127.0.0.1 and localhost.
type testCert struct {
	tls     tls.Certificate
	pool    *x509.CertPool
	certPEM []byte
	keyPEM  []byte
}

func newCert(t testing.TB) *testCert {
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
	c := &testCert{
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
		pool:    x509.NewCertPool(),
	}
	c.tls, err = tls.X509KeyPair(c.certPEM, c.keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	c.pool.AddCert(cert)
	return c
}

func (c *testCert) writeFiles(t testing.TB, dir string) (certFile, keyFile string) {
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, c.certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, c.keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// memServer is go-imap's in-memory server on a loopback port.
type memServer struct {
	t      testing.TB
	mem    *imapmemserver.Server
	user   *imapmemserver.User
	cert   *testCert
	caps   imap.CapSet
	token  string // accepted XOAUTH2 bearer token; "" offers no XOAUTH2
	mode   string // "tls", "starttls" or "plain"
	srv    *imapserver.Server
	ln     net.Listener
	port   int
	mu     sync.Mutex
	closed bool
}

type serverOpt func(*memServer)

func withCaps(caps ...imap.Cap) serverOpt {
	return func(s *memServer) {
		s.caps = imap.CapSet{imap.CapIMAP4rev1: {}}
		for _, c := range caps {
			s.caps[c] = struct{}{}
		}
	}
}

// setToken changes the token the server accepts from the next connection.
func (s *memServer) setToken(tok string) {
	s.mu.Lock()
	s.token = tok
	s.mu.Unlock()
}

func withToken(tok string) serverOpt { return func(s *memServer) { s.token = tok } }
func withMode(m string) serverOpt    { return func(s *memServer) { s.mode = m } }

func newMemServer(t testing.TB, opts ...serverOpt) *memServer {
	t.Helper()
	s := &memServer{t: t, mem: imapmemserver.New(), cert: newCert(t), mode: "tls",
		caps: imap.CapSet{imap.CapIMAP4rev1: {}, imap.CapMove: {}, imap.CapUIDPlus: {}}}
	for _, o := range opts {
		o(s)
	}
	s.user = imapmemserver.NewUser(testUser, testPass)
	if err := s.user.Create("INBOX", nil); err != nil {
		t.Fatal(err)
	}
	s.mem.AddUser(s.user)
	s.start(0)
	t.Cleanup(s.stop)
	return s
}

// start serves on port (0: a free one).
func (s *memServer) start(port int) {
	s.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		s.t.Fatal(err)
	}
	tlsCfg := &tls.Config{Certificates: []tls.Certificate{s.cert.tls}}
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
		InsecureAuth: s.mode == "plain",
	}
	switch s.mode {
	case "tls":
		ln = tls.NewListener(ln, tlsCfg)
	case "starttls":
		o.TLSConfig = tlsCfg
	}
	s.srv = imapserver.New(o)
	s.ln = ln
	s.port = ln.Addr().(*net.TCPAddr).Port
	s.mu.Lock()
	s.closed = false
	s.mu.Unlock()
	go func() { _ = s.srv.Serve(ln) }()
}

func (s *memServer) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		_ = s.srv.Close()
	}
}

type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}

// appendMsg adds raw to mailbox with flags and returns nothing: UIDs are
// assigned in order.
func (s *memServer) appendMsg(mailbox string, raw []byte, flags ...imap.Flag) {
	s.t.Helper()
	if _, err := s.user.Append(mailbox, bytes.NewReader(raw), &imap.AppendOptions{Flags: flags}); err != nil {
		s.t.Fatal(err)
	}
}

func (s *memServer) count(mailbox string) int {
	s.t.Helper()
	st, err := s.user.Status(mailbox, &imap.StatusOptions{NumMessages: true})
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
	if user != testUser || tok != x.sess.token {
		x.failed = true
		return []byte(`{"status":"401","schemes":"bearer","scope":"https://mail.google.com/"}`), false, nil
	}
	return nil, true, x.sess.moveSession.Login(testUser, testPass)
}
