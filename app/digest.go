package app

import (
	"context"

	"github.com/dmarcd/dmarcd/digest"
	"github.com/dmarcd/dmarcd/mailout"
	"github.com/dmarcd/dmarcd/store"
)

// DigestResult is a digest built and rendered for one recipient.
type DigestResult struct {
	Digest  *digest.Digest
	Message *digest.Message
}

// digests is the builder of Config.Digests, or one over the store.
func (a *App) digests() *digest.Builder {
	if a.cfg.Digests != nil {
		return a.cfg.Digests
	}
	return &digest.Builder{DB: a.db}
}

// Digest builds the actor's organization's digest of the last complete
// period p now, rendered for recipient (its settings link; "" for none):
// what 'dmarcd digest preview' prints and a digest mail carries.
func (a *App) Digest(ctx context.Context, actor Actor, p digest.Period, recipient string) (*DigestResult, error) {
	if err := Authorize(actor, ReadNotifications); err != nil {
		return nil, err
	}
	d, err := a.digests().Build(ctx, actor.orgID(), p, a.now())
	if err != nil {
		return nil, err
	}
	o := digest.RenderOptions{PublicURL: a.cfg.PublicURL}
	if a.cfg.PublicURL != "" && recipient != "" {
		o.SettingsURL = mailout.SettingsURL(a.cfg.PublicURL, recipient)
	}
	m, err := digest.Render(d, o)
	if err != nil {
		return nil, err
	}
	return &DigestResult{Digest: d, Message: m}, nil
}

// SendDigest queues the actor's organization's digest of period p for
// to now, outside the schedule (no marker: the scheduled one still goes
// out), through the outbox as QueueMail does.
func (a *App) SendDigest(ctx context.Context, actor Actor, p digest.Period, to string) (*store.MailStatus, error) {
	if err := Authorize(actor, SendMail); err != nil {
		return nil, err
	}
	addr, err := mailout.ParseAddress(to)
	if err != nil {
		return nil, invalid(err, FieldError{Field: "to", Message: "not a mail address"})
	}
	res, err := a.Digest(ctx, actor, p, addr)
	if err != nil {
		return nil, err
	}
	from, _ := p.Bounds(res.Digest.GeneratedAt)
	m := &store.OutgoingMail{Kind: store.MailKindDigest, To: addr, Subject: res.Message.Subject, Text: res.Message.Text,
		HTML: res.Message.HTML, Headers: map[string]string{"X-Dmarcd-Digest": p.Key(from)}}
	if a.cfg.PublicURL != "" {
		m.ListUnsubscribe = mailout.SettingsURL(a.cfg.PublicURL, addr)
	}
	return a.QueueMail(ctx, actor, m)
}
