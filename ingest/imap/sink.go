package imap

import (
	"bufio"
	"bytes"
	"context"
	"net/textproto"
	"strings"

	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/metrics"
)

// PipelineSink is the Sink of a running server: each message goes through
// the ingest pipeline (source "imap"), routed only among the domains of
// the mailbox's organization. Pipeline.Ingest returns once the reports are
// committed or the message quarantined, which is what Sink promises; a
// message that holds no report at all comes back NotReport and is neither
// stored nor quarantined, so it stays where it is.
type PipelineSink struct {
	Pipeline *ingest.Pipeline
	Metrics  *Metrics // nil records nothing
}

var _ Sink = PipelineSink{}

// Ingest hands raw to the pipeline.
func (s PipelineSink) Ingest(ctx context.Context, orgID string, raw []byte) (Outcome, error) {
	res, err := s.Pipeline.Ingest(ctx, bytes.NewReader(raw), ingest.Arrival{
		Source: ingest.SourceIMAP, OrgID: orgID, Name: messageName(raw),
	})
	if err != nil {
		s.Metrics.message("error")
		return Outcome{}, err
	}
	out := OutcomeOf(res)
	switch {
	case out.Quarantined > 0:
		s.Metrics.message("quarantined")
	case out.done():
		s.Metrics.message("report")
	default:
		s.Metrics.message("not_report")
	}
	return out, nil
}

// OutcomeOf counts what the pipeline did with one message. A result with
// neither reports nor a quarantine entry is NotReport: the message is left
// in place.
func OutcomeOf(res *ingest.Result) Outcome {
	var o Outcome
	for _, r := range res.Reports {
		switch r.Kind {
		case ingest.KindAggregate:
			o.Aggregate++
		case ingest.KindFailure:
			o.Failure++
		default: // the only other kind: SMTP TLS reports
			o.TLS++
		}
	}
	if res.Quarantined != "" {
		o.Quarantined = 1
	} else {
		o.Expired = len(res.Expired)
	}
	if !o.done() {
		o.NotReport = 1
	}
	return o
}

// messageName names a mail in logs and quarantine by its Message-ID (and
// Subject), never by its body.
func messageName(raw []byte) string {
	h, _ := textproto.NewReader(bufio.NewReader(bytes.NewReader(raw[:min(len(raw), 16<<10)]))).ReadMIMEHeader()
	name := "imap"
	if id := strings.TrimSpace(h.Get("Message-Id")); id != "" {
		name += " " + clip(id, 200)
	}
	if subj := strings.TrimSpace(h.Get("Subject")); subj != "" {
		name += " (" + clip(subj, 200) + ")"
	}
	return name
}

func clip(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > n {
		return s[:n]
	}
	return s
}

// Metrics are the series of the IMAP intake:
// dmarcd_imap_messages_total{outcome} (report, quarantined, not_report,
// error) and dmarcd_imap_polls_total{result} (ok, error). A nil *Metrics
// records nothing.
type Metrics struct {
	messages *metrics.CounterVec
	polls    *metrics.CounterVec
}

// NewMetrics registers the series in r (once per Registry); nil r gives
// nil.
func NewMetrics(r *metrics.Registry) *Metrics {
	if r == nil {
		return nil
	}
	return &Metrics{
		messages: r.Counter("dmarcd_imap_messages_total",
			"Mails read from mailboxes, by outcome (report, quarantined, not_report, error).", "outcome"),
		polls: r.Counter("dmarcd_imap_polls_total", "Mailbox polls, by result (ok, error).", "result"),
	}
}

func (m *Metrics) message(outcome string) {
	if m != nil {
		m.messages.With(outcome).Inc()
	}
}

func (m *Metrics) poll(err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.polls.With("error").Inc()
	} else {
		m.polls.With("ok").Inc()
	}
}
