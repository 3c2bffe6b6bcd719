package app

import (
	"context"
	"errors"
	"strings"

	"github.com/dmarcd/dmarcd/mailout"
	"github.com/dmarcd/dmarcd/store"
)

// Notification settings and mail (issue 27): the organization's recipient
// list (who is mailed which alerts at once, and which digest), one
// recipient's own entry (for "my settings" once people exist), the mail
// log, queuing a built mail, and a test mail through the relay.

// MailLogLimit is how many entries MailLog returns at most.
const MailLogLimit = 200

// Notifications returns the organization's notification settings.
func (a *App) Notifications(_ context.Context, actor Actor) (*store.NotificationSettings, error) {
	if err := Authorize(actor, ReadNotifications); err != nil {
		return nil, err
	}
	return a.db.NotificationSettings(actor.orgID())
}

// SetNotifications replaces the organization's recipient list and returns
// it as stored (addresses lower-cased, in order). Invalid names the entry
// sent wrong.
func (a *App) SetNotifications(_ context.Context, actor Actor, recipients []store.NotificationRecipient) (*store.NotificationSettings, error) {
	if err := Authorize(actor, WriteNotifications); err != nil {
		return nil, err
	}
	s, err := a.db.PutNotificationSettings(actor.orgID(), recipients)
	return s, recipientsInvalid(err)
}

// NotificationFor returns the entry of email in the organization's list
// (a person's own settings once people exist), or an entry mailing
// nothing when the address is not listed. Invalid for a malformed
// address.
func (a *App) NotificationFor(_ context.Context, actor Actor, email string) (*store.NotificationRecipient, error) {
	if err := Authorize(actor, ReadNotifications); err != nil {
		return nil, err
	}
	n, err := store.NormalizeRecipient(store.NotificationRecipient{Email: email})
	if err != nil {
		return nil, recipientsInvalid(err)
	}
	s, err := a.db.NotificationSettings(actor.orgID())
	if err != nil {
		return nil, err
	}
	if r := s.Recipient(n.Email); r != nil {
		return r, nil
	}
	return &n, nil
}

// SetNotificationFor sets the entry of email in the organization's list
// to r (its Email is taken from email), adding it when missing; an entry
// that mails nothing (no severity, digest off) is removed. It returns
// the entry as stored. The lead wires this to "my settings" once people
// exist: today it needs WriteNotifications like the list.
func (a *App) SetNotificationFor(_ context.Context, actor Actor, email string, r store.NotificationRecipient) (*store.NotificationRecipient, error) {
	if err := Authorize(actor, WriteNotifications); err != nil {
		return nil, err
	}
	r.Email = email
	n, err := store.NormalizeRecipient(r)
	if err != nil {
		return nil, recipientsInvalid(err)
	}
	remove := len(n.Severities) == 0 && n.Digest == store.DigestOff
	if _, err := a.db.PutNotificationRecipient(actor.orgID(), n, remove); err != nil {
		return nil, recipientsInvalid(err)
	}
	return &n, nil
}

// recipientsInvalid names the field of a store ErrInvalid: recipients.
func recipientsInvalid(err error) error {
	if se, ok := errors.AsType[*store.Error](err); ok && errors.Is(err, store.ErrInvalid) {
		return invalid(err, FieldError{Field: "recipients", Message: se.Msg})
	}
	return err
}

// MailLog returns the newest mails of the organization (at most
// MailLogLimit): queued, sent or failed, with the last error. The
// operator outside an organization sees every organization's.
func (a *App) MailLog(_ context.Context, actor Actor, limit int) ([]*store.MailStatus, error) {
	if err := Authorize(actor, ReadNotifications); err != nil && !actor.operator {
		return nil, err
	}
	if limit <= 0 || limit > MailLogLimit {
		limit = MailLogLimit
	}
	return a.db.MailLog(actor.orgID(), limit)
}

