package admin

import (
	"context"
	"net/http"
	"time"

	"github.com/dmarcd/dmarcd/export/clickhouse"
	"github.com/dmarcd/dmarcd/store"
)

// Exports are the operations on the ClickHouse export (issue 28).
type Exports interface {
	// ExportStatus returns the export's state: the running server's sink
	// (Running set), or without one the cursor stored in the file.
	ExportStatus(ctx context.Context) (*ExportStatus, error)
	// ExportSince moves the export cursor back to the reports stored since
	// since, so that they are exported again (a backfill; replayed rows
	// replace themselves in ClickHouse). Without a running sink the
	// cursor is moved in the file, for the next server with
	// --export-clickhouse.
	ExportSince(ctx context.Context, since time.Time) (*ExportStatus, error)
}

// ExportStatus is the state of the ClickHouse export.
type ExportStatus struct {
	// Running is set when a server runs the sink (--export-clickhouse);
	// Sink is then its state, else only Cursor is known.
	Running bool               `json:"running"`
	Sink    *clickhouse.Status `json:"sink,omitempty"`
	Cursor  store.ExportCursor `json:"cursor"`
}

type exportSinceRequest struct {
	Since time.Time `json:"since"`
}

// ExportStatus implements Exports.
func (l *Local) ExportStatus(context.Context) (*ExportStatus, error) {
	if l.Export != nil {
		st := l.Export.Status()
		return &ExportStatus{Running: true, Sink: &st, Cursor: st.Cursor}, nil
	}
	cur, err := l.DB.ExportCursor(clickhouse.CursorName)
	if err != nil {
		return nil, err
	}
	return &ExportStatus{Cursor: *cur}, nil
}

// ExportSince implements Exports.
func (l *Local) ExportSince(ctx context.Context, since time.Time) (*ExportStatus, error) {
	if l.Export != nil {
		if _, err := l.Export.Rewind(since); err != nil {
			return nil, err
		}
	} else if _, err := l.DB.RewindExportCursor(clickhouse.CursorName, since); err != nil {
		return nil, err
	}
	return l.ExportStatus(ctx)
}

// ExportStatus implements Exports.
func (c *Client) ExportStatus(ctx context.Context) (*ExportStatus, error) {
	var res ExportStatus
	return &res, c.do(ctx, "GET", "/v1/export", nil, &res)
}

// ExportSince implements Exports.
func (c *Client) ExportSince(ctx context.Context, since time.Time) (*ExportStatus, error) {
	var res ExportStatus
	return &res, c.do(ctx, "POST", "/v1/export/since", exportSinceRequest{Since: since}, &res)
}

func (h *handler) exportRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/export", func(w http.ResponseWriter, r *http.Request) {
		res, err := h.svc.ExportStatus(r.Context())
		h.answer(w, res, err)
	})
	mux.HandleFunc("POST /v1/export/since", func(w http.ResponseWriter, r *http.Request) {
		var q exportSinceRequest
		if !h.decode(w, r, &q) {
			return
		}
		res, err := h.svc.ExportSince(r.Context(), q.Since)
		h.answer(w, res, err)
	})
}
