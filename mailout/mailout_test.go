package mailout_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-message/mail"
	"github.com/emersion/go-smtp"

	"github.com/dmarcd/dmarcd/internal/egress"
	"github.com/dmarcd/dmarcd/internal/mailtest"
	"github.com/dmarcd/dmarcd/mailout"
)

var env = mailout.Envelope{From: "dmarcd@example.net", MessageID: mailout.MessageID("0193a1e2-7b4c-7d2e-9f00-1a2b3c4d5e6f", "dmarc.example.net"),
	Date: time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)}

// parsed is a built message read back with go-message.
type parsed struct {
	header mail.Header
	parts  map[string]string // content type -> body
}

func parse(t *testing.T, raw []byte) parsed {
	t.Helper()
	r, err := mail.CreateReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("the message does not parse: %v\n%s", err, raw)
	}
	p := parsed{header: r.Header, parts: map[string]string{}}
	for {
		part, err := r.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		h, ok := part.Header.(*mail.InlineHeader)
		if !ok {
			t.Fatalf("part %T, want inline", part.Header)
		}
		ct, _, _ := h.ContentType()
		b, _ := io.ReadAll(part.Body)
		p.parts[ct] = string(b)
	}
	return p
}

func TestBuild(t *testing.T) {
	m := &mailout.Message{To: "ops@example.org", Subject: "Alerts for bücher.example: DMARC failures ↑",
		Text: "Plain text with ümlauts and a long line " + strings.Repeat("x", 200), HTML: "<p>HTML part</p>",
		ListUnsubscribe: "https://dmarc.example.net/settings/notifications?email=ops%40example.org",
		Headers:         map[string]string{"X-Dmarcd-Kind": "alert"}}
	raw, err := mailout.Build(m, env)
	if err != nil {
		t.Fatal(err)
	}
	head := raw[:bytes.Index(raw, []byte("\r\n\r\n"))]
	for _, b := range head {
		if b >= 0x80 {
			t.Fatalf("header carries raw non-ASCII bytes:\n%s", head)
		}
	}
	for _, line := range bytes.Split(raw, []byte("\r\n")) {
		if len(line) > 998 {
			t.Fatalf("a line of %d bytes", len(line))
		}
	}
	p := parse(t, raw)
	if got, _ := p.header.Subject(); got != m.Subject {
		t.Errorf("subject %q, want %q", got, m.Subject)
	}
	if d, err := p.header.Date(); err != nil || !d.Equal(env.Date) {
		t.Errorf("date %v (%v), want %v", d, err, env.Date)
	}
	if id, _ := p.header.MessageID(); id != env.MessageID {
		t.Errorf("Message-ID %q, want %q", id, env.MessageID)
	}
	for k, want := range map[string]string{"Auto-Submitted": "auto-generated", "X-Dmarcd-Kind": "alert",
		"List-Unsubscribe": "<" + m.ListUnsubscribe + ">", "MIME-Version": "1.0"} {
		if got := p.header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	if from, _ := p.header.AddressList("From"); len(from) != 1 || from[0].Address != env.From {
		t.Errorf("From %v", from)
	}
	if to, _ := p.header.AddressList("To"); len(to) != 1 || to[0].Address != m.To {
		t.Errorf("To %v", to)
	}
	if ct, _, _ := p.header.ContentType(); ct != "multipart/alternative" {
		t.Errorf("content type %q", ct)
	}
	if p.parts["text/plain"] != m.Text || p.parts["text/html"] != m.HTML {
		t.Errorf("parts %q", p.parts)
	}
}

func TestBuildOnePart(t *testing.T) {
	raw, err := mailout.Build(&mailout.Message{To: "a@example.org", Subject: "s", Text: "only text"}, env)
	if err != nil {
		t.Fatal(err)
	}
	r, err := mail.CreateReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if ct, _, _ := r.Header.ContentType(); ct != "text/plain" {
		t.Errorf("content type %q, want text/plain", ct)
	}
}

func TestBuildRefuses(t *testing.T) {
	ok := mailout.Message{To: "a@example.org", Subject: "s", Text: "t"}
	for name, c := range map[string]func(m *mailout.Message) *mailout.Envelope{
		"CRLF in subject":    func(m *mailout.Message) *mailout.Envelope { m.Subject = "hi\r\nBcc: victim@example.com"; return nil },
		"LF in subject":      func(m *mailout.Message) *mailout.Envelope { m.Subject = "hi\nX: y"; return nil },
		"CR in header value": func(m *mailout.Message) *mailout.Envelope { m.Headers = map[string]string{"X-A": "a\rb"}; return nil },
		"reserved header": func(m *mailout.Message) *mailout.Envelope {
			m.Headers = map[string]string{"bcc": "x@example.com"}
			return nil
		},
		"header name with colon": func(m *mailout.Message) *mailout.Envelope { m.Headers = map[string]string{"X-A: b": "c"}; return nil },
		"address with CRLF": func(m *mailout.Message) *mailout.Envelope {
			m.To = "a@example.org\r\nRCPT TO:<b@example.org>"
			return nil
		},
		"display name":             func(m *mailout.Message) *mailout.Envelope { m.To = "Eve <a@example.org>"; return nil },
		"two addresses":            func(m *mailout.Message) *mailout.Envelope { m.To = "a@example.org, b@example.org"; return nil },
		"no body":                  func(m *mailout.Message) *mailout.Envelope { m.Text = ""; return nil },
		"empty subject":            func(m *mailout.Message) *mailout.Envelope { m.Subject = ""; return nil },
		"unsubscribe not http":     func(m *mailout.Message) *mailout.Envelope { m.ListUnsubscribe = "javascript:alert(1)"; return nil },
		"unsubscribe with bracket": func(m *mailout.Message) *mailout.Envelope { m.ListUnsubscribe = "https://x/>, <mailto:e@x"; return nil },
		"bad sender":               func(*mailout.Message) *mailout.Envelope { return &mailout.Envelope{From: "x", MessageID: "a@b"} },
		"Message-ID with brackets": func(*mailout.Message) *mailout.Envelope { return &mailout.Envelope{From: "a@b.c", MessageID: "<a@b>"} },
		"Message-ID with line feed": func(*mailout.Message) *mailout.Envelope {
			return &mailout.Envelope{From: "a@b.c", MessageID: "a@b\nX: y"}
		},
	} {
		t.Run(name, func(t *testing.T) {
			m := ok
			e := env
			if got := c(&m); got != nil {
				e = *got
			}
			if _, err := mailout.Build(&m, e); !errors.Is(err, mailout.ErrInvalid) {
				t.Errorf("Build: %v, want ErrInvalid", err)
			}
		})
	}
}

// FuzzBuild: whatever the subject and body, Build either refuses or
// makes a message that parses to the same subject and text with no
// header field besides its own.
func FuzzBuild(f *testing.F) {
	f.Add("Alerts for example.com", "text")
	f.Add("a\r\nBcc: x@example.com", "<script>")
	f.Add("=?utf-8?q?x?=", "\r\n.\r\n")
	f.Add(strings.Repeat("ü", 300), "line\n.\nend")
	f.Fuzz(func(t *testing.T, subject, text string) {
		raw, err := mailout.Build(&mailout.Message{To: "a@example.org", Subject: subject, Text: text}, env)
		if err != nil {
			return
		}
		r, err := mail.CreateReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("does not parse: %v", err)
		}
		// (A subject that is itself an encoded word reads back decoded.)
		if got, _ := r.Header.Subject(); got != subject && strings.TrimSpace(got) != strings.TrimSpace(subject) && !strings.Contains(subject, "=?") {
			t.Errorf("subject %q, want %q", got, subject)
		}
		fields := r.Header.Fields()
		for fields.Next() {
			switch strings.ToLower(fields.Key()) {
			case "from", "to", "subject", "date", "message-id", "mime-version", "auto-submitted",
				"x-auto-response-suppress", "content-type", "content-transfer-encoding":
			default:
				t.Errorf("unexpected header field %q", fields.Key())
			}
		}
	})
}

