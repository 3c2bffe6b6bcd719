package admin

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/store"
)

// errNoPipeline is what Local answers for intake operations when it was
// built without a pipeline (a programming error of the caller).
var errNoPipeline = errors.New("admin: no ingest pipeline")

// ListQuarantine lists the quarantine, newest first.
func (l *Local) ListQuarantine(_ context.Context, p store.Page) ([]*store.QuarantineEntry, int, error) {
	return l.DB.ListQuarantine(p)
}

// FindQuarantine returns one quarantine entry.
func (l *Local) FindQuarantine(_ context.Context, id string) (*store.QuarantineEntry, error) {
	e, _, err := l.DB.FindQuarantine(id)
	return e, err
}

// QuarantineRaw writes the bytes kept for an entry.
func (l *Local) QuarantineRaw(_ context.Context, id string, w io.Writer) (int64, error) {
	_, raw, err := l.DB.FindQuarantine(id)
	if err != nil {
		return 0, err
	}
	n, err := w.Write(raw)
	return int64(n), err
}

// RetryQuarantine ingests an entry's bytes again.
func (l *Local) RetryQuarantine(ctx context.Context, id string) (*ingest.Result, error) {
	if l.Pipeline == nil {
		return nil, errNoPipeline
	}
	return l.Pipeline.RetryQuarantine(ctx, id)
}

// Retention is what the ingest pipeline leaves out for its age: aggregate
// reports that ended, failure reports that arrived longer ago (0 keeps
// all). A running server's are its --retention and --failure-retention.
type Retention struct {
	Aggregate time.Duration `json:"aggregate_ns"`
	Failure   time.Duration `json:"failure_ns"`
}

// IngestRetention returns the pipeline's retention windows.
func (l *Local) IngestRetention(context.Context) (Retention, error) {
	if l.Pipeline == nil {
		return Retention{}, errNoPipeline
	}
	a, f := l.Pipeline.Retention()
	return Retention{Aggregate: a, Failure: f}, nil
}

// DeleteQuarantine removes an entry.
func (l *Local) DeleteQuarantine(_ context.Context, id string) error {
	return l.DB.DeleteQuarantine(id)
}

// DeleteQuarantineBefore removes the entries received before t.
func (l *Local) DeleteQuarantineBefore(_ context.Context, t time.Time) (int, error) {
	return l.DB.DeleteQuarantineBefore(t)
}

// Socket side.

func (h *handler) quarantineRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/ingest/retention", func(w http.ResponseWriter, r *http.Request) {
		ret, err := h.svc.IngestRetention(r.Context())
		h.answer(w, ret, err)
	})
	mux.HandleFunc("GET /v1/quarantine", h.listQuarantine)
	mux.HandleFunc("GET /v1/quarantine/{id}", h.findQuarantine)
	mux.HandleFunc("GET /v1/quarantine/{id}/raw", h.quarantineRaw)
	mux.HandleFunc("POST /v1/quarantine/{id}/retry", h.retryQuarantine)
	mux.HandleFunc("DELETE /v1/quarantine/{id}", h.deleteQuarantine)
	mux.HandleFunc("DELETE /v1/quarantine", h.deleteQuarantineBefore)
}

type quarantinePage struct {
	Data  []*store.QuarantineEntry `json:"data"`
	Total int                      `json:"total"`
}

func (h *handler) listQuarantine(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	page, err1 := strconv.Atoi(q.Get("page"))
	limit, err2 := strconv.Atoi(q.Get("limit"))
	if err1 != nil || err2 != nil {
		writeErr(w, &store.Error{Kind: store.ErrInvalid, Msg: "bad request: page and limit must be numbers"})
		return
	}
	entries, total, err := h.svc.ListQuarantine(r.Context(), store.Page{Page: page, Limit: limit})
	h.answer(w, quarantinePage{Data: entries, Total: total}, err)
}

