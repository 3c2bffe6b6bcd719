package httpapi

import (
	"net/http"
	"time"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/store"
)

// exportPath is the bulk export; it shares the :id position of
// /reports/:id (httprouter allows no static sibling), so getReport hands
// it here.
const exportPath = "/api/v1/reports/export"

// exportWriteWindow is how long the client may take to accept each batch:
// an export outlives the server's WriteTimeout, never a stalled client.
const exportWriteWindow = time.Minute

// exportReports streams every report of the organization that passes the
// list filters (domain_id, date_from, date_to), newest date_begin first,
// as the application layer writes them: format=ndjson one report per line
// with its records, format=csv one row per record with its report's
// columns first. The client gets a fresh write window before each batch
// of reports; it counts as one request.
func (s *Server) exportReports(w http.ResponseWriter, r *request) error {
	q := r.URL.Query()
	format := app.Format(q.Get("format"))
	if format != app.CSV && format != app.NDJSON {
		const msg = "must be csv or ndjson"
		return errBadRequest("query parameter format "+msg, FieldError{Field: "format", Message: msg})
	}
	var f app.ExportFilter
	if f.DomainID = q.Get("domain_id"); f.DomainID != "" && !store.ValidID(f.DomainID) {
		return errBadRequest("query parameter domain_id must be a domain id (a UUID)",
			FieldError{Field: "domain_id", Message: "must be a UUID"})
	}
	var err error
	if f.DateFrom, err = unixParam(q, "date_from"); err != nil {
		return err
	}
	if f.DateTo, err = unixParam(q, "date_to"); err != nil {
		return err
	}
	if f.DateFrom != nil && f.DateTo != nil && f.DateTo.Before(*f.DateFrom) {
		return errBadRange()
	}
	header := http.Header{"Content-Type": {"application/x-ndjson"},
		"Content-Disposition": {`attachment; filename="reports.ndjson"`}}
	if format == app.CSV {
		header = http.Header{"Content-Type": {"text/csv; charset=utf-8"},
			"Content-Disposition": {`attachment; filename="reports.csv"`}}
	}
	out := newStream(w, header)
	rc := http.NewResponseController(w)
	err = s.app.ExportReports(r.Context(), r.actor, format, f, out, func() {
		_ = rc.SetWriteDeadline(time.Now().Add(exportWriteWindow))
	})
	if err == nil {
		err = out.close()
	}
	if err != nil {
		return s.failStream(r, out, err)
	}
	return nil
}
