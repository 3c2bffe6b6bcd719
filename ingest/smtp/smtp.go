// Package smtp is the SMTP way in: a listener (emersion/go-smtp) that
// receives report mail for the reporting addresses of registered domains
// and hands each message to the ingest pipeline, through the narrow Intake
// interface, once per recipient domain.
package smtp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/metrics"
	"github.com/dmarcd/dmarcd/store"
)

// SMTP defaults, see Config.
const (
	DefaultMaxBytes       = 50 << 20
	DefaultMaxConns       = 100
	DefaultReadTimeout    = 5 * time.Minute
	DefaultWriteTimeout   = time.Minute
	DefaultIngestTimeout  = 2 * time.Minute
	DefaultMaxConnsPerIP  = 10
	DefaultCommandTimeout = 30 * time.Second
	defaultMaxRecipients  = 50
	// maxCommandLine bounds a command line, far above RFC 5321's 512
	// octets. Lines of a message body are bounded only by MaxBytes: a
	// report sent as one long XML line is still a report.
	maxCommandLine = 64 << 10
	// dataLineSlack lets go-smtp's byte count (552 at MaxBytes) trip
	// before any line limit does, whatever its read-ahead.
	dataLineSlack = 64 << 10
)

// The replies of DESIGN.md, "Command line".
var (
	errUnknownRecipient = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1},
		Message: "No such reporting address here"}
	errTooLarge = &smtp.SMTPError{Code: 552, EnhancedCode: smtp.EnhancedCode{5, 3, 4},
		Message: "Message too large"}
	errStoreFailed = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0},
		Message: "Could not store the message, try again later"}
	errQuarantineFull = &smtp.SMTPError{Code: 552, EnhancedCode: smtp.EnhancedCode{5, 3, 1},
		Message: "No DMARC report found, and the quarantine for such mail is full"}
)

// The 4xx replies, each for a failure that goes away by itself, so that a
// retrying sender eventually succeeds; an input that can never succeed
// gets a 5xx or is quarantined (and acknowledged):
//
//   - 421 4.3.2 at connect: MaxConns connections are open;
//   - 421 4.7.0 at connect: MaxConnsPerIP connections from that address;
//   - 421 4.4.2 (go-smtp): the client stayed silent past the timeout;
//   - 421 at shutdown: the server is stopping;
//   - 451 4.3.0: the message was not received whole (the connection or the
//     spool failed) or could not be stored (the store failed, the pipeline
//     stopped, IngestTimeout passed).
//
// A message with no report while the quarantine is full (ingest's
// QuarantineTotalBytes) is refused for good: 552 5.3.1.

// Config configures a Server. Intake is required; every other field has a
// default.
type Config struct {
	// Intake stores the messages: an *ingest.Pipeline in dmarcd.
	Intake Intake
	// Hostname is the name in the greeting and the EHLO answer.
	Hostname string
	// MaxBytes is the largest message accepted (552 5.3.4 beyond);
	// default DefaultMaxBytes. It is also announced with SIZE.
	MaxBytes int64
	// MaxConns is the number of connections served at once; further ones
	// get "421 4.3.2" and are closed. Default DefaultMaxConns.
	MaxConns int
	// MaxConnsPerIP is the number of connections served at once from one
	// client address; further ones get "421 4.7.0" and are closed, so idle
	// connections from one host cannot lock others out. Default
	// DefaultMaxConnsPerIP.
	MaxConnsPerIP int
	// CommandTimeout is how long a client may stay silent before its first
	// command and between commands outside a message; default
	// DefaultCommandTimeout.
	CommandTimeout time.Duration
	// ReadTimeout is how long a client may stay silent within a message;
	// WriteTimeout bounds each reply. Defaults DefaultReadTimeout and
	// DefaultWriteTimeout.
	ReadTimeout, WriteTimeout time.Duration
	// IngestTimeout bounds storing one message (451 beyond); default
	// DefaultIngestTimeout.
	IngestTimeout time.Duration
	// TLS enables STARTTLS when set.
	TLS *tls.Config
	// SpoolDir holds messages over 1 MiB while they are stored; default
	// os.TempDir().
	SpoolDir string
	Logger   *slog.Logger
	Metrics  *metrics.Registry
	Now      func() time.Time
}