func (h *handler) findQuarantine(w http.ResponseWriter, r *http.Request) {
	e, err := h.svc.FindQuarantine(r.Context(), r.PathValue("id"))
	h.answer(w, e, err)
}

// quarantineRaw checks the entry first, so that a missing one is a clean
// error answer rather than an empty body.
func (h *handler) quarantineRaw(w http.ResponseWriter, r *http.Request) {
	if _, err := h.svc.FindQuarantine(r.Context(), r.PathValue("id")); err != nil {
		h.answer(w, nil, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	if _, err := h.svc.QuarantineRaw(r.Context(), r.PathValue("id"), w); err != nil {
		h.log.Error("quarantine bytes over admin socket", "error", err)
	}
}

func (h *handler) retryQuarantine(w http.ResponseWriter, r *http.Request) {
	res, err := h.svc.RetryQuarantine(r.Context(), r.PathValue("id"))
	h.answer(w, res, err)
}

func (h *handler) deleteQuarantine(w http.ResponseWriter, r *http.Request) {
	err := h.svc.DeleteQuarantine(r.Context(), r.PathValue("id"))
	h.answer(w, map[string]bool{"deleted": true}, err)
}

// deleteQuarantineBefore takes ?before=RFC 3339 time.
func (h *handler) deleteQuarantineBefore(w http.ResponseWriter, r *http.Request) {
	t, err := time.Parse(time.RFC3339Nano, r.URL.Query().Get("before"))
	if err != nil {
		writeErr(w, &store.Error{Kind: store.ErrInvalid, Msg: "bad request: before must be an RFC 3339 time"})
		return
	}
	n, err := h.svc.DeleteQuarantineBefore(r.Context(), t)
	h.answer(w, map[string]int{"deleted": n}, err)
}

// ListQuarantine implements Service.
func (c *Client) ListQuarantine(ctx context.Context, p store.Page) ([]*store.QuarantineEntry, int, error) {
	var out quarantinePage
	path := "/v1/quarantine?page=" + strconv.Itoa(p.Page) + "&limit=" + strconv.Itoa(p.Limit)
	if err := c.do(ctx, "GET", path, nil, &out); err != nil {
		return nil, 0, err
	}
	return out.Data, out.Total, nil
}

// FindQuarantine implements Service.
func (c *Client) FindQuarantine(ctx context.Context, id string) (*store.QuarantineEntry, error) {
	var e store.QuarantineEntry
	if err := c.do(ctx, "GET", "/v1/quarantine/"+url.PathEscape(id), nil, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// QuarantineRaw implements Service.
func (c *Client) QuarantineRaw(ctx context.Context, id string, w io.Writer) (int64, error) {
	resp, err := c.send(ctx, "GET", "/v1/quarantine/"+url.PathEscape(id)+"/raw", nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return io.Copy(w, resp.Body)
}

// IngestRetention implements Service.
func (c *Client) IngestRetention(ctx context.Context) (Retention, error) {
	var ret Retention
	err := c.do(ctx, "GET", "/v1/ingest/retention", nil, &ret)
	return ret, err
}

// RetryQuarantine implements Service.
func (c *Client) RetryQuarantine(ctx context.Context, id string) (*ingest.Result, error) {
	var res ingest.Result
	if err := c.do(ctx, "POST", "/v1/quarantine/"+url.PathEscape(id)+"/retry", nil, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// DeleteQuarantineBefore implements Service.
func (c *Client) DeleteQuarantineBefore(ctx context.Context, t time.Time) (int, error) {
	var out map[string]int
	err := c.do(ctx, "DELETE", "/v1/quarantine?before="+url.QueryEscape(t.UTC().Format(time.RFC3339Nano)), nil, &out)
	return out["deleted"], err
}

// DeleteQuarantine implements Service.
func (c *Client) DeleteQuarantine(ctx context.Context, id string) error {
	var out map[string]bool
	return c.do(ctx, "DELETE", "/v1/quarantine/"+url.PathEscape(id), nil, &out)
}
