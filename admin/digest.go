package admin

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/dmarcd/dmarcd/digest"
	"github.com/dmarcd/dmarcd/store"
)

// Digests is the part of Service for digests (dmarcd digest preview):
// an organization's digest of the last complete day or week built now,
// shown or queued to an address. Errors: store kinds; ErrNotFound for an
// unknown organization, ErrInvalid for a bad address.
type Digests interface {
	// DigestPreview builds and renders organization orgRef's digest of
	// period p.
	DigestPreview(ctx context.Context, orgRef string, p digest.Period) (*DigestPreview, error)
	// SendDigest queues that digest to to in the durable outbox; the
	// running server's relay sends it.
	SendDigest(ctx context.Context, orgRef string, p digest.Period, to string) (*store.MailStatus, error)
}

var (
	_ Digests = (*Local)(nil)
	_ Digests = (*Client)(nil)
)

// DigestPreview is a digest as 'dmarcd digest preview' prints it.
type DigestPreview struct {
	Organization string        `json:"organization"`
	Period       digest.Period `json:"period"`
	DateFrom     time.Time     `json:"date_from"`
	DateTo       time.Time     `json:"date_to"`
	Subject      string        `json:"subject"`
	Text         string        `json:"text"`
	HTML         string        `json:"html"`
}

// DigestPreview implements Digests.
func (l *Local) DigestPreview(ctx context.Context, orgRef string, p digest.Period) (*DigestPreview, error) {
	op, err := l.operator(orgRef)
	if err != nil {
		return nil, err
	}
	res, err := l.app().Digest(ctx, op, p, "")
	if err != nil {
		return nil, asStoreError(err)
	}
	d, m := res.Digest, res.Message
	return &DigestPreview{Organization: d.Organization, Period: d.Period, DateFrom: d.From, DateTo: d.To,
		Subject: m.Subject, Text: m.Text, HTML: m.HTML}, nil
}

// SendDigest implements Digests.
func (l *Local) SendDigest(ctx context.Context, orgRef string, p digest.Period, to string) (*store.MailStatus, error) {
	op, err := l.operator(orgRef)
	if err != nil {
		return nil, err
	}
	st, err := l.app().SendDigest(ctx, op, p, to)
	return st, asStoreError(err)
}

type digestSendRequest struct {
	Period digest.Period `json:"period"`
	To     string        `json:"to"`
}

// Socket side.

func (h *handler) digestRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/orgs/{ref}/digest", func(w http.ResponseWriter, r *http.Request) {
		p, err := digest.ParsePeriod(r.URL.Query().Get("period"))
		if err != nil {
			writeErr(w, &store.Error{Kind: store.ErrInvalid, Msg: err.Error()})
			return
		}
		v, err := h.svc.DigestPreview(r.Context(), r.PathValue("ref"), p)
		h.answer(w, v, err)
	})
	mux.HandleFunc("POST /v1/orgs/{ref}/digest", func(w http.ResponseWriter, r *http.Request) {
		var in digestSendRequest
		if !h.decode(w, r, &in) {
			return
		}
		p, err := digest.ParsePeriod(string(in.Period))
		if err != nil {
			writeErr(w, &store.Error{Kind: store.ErrInvalid, Msg: err.Error()})
			return
		}
		st, err := h.svc.SendDigest(r.Context(), r.PathValue("ref"), p, in.To)
		if err == nil {
			h.log.Info("digest queued", "mail_id", st.ID, "org_id", st.OrgID, "via", "admin socket")
		}
		h.answer(w, st, err)
	})
}

// DigestPreview implements Digests.
func (c *Client) DigestPreview(ctx context.Context, orgRef string, p digest.Period) (*DigestPreview, error) {
	var v DigestPreview
	q := url.Values{"period": {string(p)}}
	return &v, c.do(ctx, "GET", "/v1/orgs/"+url.PathEscape(orgRef)+"/digest?"+q.Encode(), nil, &v)
}

// SendDigest implements Digests.
func (c *Client) SendDigest(ctx context.Context, orgRef string, p digest.Period, to string) (*store.MailStatus, error) {
	var st store.MailStatus
	return &st, c.do(ctx, "POST", "/v1/orgs/"+url.PathEscape(orgRef)+"/digest", digestSendRequest{Period: p, To: to}, &st)
}