// Intake is what the listener needs of the ingest pipeline: the RCPT TO
// check, and storing one message for one recipient. *ingest.Pipeline
// implements it.
type Intake interface {
	// KnownRecipient reports whether addr is the reporting address of a
	// registered domain.
	KnownRecipient(addr string) bool
	// Ingest stores what the message holds and returns once it is durably
	// stored or quarantined; an error means neither (the sender gets 451).
	Ingest(ctx context.Context, r io.Reader, d ingest.Arrival) (*ingest.Result, error)
}

var _ Intake = (*ingest.Pipeline)(nil)

// Server receives report mail for the reporting addresses of
// registered domains. A message is acknowledged (250) only once the
// pipeline has durably stored or quarantined it, for every recipient
// domain; a sender whose message could not be stored gets 451 and retries.
type Server struct {
	cfg    Config
	intake Intake
	srv    *smtp.Server
	log    *slog.Logger

	// ctx bounds the pipeline work of sessions; Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	conns    map[*smtpConn]struct{}
	perIP    map[string]int // open connections by client address
	draining atomic.Bool

	messages *metrics.CounterVec
}

// NewServer returns a server for cfg; call Serve to run it. The error
// says what is wrong with cfg.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Intake == nil {
		return nil, errors.New("ingest: smtp.Config.Intake is required")
	}
	if cfg.MaxBytes < 0 || cfg.MaxConns < 0 || cfg.MaxConnsPerIP < 0 || cfg.CommandTimeout < 0 ||
		cfg.ReadTimeout < 0 || cfg.WriteTimeout < 0 || cfg.IngestTimeout < 0 {
		return nil, errors.New("ingest: SMTP limits and timeouts must not be negative")
	}
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, intake: cfg.Intake, log: cfg.Logger, conns: map[*smtpConn]struct{}{}, perIP: map[string]int{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	srv := smtp.NewServer(smtp.BackendFunc(s.newSession))
	srv.Domain = cfg.Hostname
	srv.MaxMessageBytes = cfg.MaxBytes
	srv.MaxRecipients = defaultMaxRecipients
	// go-smtp's line limit covers message lines too: set it past MaxBytes
	// and bound command lines with lineGuard.
	srv.MaxLineLength = int(min(cfg.MaxBytes+dataLineSlack, math.MaxInt32))
	srv.ReadTimeout = cfg.ReadTimeout
	srv.WriteTimeout = cfg.WriteTimeout
	srv.TLSConfig = cfg.TLS
	srv.ErrorLog = smtpErrorLog{cfg.Logger}
	s.srv = srv
	if cfg.Metrics != nil {
		s.messages = cfg.Metrics.Counter("dmarcd_smtp_messages_total",
			"SMTP messages by outcome: stored, quarantined, too_large, quarantine_full, failed.", "outcome")
		cfg.Metrics.GaugeFunc("dmarcd_smtp_connections", "SMTP connections open.", func() float64 {
			s.mu.Lock()
			defer s.mu.Unlock()
			return float64(len(s.conns))
		})
	}
	return s, nil
}

