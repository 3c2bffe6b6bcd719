package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/store"
)

// QuarantineRetrier ingests a quarantine entry's bytes again:
// *ingest.Pipeline. Without one, POST /quarantine/{id}/retry answers 500.
type QuarantineRetrier interface {
	RetryQuarantine(ctx context.Context, id string) (*ingest.Result, error)
}

// quarantineView is a quarantine entry as API.md shows it to the
// organization it belongs to.
type quarantineView struct {
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

// viewQuarantine fills the view of e for org: the sender from the name a
// mail was kept under ("FROM -> RCPT"), the domain of its recipient when
// the organization still has it.
func (s *Server) viewQuarantine(orgID string, e *store.QuarantineEntry) quarantineView {
	v := quarantineView{ID: e.ID, ReceivedAt: e.ReceivedAt.UTC(), Source: e.Source, Name: e.Name, Size: e.Size,
		Reason: e.Reason, Truncated: e.Truncated, Retries: e.Retries}
	if e.Recipient != "" {
		v.Recipient = &e.Recipient
		if from, ok := strings.CutSuffix(e.Name, " -> "+e.Recipient); ok && e.Source == string(ingest.SourceSMTP) {
			v.MailFrom = &from
		}
		if d, err := s.store.FindDomainByReportingEmail(e.Recipient); err == nil && d.OrgID == orgID {
			v.DomainID = &d.ID
		}
	}
	return v
}

// listQuarantine serves GET /quarantine: the organization's entries,
// newest first, paginated.
func (s *Server) listQuarantine(w http.ResponseWriter, r *request) error {
	p, err := parsePage(r)
	if err != nil {
		return err
	}
	entries, total, err := s.store.ListQuarantineOf(r.org.ID, store.Page{Page: p.Page, Limit: p.Limit})
	if err != nil {
		return err
	}
	views := make([]quarantineView, 0, len(entries))
	for _, e := range entries {
		views = append(views, s.viewQuarantine(r.org.ID, e))
	}
	writeJSON(w, http.StatusOK, listBody{Data: views, Pagination: p.of(total)})
	return nil
}

// findQuarantine loads the :id entry of the caller's organization; any
// other organization's entry, or one of none, is not found.
func (s *Server) findQuarantine(r *request) (*store.QuarantineEntry, []byte, error) {
	e, raw, err := s.store.FindQuarantineOf(r.org.ID, r.params.ByName("id"))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, errNotFound("quarantine entry not found")
	}
	return e, raw, err
}

func (s *Server) getQuarantine(w http.ResponseWriter, r *request) error {
	e, _, err := s.findQuarantine(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.viewQuarantine(r.org.ID, e))
	return nil
}

// quarantineRaw serves GET /quarantine/{id}/raw: the bytes kept, as
// message/rfc822 (the header only when the entry is truncated).
func (s *Server) quarantineRaw(w http.ResponseWriter, r *request) error {
	_, raw, err := s.findQuarantine(r)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "message/rfc822")
	w.Header().Set("Content-Length", strconv.Itoa(len(raw)))
	w.Header().Set("Content-Disposition", `attachment; filename="`+r.params.ByName("id")+`.eml"`)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(raw)
	return nil
}

// retryQuarantine serves POST /quarantine/{id}/retry: 200 with the ingest
// outcome; the entry goes when its reports are stored.
func (s *Server) retryQuarantine(w http.ResponseWriter, r *request) error {
	if _, _, err := s.findQuarantine(r); err != nil {
		return err
	}
	if s.cfg.Quarantine == nil {
		return errors.New("httpapi: no quarantine retrier configured")
	}
	res, err := s.cfg.Quarantine.RetryQuarantine(r.Context(), r.params.ByName("id"))
	if errors.Is(err, store.ErrNotFound) {
		return errNotFound("quarantine entry not found")
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) deleteQuarantine(w http.ResponseWriter, r *request) error {
	err := s.store.DeleteQuarantineOf(r.org.ID, r.params.ByName("id"))
	if errors.Is(err, store.ErrNotFound) {
		return errNotFound("quarantine entry not found")
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
