package app

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/store"
)

// The quarantine as an organization sees it: the mail and files kept
// because they yielded no report, addressed to one of its domains.

// Quarantined is a quarantine entry as its organization is shown it.
type Quarantined struct {
	ID         string    `json:"id"`
	ReceivedAt time.Time `json:"received_at"`
	Source     string    `json:"source"`
	MailFrom   *string   `json:"mail_from"`
	Recipient  *string   `json:"recipient"`
	DomainID   *string   `json:"domain_id"`
	Name       string    `json:"name"`
	Size       int64     `json:"size"`
	Reason     string    `json:"reason"`
	Truncated  bool      `json:"truncated"`
	Retries    int       `json:"retries"`
}

// quarantined shows e to organization orgID: the sender from the name a
// mail was kept under ("FROM -> RCPT"), the domain of its recipient when
// the organization still has it.
func (a *App) quarantined(orgID string, e *store.QuarantineEntry) Quarantined {
	v := Quarantined{ID: e.ID, ReceivedAt: e.ReceivedAt.UTC(), Source: e.Source, Name: e.Name, Size: e.Size,
		Reason: e.Reason, Truncated: e.Truncated, Retries: e.Retries}
	if e.Recipient != "" {
		v.Recipient = &e.Recipient
		if from, ok := strings.CutSuffix(e.Name, " -> "+e.Recipient); ok && e.Source == string(ingest.SourceSMTP) {
			v.MailFrom = &from
		}
		if d, err := a.db.FindDomainByReportingEmail(e.Recipient); err == nil && d.OrgID == orgID {
			v.DomainID = &d.ID
		}
	}
	return v
}

// ListQuarantine returns one page of the organization's entries, newest
// first, and the total.
func (a *App) ListQuarantine(_ context.Context, actor Actor, p store.Page) ([]Quarantined, int, error) {
	if err := Authorize(actor, Read); err != nil {
		return nil, 0, err
	}
	entries, total, err := a.db.ListQuarantineOf(actor.orgID(), p)
	if err != nil {
		return nil, 0, err
	}
	out := make([]Quarantined, 0, len(entries))
	for _, e := range entries {
		out = append(out, a.quarantined(actor.orgID(), e))
	}
	return out, total, nil
}

// FindQuarantine returns entry id and the bytes kept (the header only
// when the entry is truncated).
func (a *App) FindQuarantine(_ context.Context, actor Actor, id string) (*Quarantined, []byte, error) {
	if err := Authorize(actor, Read); err != nil {
		return nil, nil, err
	}
	e, raw, err := a.db.FindQuarantineOf(actor.orgID(), id)
	if err != nil {
		return nil, nil, notFound(err, "quarantine entry")
	}
	v := a.quarantined(actor.orgID(), e)
	return &v, raw, nil
}

// RetryQuarantine ingests entry id again; the entry goes when its reports
// are stored.
func (a *App) RetryQuarantine(ctx context.Context, actor Actor, id string) (*ingest.Result, error) {
	if err := Authorize(actor, Write); err != nil {
		return nil, err
	}
	if _, _, err := a.db.FindQuarantineOf(actor.orgID(), id); err != nil {
		return nil, notFound(err, "quarantine entry")
	}
	if a.cfg.Quarantine == nil {
		return nil, errors.New("app: no quarantine retrier configured")
	}
	res, err := a.cfg.Quarantine.RetryQuarantine(ctx, id)
	return res, notFound(err, "quarantine entry")
}

// DeleteQuarantine deletes entry id and its bytes.
func (a *App) DeleteQuarantine(_ context.Context, actor Actor, id string) error {
	if err := Authorize(actor, Write); err != nil {
		return err
	}
	return notFound(a.db.DeleteQuarantineOf(actor.orgID(), id), "quarantine entry")
}
