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
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/metrics"
)

// SMTP defaults, see Config.
const (
	DefaultMaxBytes      = 50 << 20
	DefaultMaxConns      = 100
	DefaultReadTimeout   = 5 * time.Minute
	DefaultWriteTimeout  = time.Minute
	DefaultIngestTimeout = 2 * time.Minute
	defaultMaxRecipients = 50
	// maxLineLength is far above RFC 5321's 1000 octets: a report sent
	// by a careless reporter as one long XML line is still a report.
	maxLineLength = 64 << 10
)

// The replies of DESIGN.md, "Command line".
var (
	errUnknownRecipient = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1},
		Message: "No such reporting address here"}
	errTooLarge = &smtp.SMTPError{Code: 552, EnhancedCode: smtp.EnhancedCode{5, 3, 4},
		Message: "Message too large"}
	errStoreFailed = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0},
		Message: "Could not store the message, try again later"}
)

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
	// ReadTimeout is how long a client may stay silent, between commands
	// and within a message; WriteTimeout bounds each reply. Defaults
	// DefaultReadTimeout and DefaultWriteTimeout.
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
	draining atomic.Bool

	messages *metrics.CounterVec
}

// NewServer returns a server for cfg; call Serve to run it. The error
// says what is wrong with cfg.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Intake == nil {
		return nil, errors.New("ingest: smtp.Config.Intake is required")
	}
	if cfg.MaxBytes < 0 || cfg.MaxConns < 0 || cfg.ReadTimeout < 0 || cfg.WriteTimeout < 0 || cfg.IngestTimeout < 0 {
		return nil, errors.New("ingest: SMTP limits and timeouts must not be negative")
	}
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, intake: cfg.Intake, log: cfg.Logger, conns: map[*smtpConn]struct{}{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	srv := smtp.NewServer(smtp.BackendFunc(s.newSession))
	srv.Domain = cfg.Hostname
	srv.MaxMessageBytes = cfg.MaxBytes
	srv.MaxRecipients = defaultMaxRecipients
	srv.MaxLineLength = maxLineLength
	srv.ReadTimeout = cfg.ReadTimeout
	srv.WriteTimeout = cfg.WriteTimeout
	srv.TLSConfig = cfg.TLS
	srv.ErrorLog = smtpErrorLog{cfg.Logger}
	s.srv = srv
	if cfg.Metrics != nil {
		s.messages = cfg.Metrics.Counter("dmarcd_smtp_messages_total",
			"SMTP messages by outcome: stored, quarantined, too_large, failed.", "outcome")
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
// a connection beyond MaxConns, so that a flood of connections costs a
// line each instead of a goroutine and buffers held open.
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
		s.mu.Lock()
		full := len(s.conns) >= s.cfg.MaxConns
		var tc *smtpConn
		if !full {
			tc = &smtpConn{Conn: c, s: s}
			s.conns[tc] = struct{}{}
		}
		s.mu.Unlock()
		if !full {
			return tc, nil
		}
		s.log.Warn("smtp connection refused: too many connections", "remote", c.RemoteAddr().String(), "max_conns", s.cfg.MaxConns)
		go func() {
			_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			_, _ = io.WriteString(c, "421 4.3.2 "+s.cfg.Hostname+" Too many connections, try again later\r\n")
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
	inData atomic.Bool
	closed sync.Once
}

// SetReadDeadline is the deadline go-smtp sets before each command.
func (c *smtpConn) SetReadDeadline(t time.Time) error {
	if c.s.draining.Load() && !c.inData.Load() {
		t = time.Now()
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

func (ss *session) Reset() { ss.from, ss.rcpts = "", nil }

func (ss *session) Logout() error { return nil }

func (ss *session) Mail(from string, _ *smtp.MailOptions) error {
	ss.from = from
	ss.rcpts = nil
	return nil
}

// Rcpt accepts only reporting addresses, before any message byte is sent.
func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if !ss.s.intake.KnownRecipient(to) {
		ss.s.log.Debug("smtp recipient refused", "remote", ss.remote, "from", ss.from, "rcpt", to)
		return errUnknownRecipient
	}
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
// are distinct domains. go-smtp writes the reply we return.
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
		if errors.Is(err, smtp.ErrDataTooLarge) {
			ss.s.count("too_large")
			ss.s.log.Info("smtp message refused: too large", append(attrs, "status", 552, "max_bytes", ss.s.cfg.MaxBytes)...)
			return errTooLarge
		}
		ss.s.count("failed")
		ss.s.log.Warn("smtp message not received", append(attrs, "status", 451, "error", err)...)
		return errStoreFailed
	}
	received := ss.s.cfg.Now()
	var stored, duplicates, records, tls int
	var quarantined []string
	var counts tally
	for _, rcpt := range ss.rcpts {
		res, err := ss.ingest(sp.Reader(), rcpt, received)
		if err != nil {
			ss.s.count("failed")
			ss.s.log.Error("smtp message not stored", append(attrs, "bytes", sp.Size(), "status", 451,
				"failed_rcpt", rcpt, "duration", time.Since(start).Round(time.Millisecond), "error", err)...)
			return errStoreFailed
		}
		counts.add(res)
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
		if res.Quarantined != "" {
			quarantined = append(quarantined, res.Quarantined+" ("+res.Reason+")")
		}
	}
	attrs = append(attrs, "bytes", sp.Size(), "status", 250, "reports", stored, "tls_reports", tls, "records", records, "duplicates", duplicates)
	if len(quarantined) > 0 {
		ss.s.count("quarantined")
		attrs = append(attrs, "quarantined", strings.Join(quarantined, "; "))
	} else {
		ss.s.count("stored")
	}
	ss.s.log.Info("smtp message accepted", append(attrs, "duration", time.Since(start).Round(time.Millisecond))...)
	return counts.reply()
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
