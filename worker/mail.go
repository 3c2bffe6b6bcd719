package worker

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/dmarcd/dmarcd/mailout"
	"github.com/dmarcd/dmarcd/metrics"
	"github.com/dmarcd/dmarcd/store"
)

// Mail sending defaults.
const (
	// DefaultMailEvery is how often the sending job looks for due mail.
	DefaultMailEvery = 5 * time.Second
	// mailBatch is how many due mails one look takes.
	mailBatch = 50
)

// DefaultMailRetryDelays returns the waits after each failed attempt at a
// mail (a 4xx answer or a network error): exponential from one minute,
// doubling, capped at four hours, eleven attempts over about 14 hours.
func DefaultMailRetryDelays() []time.Duration {
	var out []time.Duration
	for d := time.Minute; len(out) < 10; d *= 2 {
		out = append(out, min(d, 4*time.Hour))
	}
	return out
}

// MailRelay is what the sending job needs of the relay (*mailout.Relay).
type MailRelay interface {
	Send(ctx context.Context, rcpt string, msg []byte) (*mailout.Receipt, error)
	From() string
	Host() string
}

// MailSender is the job that drains the mail outbox through the relay:
// each due mail is built (mailout.Build: the same Message-ID and Date on
// every attempt), sent, and its outcome recorded in the transaction that
// follows the relay's answer: sent on 250, given up on 5xx, retried after
// RetryDelays on anything else.
type MailSender struct {
	Store *store.DB
	Relay MailRelay
	// MessageHost is the host of Message-IDs (the --public-url host); ""
	// means the relay's.
	MessageHost string
	// RetryDelays are the waits after each failed attempt; nil means
	// DefaultMailRetryDelays.
	RetryDelays []time.Duration
	// Every is the job's interval; 0 means DefaultMailEvery.
	Every   time.Duration
	Log     *slog.Logger      // nil discards
	Metrics *metrics.Registry // nil keeps the counters private
	// Now is the clock of attempts; nil means time.Now.
	Now func() time.Time

	outcomes *metrics.CounterVec
	pruned   time.Time // when the mail log was last pruned
}

// Job returns the job to give the Scheduler, and registers the metrics
// dmarcd_mail_sends_total{outcome} and dmarcd_mail_outbox_depth.
func (j *MailSender) Job() Job {
	j.init()
	every := j.Every
	if every <= 0 {
		every = DefaultMailEvery
	}
	return Job{Name: "mail-outbox", Every: every, AtStart: true, Run: j.SendDue}
}

func (j *MailSender) init() {
	if j.outcomes != nil {
		return
	}
	if j.Log == nil {
		j.Log = slog.New(slog.DiscardHandler)
	}
	if j.Now == nil {
		j.Now = time.Now
	}
	if j.RetryDelays == nil {
		j.RetryDelays = DefaultMailRetryDelays()
	}
	reg := j.Metrics
	if reg == nil {
		reg = metrics.NewRegistry()
	}
	j.outcomes = reg.Counter("dmarcd_mail_sends_total",
		"Mail send attempts by outcome: sent; queued (a retry is due); failed (given up).", "outcome")
	reg.GaugeFunc("dmarcd_mail_outbox_depth", "Mails waiting in the outbox.", func() float64 {
		n, _ := j.Store.MailOutboxDepth()
		return float64(n)
	})
}

// SendDue sends every mail due, one after the other, until none is due or
// ctx ends; an attempt cut short by ctx is not recorded (the mail stays
// due). The error is a failure to read or write the store.
func (j *MailSender) SendDue(ctx context.Context, _ time.Time) error {
	j.init()
	tried := map[string]bool{} // one attempt per mail and run
	for ctx.Err() == nil {
		due, err := j.Store.DueMails(j.Now(), mailBatch)
		if err != nil {
			return err
		}
		n := 0
		for _, d := range due {
			if ctx.Err() != nil {
				return nil
			}
			if tried[d.Mail.ID] {
				continue
			}
			tried[d.Mail.ID] = true
			n++
			if err := j.attempt(ctx, d); err != nil {
				return err
			}
		}
		if n == 0 {
			break
		}
	}
	if time.Since(j.pruned) > time.Hour {
		j.pruned = time.Now()
		if _, err := j.Store.PruneMailLog(j.Now().Add(-store.MailLogKeep)); err != nil {
			return err
		}
	}
	return nil
}

// attempt sends one mail and records the outcome.
func (j *MailSender) attempt(ctx context.Context, d *store.DueMail) error {
	host := j.MessageHost
	if host == "" {
		host = j.Relay.Host()
	}
	m := d.Mail
	res := store.MailAttempt{Mail: d}
	msg, err := mailout.Build(MessageOf(&m), mailout.Envelope{From: j.Relay.From(),
		MessageID: mailout.MessageID(m.ID, host), Date: m.CreatedAt})
	if err == nil {
		_, err = j.Relay.Send(ctx, m.To, msg)
		if err != nil && ctx.Err() != nil {
			return nil // stopped: left due, sent again later
		}
	}
	res.At = j.Now()
	switch {
	case err == nil:
		res.Sent = true
	case errors.Is(err, mailout.ErrInvalid):
		res.Permanent, res.Error = true, err.Error()
	default:
		res.Permanent, res.Error = mailout.IsPermanent(err), err.Error()
	}
	st, ferr := j.Store.FinishMail(res, j.RetryDelays)
	if ferr != nil {
		return ferr
	}
	if st == nil {
		return nil
	}
	attrs := []any{"mail_id", m.ID, "kind", m.Kind, "org_id", m.OrgID, "attempt", d.Attempt}
	switch st.Status {
	case store.MailSent:
		j.Log.Info("mail sent", append(attrs, "relay", j.relayName())...)
	case store.MailQueued:
		j.Log.Warn("mail not sent, will retry", append(attrs, "error", res.Error, "next_attempt_at", st.NextAttemptAt)...)
	case store.MailFailed:
		j.Log.Error("mail given up", append(attrs, "error", res.Error, "permanent", res.Permanent)...)
	}
	j.outcomes.With(st.Status).Inc()
	return nil
}

func (j *MailSender) relayName() string {
	if s, ok := j.Relay.(interface{ String() string }); ok {
		return s.String()
	}
	return ""
}

// MessageOf is the mailout.Message of a queued mail.
func MessageOf(m *store.OutgoingMail) *mailout.Message {
	h := map[string]string{"X-Dmarcd-Kind": m.Kind}
	for k, v := range m.Headers {
		h[k] = v
	}
	return &mailout.Message{To: m.To, Subject: m.Subject, Text: m.Text, HTML: m.HTML,
		ListUnsubscribe: m.ListUnsubscribe, Headers: h}
}