func (c Config) withDefaults() Config {
	if c.Hostname == "" {
		c.Hostname = "localhost"
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.MaxConnsPerIP == 0 {
		c.MaxConnsPerIP = DefaultMaxConnsPerIP
	}
	if c.CommandTimeout == 0 {
		c.CommandTimeout = DefaultCommandTimeout
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = DefaultReadTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.IngestTimeout == 0 {
		c.IngestTimeout = DefaultIngestTimeout
	}
	if c.SpoolDir == "" {
		c.SpoolDir = os.TempDir()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Serve accepts connections on ln until Shutdown or Close, then returns
// nil; any other error is the listener's.
func (s *Server) Serve(ln net.Listener) error {
	err := s.srv.Serve(&smtpListener{Listener: ln, s: s})
	if errors.Is(err, smtp.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting connections, lets messages being received or
// stored finish, says goodbye (421) to idle clients, and returns when
// every connection is closed. When ctx ends first it closes what is left
// (as Close does) and returns ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	s.mu.Lock()
	for c := range s.conns {
		c.wakeIfIdle()
	}
	s.mu.Unlock()
	err := s.srv.Shutdown(ctx)
	if ctx.Err() != nil {
		s.Close()
		return ctx.Err()
	}
	s.cancel()
	if errors.Is(err, smtp.ErrServerClosed) {
		return nil
	}
	return err
}

// Close closes the listener and every connection at once; messages being
// stored are abandoned (their senders got no 250 and will retry).
func (s *Server) Close() error {
	s.draining.Store(true)
	s.cancel()
	err := s.srv.Close()
	// After Shutdown, go-smtp's Close does nothing: close what is left.
	s.mu.Lock()
	for c := range s.conns {
		_ = c.Conn.Close()
	}
	s.mu.Unlock()
	if errors.Is(err, smtp.ErrServerClosed) {
		return nil
	}
	return err
}

func (s *Server) count(outcome string) {
	if s.messages != nil {
		s.messages.With(outcome).Inc()
	}
}

// smtpListener hands out tracked connections, and answers 421 and closes
// a connection beyond MaxConns or MaxConnsPerIP, so that a flood of
// connections costs a line each instead of a goroutine and buffers held
// open.
type smtpListener struct {
	net.Listener
	s *Server
}

func (l *smtpListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		s := l.s
		ip := remoteIP(c.RemoteAddr())
		s.mu.Lock()
		var reply string
		switch {
		case len(s.conns) >= s.cfg.MaxConns:
			reply = "421 4.3.2 " + s.cfg.Hostname + " Too many connections, try again later"
		case s.perIP[ip] >= s.cfg.MaxConnsPerIP:
			reply = "421 4.7.0 " + s.cfg.Hostname + " Too many connections from your address, try again later"
		}
		var tc *smtpConn
		if reply == "" {
			tc = &smtpConn{Conn: c, s: s, ip: ip}
			tc.guard = lineGuard{cmdMax: maxCommandLine, dataMax: s.cfg.MaxBytes + dataLineSlack, tls: s.cfg.TLS != nil}
			s.conns[tc] = struct{}{}
			s.perIP[ip]++
		}
		s.mu.Unlock()
		if reply == "" {
			return tc, nil
		}
		s.log.Warn("smtp connection refused: too many connections", "remote", ip,
			"max_conns", s.cfg.MaxConns, "max_conns_per_ip", s.cfg.MaxConnsPerIP)
		go func() {
			_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			_, _ = io.WriteString(c, reply+"\r\n")
			_ = c.Close()
		}()
	}
}

// smtpConn is one client connection. While the server drains it forces
// read deadlines into the past, so that a client idling between commands
// is told goodbye at once, while a message being received keeps its own
// deadline and completes.
type smtpConn struct {
	net.Conn
	s      *Server
	ip     string
	inData atomic.Bool
	// rcptOK is set once a recipient was accepted in the current
	// transaction: only then may DATA lines be longer than a command.
	rcptOK  atomic.Bool
	guard   lineGuard // used by the one goroutine reading
	tooLong bool
	closed  sync.Once
}

// Read reads the client's bytes and bounds the length of their lines
// (lineGuard); a line too long is smtp.ErrTooLongLine, which go-smtp
// answers "500 5.4.0" before it closes the connection.
func (c *smtpConn) Read(b []byte) (int, error) {
	if c.tooLong {
		return 0, smtp.ErrTooLongLine
	}
	n, err := c.Conn.Read(b)
	if n > 0 && !c.guard.scan(b[:n], c.rcptOK.Load()) {
		c.tooLong = true
		return 0, smtp.ErrTooLongLine
	}
	return n, err
}

// SetReadDeadline is the deadline go-smtp sets before each command (and
// before a TLS handshake): CommandTimeout from now outside a message, at
// once while the server drains.
func (c *smtpConn) SetReadDeadline(t time.Time) error {
	switch {
	case c.inData.Load() || t.IsZero():
	case c.s.draining.Load():
		t = time.Now()
	default:
		t = time.Now().Add(c.s.cfg.CommandTimeout)
	}
	return c.Conn.SetReadDeadline(t)
}

// extendRead pushes the read deadline on while a message arrives, making
// ReadTimeout an idle timeout rather than a bound on the whole transfer.
func (c *smtpConn) extendRead() {
	_ = c.Conn.SetReadDeadline(time.Now().Add(c.s.cfg.ReadTimeout))
}

func (c *smtpConn) wakeIfIdle() {
	if !c.inData.Load() {
		_ = c.Conn.SetReadDeadline(time.Now())
	}
}

func (c *smtpConn) Close() error {
	c.closed.Do(func() {
		c.s.mu.Lock()
		delete(c.s.conns, c)
		if c.s.perIP[c.ip]--; c.s.perIP[c.ip] <= 0 {
			delete(c.s.perIP, c.ip)
		}
		c.s.mu.Unlock()
	})
	return c.Conn.Close()
}

// smtpErrorLog sends go-smtp's own messages (mostly clients vanishing
// mid-session) to the debug log.
type smtpErrorLog struct{ log *slog.Logger }

func (l smtpErrorLog) Printf(format string, v ...any) {
	l.log.Debug("smtp: " + strings.TrimSpace(fmt.Sprintf(format, v...)))
}

func (l smtpErrorLog) Println(v ...any) {
	l.log.Debug("smtp: " + strings.TrimSpace(fmt.Sprintln(v...)))
}

func (s *Server) newSession(c *smtp.Conn) (smtp.Session, error) {
	nc := c.Conn()
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	conn, _ := nc.(*smtpConn)
	return &session{s: s, conn: conn, remote: remoteIP(c.Conn().RemoteAddr())}, nil
}

func remoteIP(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	return a.String()
}

// session is one SMTP transaction at a time on one connection.
type session struct {
	s      *Server
	conn   *smtpConn // nil only when go-smtp hands us a foreign conn
	remote string
	from   string
	rcpts  []string // lower-cased, each once
}

func (ss *session) Reset() {
	ss.from, ss.rcpts = "", nil
	ss.setRcptOK(false)
}

func (ss *session) Logout() error { return nil }

func (ss *session) Mail(from string, _ *smtp.MailOptions) error {
	ss.from = from
	ss.rcpts = nil
	ss.setRcptOK(false)
	return nil
}

func (ss *session) setRcptOK(ok bool) {
	if ss.conn != nil {
		ss.conn.rcptOK.Store(ok)
	}
}

// Rcpt accepts only reporting addresses, before any message byte is sent.
func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if !ss.s.intake.KnownRecipient(to) {
		ss.s.log.Debug("smtp recipient refused", "remote", ss.remote, "from", ss.from, "rcpt", to)
		return errUnknownRecipient
	}
	ss.setRcptOK(true)
	addr := strings.ToLower(to)
	for _, r := range ss.rcpts {
		if r == addr {
			return nil
		}
	}
	ss.rcpts = append(ss.rcpts, addr)
	return nil
}

// Data spools the message, then ingests it once per recipient: every
// reporting address belongs to exactly one domain, so distinct addresses
// are distinct domains. go-smtp writes the reply we return; the 250 says
// what was done ("250 2.0.0 stored: 1 aggregate report").
func (ss *session) Data(r io.Reader) error {
	start := time.Now()
	if ss.conn != nil {
		ss.conn.inData.Store(true)
		defer ss.conn.inData.Store(false)
		r = &idleReader{r: r, conn: ss.conn}
	}
	sp := newSpool(ss.s.cfg.SpoolDir)
	defer sp.Close()
	attrs := []any{"remote", ss.remote, "from", ss.from, "rcpt", strings.Join(ss.rcpts, ",")}
	if _, err := sp.ReadFrom(r); err != nil {
		attrs = append(attrs, "bytes", sp.Size(), "duration", time.Since(start).Round(time.Millisecond))
		if errors.Is(err, smtp.ErrDataTooLarge) || errors.Is(err, smtp.ErrTooLongLine) {
			ss.s.count("too_large")
			ss.s.log.Info("smtp message refused: too large", append(attrs, "status", 552, "max_bytes", ss.s.cfg.MaxBytes)...)
			return errTooLarge
		}
		ss.s.count("failed")
		ss.s.log.Warn("smtp message not received", append(attrs, "status", 451, "error", err)...)
		return errStoreFailed
	}
	received := ss.s.cfg.Now()
	var stored, duplicates, records, skipped, tls int
	var sum tally
	var quarantined []string
	for _, rcpt := range ss.rcpts {
		res, err := ss.ingest(sp.Reader(), rcpt, received)
		if errors.Is(err, store.ErrQuarantineFull) {
			ss.s.count("quarantine_full")
			ss.s.log.Warn("smtp message refused: the quarantine is full", append(attrs, "bytes", sp.Size(), "status", 552,
				"failed_rcpt", rcpt, "error", err)...)
			return errQuarantineFull
		}
		if err != nil {
			ss.s.count("failed")
			ss.s.log.Error("smtp message not stored", append(attrs, "bytes", sp.Size(), "status", 451,
				"failed_rcpt", rcpt, "duration", time.Since(start).Round(time.Millisecond), "error", err)...)
			return errStoreFailed
		}
		for _, o := range res.Reports {
			if o.Duplicate {
				duplicates++
			} else {
				stored++
				records += o.Records
				if o.Kind == ingest.KindTLS {
					tls++
				}
			}
		}
		sum.add(res)
		skipped += res.RecordsSkipped
		if res.Quarantined != "" {
			quarantined = append(quarantined, res.Quarantined+" ("+res.Reason+")")
		}
	}
	attrs = append(attrs, "bytes", sp.Size(), "status", 250, "reports", stored, "tls_reports", tls, "records", records, "duplicates", duplicates)
	if skipped > 0 {
		attrs = append(attrs, "records_skipped", skipped)
	}
	if len(quarantined) > 0 {
		ss.s.count("quarantined")
		attrs = append(attrs, "quarantined", strings.Join(quarantined, "; "))
	} else {
		ss.s.count("stored")
	}
	ss.s.log.Info("smtp message accepted", append(attrs, "duration", time.Since(start).Round(time.Millisecond))...)
	return &smtp.SMTPError{Code: 250, EnhancedCode: smtp.EnhancedCode{2, 0, 0}, Message: sum.String()}
}

func (ss *session) ingest(r io.Reader, rcpt string, received time.Time) (*ingest.Result, error) {
	ctx, cancel := context.WithTimeout(ss.s.ctx, ss.s.cfg.IngestTimeout)
	defer cancel()
	from := ss.from
	if from == "" {
		from = "<>"
	}
	return ss.s.intake.Ingest(ctx, r, ingest.Arrival{
		Source:     ingest.SourceSMTP,
		Recipient:  rcpt,
		Name:       from + " -> " + rcpt,
		ReceivedAt: received,
	})
}

// idleReader renews the connection's read deadline before every read.
type idleReader struct {
	r    io.Reader
	conn *smtpConn
}

func (ir *idleReader) Read(p []byte) (int, error) {
	ir.conn.extendRead()
	return ir.r.Read(p)
}