func newRelay(t *testing.T, s *mailtest.Sink, mode, user, pass string) *mailout.Relay {
	t.Helper()
	r, err := mailout.NewRelay(mailout.RelayConfig{Addr: s.Addr, TLS: mode, User: user, Password: pass, From: "dmarcd@example.net",
		Policy: egress.Policy{AllowPrivate: true, RootCAs: s.Cert.Pool}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func build(t *testing.T) []byte {
	raw, err := mailout.Build(&mailout.Message{To: "ops@example.org", Subject: "test", Text: "t", HTML: "<p>h</p>"}, env)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestSendStartTLSAuth(t *testing.T) {
	s := mailtest.StartSink(t, mailtest.SinkConfig{User: "relayuser", Pass: "s3cret"})
	r := newRelay(t, s, mailout.TLSStartTLS, "relayuser", "s3cret")
	if strings.Contains(r.String(), "s3cret") {
		t.Errorf("String %q shows the password", r)
	}
	if _, err := r.Send(context.Background(), "ops@example.org", build(t)); err != nil {
		t.Fatal(err)
	}
	got := s.Received()
	if len(got) != 1 || !got[0].TLS || got[0].AuthUser != "relayuser" || got[0].From != "dmarcd@example.net" ||
		len(got[0].To) != 1 || got[0].To[0] != "ops@example.org" {
		t.Fatalf("received %+v", got)
	}
	p := parse(t, got[0].Data)
	if p.parts["text/plain"] != "t" || p.parts["text/html"] != "<p>h</p>" {
		t.Errorf("parts %q", p.parts)
	}
}

func TestSendImplicitTLS(t *testing.T) {
	s := mailtest.StartSink(t, mailtest.SinkConfig{TLS: "tls"})
	if _, err := newRelay(t, s, mailout.TLSImplicit, "", "").Send(context.Background(), "ops@example.org", build(t)); err != nil {
		t.Fatal(err)
	}
	if got := s.Received(); len(got) != 1 || !got[0].TLS {
		t.Fatalf("received %+v", got)
	}
}

func TestSendNoneOnLoopback(t *testing.T) {
	s := mailtest.StartSink(t, mailtest.SinkConfig{TLS: "none"})
	// No AllowPrivate given: none implies it (the relay is on loopback).
	r, err := mailout.NewRelay(mailout.RelayConfig{Addr: s.Addr, TLS: mailout.TLSNone, From: "dmarcd@example.net"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Send(context.Background(), "ops@example.org", build(t)); err != nil {
		t.Fatal(err)
	}
	if got := s.Received(); len(got) != 1 || got[0].TLS {
		t.Fatalf("received %+v", got)
	}
}

func TestSendFailures(t *testing.T) {
	refuse := func(code int) func(int, []byte) error {
		return func(int, []byte) error {
			return &smtp.SMTPError{Code: code, EnhancedCode: smtp.EnhancedCode{code / 100, 0, 0}, Message: "no"}
		}
	}
	for _, c := range []struct {
		name      string
		cfg       mailtest.SinkConfig
		user      string
		pass      string
		permanent bool
		stage     string
	}{
		{"4xx", mailtest.SinkConfig{Respond: refuse(451)}, "", "", false, "data"},
		{"5xx", mailtest.SinkConfig{Respond: refuse(554)}, "", "", true, "data"},
		{"wrong password", mailtest.SinkConfig{User: "u", Pass: "p"}, "u", "wrong", true, "auth"},
		{"no sign-in", mailtest.SinkConfig{User: "u", Pass: "p"}, "", "", true, "mail"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := mailtest.StartSink(t, c.cfg)
			_, err := newRelay(t, s, mailout.TLSStartTLS, c.user, c.pass).Send(context.Background(), "ops@example.org", build(t))
			var se *mailout.SendError
			if !errors.As(err, &se) || se.Permanent != c.permanent || se.Stage != c.stage || mailout.IsPermanent(err) != c.permanent {
				t.Fatalf("err %v (%+v), want permanent=%v at %s", err, se, c.permanent, c.stage)
			}
			if len(s.Received()) != 0 {
				t.Error("the sink kept the message")
			}
		})
	}
}

func TestSendTLSUnverified(t *testing.T) {
	s := mailtest.StartSink(t, mailtest.SinkConfig{})
	r, err := mailout.NewRelay(mailout.RelayConfig{Addr: s.Addr, From: "dmarcd@example.net", Policy: egress.Policy{AllowPrivate: true}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Send(context.Background(), "ops@example.org", build(t))
	var se *mailout.SendError
	if !errors.As(err, &se) || se.Stage != "tls" || se.Permanent {
		t.Fatalf("err %v, want a temporary TLS failure (the test certificate is not trusted)", err)
	}
}

func TestSendLoopbackRefusedByPolicy(t *testing.T) {
	s := mailtest.StartSink(t, mailtest.SinkConfig{})
	r, err := mailout.NewRelay(mailout.RelayConfig{Addr: s.Addr, From: "dmarcd@example.net"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Send(context.Background(), "ops@example.org", build(t))
	if _, refused := egress.RefusedReason(err); !refused {
		t.Fatalf("err %v, want the egress policy's refusal", err)
	}
	if s.Attempts() != 0 {
		t.Error("the sink was reached")
	}
}

func TestNewRelayRefuses(t *testing.T) {
	for _, c := range []struct {
		cfg  mailout.RelayConfig
		want string
	}{
		{mailout.RelayConfig{Addr: "smtp.example.net:25", TLS: mailout.TLSNone, From: "a@b.c"}, "only for a relay on loopback"},
		{mailout.RelayConfig{Addr: "192.0.2.1:25", TLS: mailout.TLSNone, From: "a@b.c"}, "only for a relay on loopback"},
		{mailout.RelayConfig{Addr: "smtp.example.net", From: "a@b.c"}, "host:port"},
		{mailout.RelayConfig{Addr: "smtp.example.net:99999", From: "a@b.c"}, "bad port"},
		{mailout.RelayConfig{Addr: "smtp.example.net:587", TLS: "ssl", From: "a@b.c"}, "starttls, tls or none"},
		{mailout.RelayConfig{Addr: "smtp.example.net:587", From: "not an address"}, "--mail-from"},
		{mailout.RelayConfig{Addr: "smtp.example.net:587", From: "a@b.c", Password: "p"}, "without --mail-relay-user"},
	} {
		_, err := mailout.NewRelay(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg.Addr, err, c.want)
		}
	}
	for _, addr := range []string{"127.0.0.1:25", "[::1]:25", "localhost:25"} {
		if _, err := mailout.NewRelay(mailout.RelayConfig{Addr: addr, TLS: mailout.TLSNone, From: "a@b.c"}); err != nil {
			t.Errorf("%s: %v", addr, err)
		}
	}
}
