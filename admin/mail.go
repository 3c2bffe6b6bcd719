package admin

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/store"
)

// Mail is the part of Service for outbound mail (dmarcd mail): a test
// message through the running server's relay, the mail log, and queuing
// a built mail (a digest sent now). Errors: store kinds; store.ErrInvalid
// for a malformed address or mail, and on a server without --mail-relay
// (test mail).
type Mail interface {
	// SendTestMail sends a test message to to through the relay at once;
	// the relay's refusal is in the result, not an error.
	SendTestMail(ctx context.Context, to string) (*app.MailTestResult, error)
	// MailLog returns the newest mails (of organization orgRef, or of
	// all when orgRef is ""), at most limit (0: app.MailLogLimit).
	MailLog(ctx context.Context, orgRef string, limit int) ([]*store.MailStatus, error)
	// QueueMail queues m as organization orgRef's mail in the durable
	// outbox (app.App.QueueMail).
	QueueMail(ctx context.Context, orgRef string, m *store.OutgoingMail) (*store.MailStatus, error)
}

var (
	_ Mail = (*Local)(nil)
	_ Mail = (*Client)(nil)
)

// SendTestMail implements Mail.
func (l *Local) SendTestMail(ctx context.Context, to string) (*app.MailTestResult, error) {
	res, err := l.app().SendTestMail(ctx, app.Operator(nil), to)
	return res, asStoreError(err)
}

// MailLog implements Mail.
func (l *Local) MailLog(ctx context.Context, orgRef string, limit int) ([]*store.MailStatus, error) {
	op := app.Operator(nil)
	if orgRef != "" {
		var err error
		if op, err = l.operator(orgRef); err != nil {
			return nil, err
		}
	}
	return l.app().MailLog(ctx, op, limit)
}

// QueueMail implements Mail.
func (l *Local) QueueMail(ctx context.Context, orgRef string, m *store.OutgoingMail) (*store.MailStatus, error) {
	op, err := l.operator(orgRef)
	if err != nil {
		return nil, err
	}
	st, err := l.app().QueueMail(ctx, op, m)
	return st, asStoreError(err)
}

type mailTestRequest struct {
	To string `json:"to"`
}

// Socket side.

func (h *handler) mailRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/mail/test", func(w http.ResponseWriter, r *http.Request) {
		var in mailTestRequest
		if !h.decode(w, r, &in) {
			return
		}
		res, err := h.svc.SendTestMail(r.Context(), in.To)
		h.answer(w, res, err)
	})
	mux.HandleFunc("GET /v1/mail", func(w http.ResponseWriter, r *http.Request) {
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		log, err := h.svc.MailLog(r.Context(), r.URL.Query().Get("org"), limit)
		h.answer(w, log, err)
	})
	mux.HandleFunc("POST /v1/orgs/{ref}/mail", func(w http.ResponseWriter, r *http.Request) {
		var in store.OutgoingMail
		if !h.decode(w, r, &in) {
			return
		}
		st, err := h.svc.QueueMail(r.Context(), r.PathValue("ref"), &in)
		if err == nil {
			h.log.Info("mail queued", "mail_id", st.ID, "kind", st.Kind, "org_id", st.OrgID, "via", "admin socket")
		}
		h.answer(w, st, err)
	})
}

// SendTestMail implements Mail.
func (c *Client) SendTestMail(ctx context.Context, to string) (*app.MailTestResult, error) {
	var res app.MailTestResult
	return &res, c.do(ctx, "POST", "/v1/mail/test", mailTestRequest{To: to}, &res)
}

// MailLog implements Mail.
func (c *Client) MailLog(ctx context.Context, orgRef string, limit int) ([]*store.MailStatus, error) {
	var log []*store.MailStatus
	q := url.Values{"org": {orgRef}, "limit": {strconv.Itoa(limit)}}
	return log, c.do(ctx, "GET", "/v1/mail?"+q.Encode(), nil, &log)
}

// QueueMail implements Mail.
func (c *Client) QueueMail(ctx context.Context, orgRef string, m *store.OutgoingMail) (*store.MailStatus, error) {
	var st store.MailStatus
	return &st, c.do(ctx, "POST", "/v1/orgs/"+url.PathEscape(orgRef)+"/mail", m, &st)
}