// QueueMail queues a built mail in the durable outbox for the sending
// job, as the organization's (m.OrgID is set to the actor's), and returns
// its status. It is how a digest sent now (dmarcd digest preview
// --send-to) reaches the relay; the digest job queues through
// store.DB.EnqueueMail directly. The operator's alone. Invalid for a mail
// that cannot be sent as it is (address, line breaks in header values,
// no body). Without a relay the mail waits in the outbox until serve
// runs with --mail-relay.
func (a *App) QueueMail(_ context.Context, actor Actor, m *store.OutgoingMail) (*store.MailStatus, error) {
	if err := Authorize(actor, SendMail); err != nil {
		return nil, err
	}
	m.OrgID = actor.orgID()
	st, err := a.db.EnqueueMail(m)
	if se, ok := errors.AsType[*store.Error](err); ok && errors.Is(err, store.ErrInvalid) {
		return nil, invalid(err, FieldError{Field: "mail", Message: se.Msg})
	}
	return st, err
}

// MailTestResult is the outcome of SendTestMail.
type MailTestResult struct {
	To    string `json:"to"`
	Relay string `json:"relay"`
	// Sent: the relay answered 250; Reply is its answer.
	Sent  bool   `json:"sent"`
	Reply string `json:"reply,omitempty"`
	// Error is why not (the relay's answer, or the connection's failure);
	// Permanent when the relay refused for good (5xx).
	Error     string `json:"error,omitempty"`
	Permanent bool   `json:"permanent,omitempty"`
}

// errNoRelay is what mail operations answer on a server without
// --mail-relay.
var errNoRelay = &Error{Kind: Invalid, Msg: "no mail relay is configured: start dmarcd serve with --mail-relay HOST:PORT and --mail-from ADDRESS",
	Fields: []FieldError{{Field: "relay", Message: "not configured"}}}

// SendTestMail sends a short test message to to through the relay at
// once (not through the outbox), and reports what the relay answered: a
// refusal is a result, not an error. The operator's alone. Invalid for a
// malformed address or a server without a relay.
func (a *App) SendTestMail(ctx context.Context, actor Actor, to string) (*MailTestResult, error) {
	if err := Authorize(actor, SendMail); err != nil {
		return nil, err
	}
	relay := a.cfg.Mail
	if relay == nil {
		return nil, errNoRelay
	}
	addr, err := mailout.ParseAddress(to)
	if err != nil {
		return nil, invalid(err, FieldError{Field: "to", Message: strings.TrimPrefix(err.Error(), mailout.ErrInvalid.Error()+": ")})
	}
	now := a.now()
	id := store.NewID()
	host := a.messageHost()
	settings := mailout.SettingsURL(a.cfg.PublicURL, addr)
	msg, err := mailout.Build(&mailout.Message{To: addr, Subject: "dmarcd test message",
		Text: "This is a test message from dmarcd, sent with 'dmarcd mail test' through " + relay.String() + " at " +
			now.Format("2006-01-02 15:04:05 UTC") + ".\n\nAlert mail and digests reach you the same way.\n",
		HTML: "<!DOCTYPE html><html><body><p>This is a test message from <strong>dmarcd</strong>, sent with <code>dmarcd mail test</code> at " +
			now.Format("2006-01-02 15:04:05 UTC") + ".</p><p>Alert mail and digests reach you the same way.</p></body></html>",
		ListUnsubscribe: func() string {
			if a.cfg.PublicURL == "" {
				return ""
			}
			return settings
		}(),
		Headers: map[string]string{"X-Dmarcd-Kind": store.MailKindTest}},
		mailout.Envelope{From: relay.From(), MessageID: mailout.MessageID(id, host), Date: now})
	if err != nil {
		return nil, err
	}
	res := &MailTestResult{To: addr, Relay: relay.String()}
	rc, err := relay.Send(ctx, addr, msg)
	if err != nil {
		res.Error, res.Permanent = err.Error(), mailout.IsPermanent(err)
		a.log.Warn("test mail not sent", "to", addr, "relay", relay.String(), "error", err)
		return res, nil
	}
	res.Sent, res.Reply = true, rc.Reply
	a.log.Info("test mail sent", "to", addr, "relay", relay.String())
	return res, nil
}

// messageHost is the host of Message-IDs: the --public-url host, else
// the relay's.
func (a *App) messageHost() string {
	if u := a.cfg.PublicURL; u != "" {
		host := u[strings.Index(u, "://")+3:]
		if i := strings.IndexAny(host, ":/"); i >= 0 {
			host = host[:i]
		}
		if host != "" {
			return host
		}
	}
	if a.cfg.Mail != nil {
		return a.cfg.Mail.Host()
	}
	return "localhost"
}
