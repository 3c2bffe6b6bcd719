package httpapi

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/dmarcd/dmarcd/store"
)

// exportPath is the bulk export; it shares the :id position of
// /reports/:id (httprouter allows no static sibling), so getReport hands
// it here.
const exportPath = "/api/v1/reports/export"

// exportBatch is how many reports one read transaction of an export lists.
const exportBatch = 100

// exportWriteWindow is how long the client may take to accept each batch:
// an export outlives the server's WriteTimeout, never a stalled client.
const exportWriteWindow = time.Minute

// csvExportHeader is the CSV export's header: the report's columns, then a
// record's (csvHeader).
var csvExportHeader = append([]string{"report_id", "domain", "org_name", "external_report_id", "date_begin", "date_end"}, csvHeader...)

// exportReports streams every report of the organization that passes the
// list filters (domain_id, date_from, date_to), newest date_begin first:
// format=ndjson writes one report per line with its records, format=csv
// one row per record with its report's columns first. It reads the reports
// a batch at a time by cursor, so memory stays flat and reports stored
// meanwhile are neither repeated nor skipped; it counts as one request.
func (s *Server) exportReports(w http.ResponseWriter, r *request) error {
	q := r.URL.Query()
	format := q.Get("format")
	if format != "csv" && format != "ndjson" {
		const msg = "must be csv or ndjson"
		return errBadRequest("query parameter format "+msg, FieldError{Field: "format", Message: msg})
	}
	f := store.ReportFilter{Page: store.Page{Page: 1, Limit: exportBatch}}
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
	if format == "csv" {
		header = http.Header{"Content-Type": {"text/csv; charset=utf-8"},
			"Content-Disposition": {`attachment; filename="reports.csv"`}}
	}
	out := newStream(w, header)
	rc := http.NewResponseController(w)
	var cw *csv.Writer
	if format == "csv" {
		cw = csv.NewWriter(out)
		cw.UseCRLF = true
		if err := cw.Write(csvExportHeader); err != nil {
			return s.failStream(r, out, err)
		}
	}
	for {
		_ = rc.SetWriteDeadline(time.Now().Add(exportWriteWindow))
		page, err := s.store.ListReportsPage(r.org.ID, f)
		if err != nil {
			if !out.started && errorsIsNotFound(err) {
				return errNotFound("domain not found")
			}
			return s.failStream(r, out, err)
		}
		for _, rep := range page.Reports {
			if cw != nil {
				err = s.exportCSV(r, cw, rep)
			} else {
				err = s.exportNDJSON(r, out, rep)
			}
			if err != nil && !errorsIsNotFound(err) { // a report deleted meanwhile is left out
				return s.failStream(r, out, err)
			}
		}
		if page.Next == nil {
			break
		}
		f.After = page.Next
	}
	if cw != nil {
		cw.Flush()
		if err := cw.Error(); err != nil {
			return s.failStream(r, out, err)
		}
	}
	if err := out.close(); err != nil {
		return s.failStream(r, out, err)
	}
	return nil
}

// exportNDJSON writes rep and its records as one line.
func (s *Server) exportNDJSON(r *request, out *streamWriter, rep *store.Report) error {
	head, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	return s.writeWithRecords(r, out, head, rep)
}

// exportCSV writes a row per record of rep.
func (s *Server) exportCSV(r *request, cw *csv.Writer, rep *store.Report) error {
	var row csvRow
	cells := make([]string, len(csvExportHeader))
	cells[0], cells[1], cells[2] = rep.ID, csvCell(rep.Domain), csvCell(rep.OrgName)
	cells[3] = csvCell(rep.ExternalReportID)
	cells[4], cells[5] = rep.DateBegin.UTC().Format(time.RFC3339), rep.DateEnd.UTC().Format(time.RFC3339)
	return s.store.ReportRecords(r.org.ID, rep.ID, func(rec *store.Record) error {
		copy(cells[6:], row.fill(rec))
		return cw.Write(cells)
	})
}

func errorsIsNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }
