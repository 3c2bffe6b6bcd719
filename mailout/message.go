// Package mailout is dmarcd's outbound mail: it builds messages (text and
// HTML as multipart/alternative, with RFC 5322 Date and Message-ID,
// Auto-Submitted and List-Unsubscribe) with github.com/emersion/go-message
// and sends them through the operator's relay (--mail-relay) with
// github.com/emersion/go-smtp, over a connection dialled by
// internal/egress. It keeps no state: the durable outbox is the store's
// (store/mail_outbox.go), and the job that drains it is worker.MailSender.
package mailout

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/mail"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	gomail "github.com/emersion/go-message/mail"
)

// Message is one mail to one person, as the callers (alert mail, digests,
// test mail) build it; Build turns it into RFC 5322 bytes.
type Message struct {
	// To is the recipient's address (a bare address, "a@example.net").
	To string
	// Subject is the subject, any Unicode; CR and LF are refused.
	Subject string
	// Text and HTML are the two alternatives; at least one is needed. A
	// message with only one has only that part.
	Text string
	HTML string
	// ListUnsubscribe is the URL of the recipient's notification settings
	// (List-Unsubscribe: <URL>); "" leaves the header out.
	ListUnsubscribe string
	// Headers are further header fields (X-Dmarcd-Kind, say); values of
	// any Unicode, CR and LF refused. The fields Build sets itself
	// (From, To, Subject, Date, Message-ID, MIME-Version, Content-*,
	// Auto-Submitted, List-Unsubscribe) cannot be given here.
	Headers map[string]string
}

// reserved are the header fields Build writes itself.
var reserved = map[string]bool{
	"from": true, "to": true, "cc": true, "bcc": true, "subject": true, "date": true, "message-id": true,
	"mime-version": true, "content-type": true, "content-transfer-encoding": true,
	"auto-submitted": true, "list-unsubscribe": true, "sender": true, "reply-to": true,
}

// ErrInvalid is what Validate and Build wrap for a message they refuse.
var ErrInvalid = errors.New("invalid message")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// ParseAddress checks a bare mail address ("a@example.net", no display
// name, no CR or LF) and returns it as given, trimmed.
func ParseAddress(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" || strings.ContainsAny(s, "\r\n<>\" ,;") || len(s) > 254 {
		return "", invalid("%q is no mail address", s)
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Address != s || a.Name != "" || !strings.Contains(s, "@") {
		return "", invalid("%q is no mail address", s)
	}
	return s, nil
}

// Validate checks m as Build will: the recipient, a subject without CR or
// LF, some body, header names and values that cannot inject fields.
func Validate(m *Message) error {
	if _, err := ParseAddress(m.To); err != nil {
		return err
	}
	if err := checkValue("Subject", m.Subject); err != nil {
		return err
	}
	if m.Subject == "" {
		return invalid("the subject is empty")
	}
	if m.Text == "" && m.HTML == "" {
		return invalid("the message has neither a text nor an HTML part")
	}
	if !utf8.ValidString(m.Text) || !utf8.ValidString(m.HTML) {
		return invalid("the body is not valid UTF-8")
	}
	if m.ListUnsubscribe != "" {
		if err := checkValue("List-Unsubscribe", m.ListUnsubscribe); err != nil {
			return err
		}
		if !strings.HasPrefix(m.ListUnsubscribe, "https://") && !strings.HasPrefix(m.ListUnsubscribe, "http://") ||
			strings.ContainsAny(m.ListUnsubscribe, "<> \t") {
			return invalid("List-Unsubscribe must be an http(s) URL")
		}
	}
	for k, v := range m.Headers {
		if k == "" || strings.IndexFunc(k, func(r rune) bool { return r <= ' ' || r >= 0x7f || r == ':' }) >= 0 {
			return invalid("header field name %q", k)
		}
		if reserved[strings.ToLower(k)] {
			return invalid("header field %s is set by dmarcd", k)
		}
		if err := checkValue(k, v); err != nil {
			return err
		}
	}
	return nil
}

