package httpapi

import (
	"net/http"
)

// exportReportCSV streams a report as RFC 4180 CSV, one row per record
// (the format is the application layer's), holding at most a chunk of it
// in memory.
func (s *Server) exportReportCSV(w http.ResponseWriter, r *request) error {
	rep, err := s.findReport(r)
	if err != nil {
		return err
	}
	out := newStream(w, http.Header{
		"Content-Type":        {"text/csv; charset=utf-8"},
		"Content-Disposition": {`attachment; filename="report-` + rep.ID + `.csv"`},
	})
	err = s.app.WriteReportCSV(r.Context(), r.actor, rep.ID, out)
	if err == nil {
		err = out.close()
	}
	if err != nil {
		return s.failStream(r, out, err)
	}
	return nil
}