// checkValue refuses a header value that could end its field (CR, LF, NUL)
// or is not UTF-8.
func checkValue(field, v string) error {
	if strings.ContainsAny(v, "\r\n\x00") {
		return invalid("%s must not contain a line break", field)
	}
	if !utf8.ValidString(v) {
		return invalid("%s is not valid UTF-8", field)
	}
	return nil
}

// SettingsPath is the web page of notification settings, the target of
// every mail's List-Unsubscribe.
const SettingsPath = "/settings/notifications"

// SettingsURL is the notification settings page under publicURL
// (--public-url, no trailing slash) for the recipient email: the
// List-Unsubscribe URL of the mail to email.
func SettingsURL(publicURL, email string) string {
	return publicURL + SettingsPath + "?email=" + url.QueryEscape(strings.ToLower(email))
}

// MessageID returns the Message-ID of the outbox entry id sent from host
// (the --public-url host, else the relay's): <id@host>, the same on every
// attempt, so a receiver can drop a copy sent twice.
func MessageID(id, host string) string {
	return id + "@" + host
}

// Envelope is what Build needs besides the message: who it is from, its
// Message-ID (without angle brackets: see MessageID) and its Date.
type Envelope struct {
	From      string
	MessageID string
	Date      time.Time
}

// Build returns m as an RFC 5322 message with CR LF line ends: From, To,
// Subject (RFC 2047 encoded when not ASCII), Date, Message-ID,
// Auto-Submitted: auto-generated, List-Unsubscribe when set, then a
// multipart/alternative body of the text part (first) and the HTML part
// (last, the preferred one), each quoted-printable UTF-8. ErrInvalid for
// what Validate refuses or a malformed envelope.
func Build(m *Message, env Envelope) ([]byte, error) {
	if err := Validate(m); err != nil {
		return nil, err
	}
	from, err := ParseAddress(env.From)
	if err != nil {
		return nil, invalid("sender: %v", err)
	}
	if env.MessageID == "" || strings.ContainsAny(env.MessageID, "<> \r\n") || !strings.Contains(env.MessageID, "@") {
		return nil, invalid("Message-ID %q", env.MessageID)
	}
	var h gomail.Header
	h.SetAddressList("From", []*gomail.Address{{Address: from}})
	h.SetAddressList("To", []*gomail.Address{{Address: m.To}})
	h.SetSubject(m.Subject)
	h.SetDate(env.Date)
	h.SetMessageID(env.MessageID)
	h.Set("MIME-Version", "1.0")
	h.Set("Auto-Submitted", "auto-generated")
	h.Set("X-Auto-Response-Suppress", "All")
	if m.ListUnsubscribe != "" {
		h.Set("List-Unsubscribe", "<"+m.ListUnsubscribe+">")
	}
	for k, v := range m.Headers {
		h.SetText(k, v) // RFC 2047 when not ASCII
	}
	var buf bytes.Buffer
	if err := writeBody(&buf, h, m); err != nil {
		return nil, fmt.Errorf("mailout: build: %w", err)
	}
	return buf.Bytes(), nil
}

func writeBody(w io.Writer, h gomail.Header, m *Message) error {
	if m.Text == "" || m.HTML == "" {
		ct, body := "text/plain", m.Text
		if m.Text == "" {
			ct, body = "text/html", m.HTML
		}
		h.SetContentType(ct, map[string]string{"charset": "utf-8"})
		h.Set("Content-Transfer-Encoding", "quoted-printable")
		pw, err := gomail.CreateSingleInlineWriter(w, h)
		if err != nil {
			return err
		}
		if _, err := io.WriteString(pw, body); err != nil {
			return err
		}
		return pw.Close()
	}
	iw, err := gomail.CreateInlineWriter(w, h)
	if err != nil {
		return err
	}
	for _, part := range []struct{ ct, body string }{{"text/plain", m.Text}, {"text/html", m.HTML}} {
		var ph gomail.InlineHeader
		ph.SetContentType(part.ct, map[string]string{"charset": "utf-8"})
		ph.Set("Content-Transfer-Encoding", "quoted-printable")
		pw, err := iw.CreatePart(ph)
		if err != nil {
			return err
		}
		if _, err := io.WriteString(pw, part.body); err != nil {
			return err
		}
		if err := pw.Close(); err != nil {
			return err
		}
	}
	return iw.Close()
}
