package app

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"time"

	"github.com/dmarcd/dmarcd/store"
)

// The export formats (API.md): a report's records as CSV, a report with
// its records as one JSON object, and the bulk export of many reports as
// CSV or NDJSON. Every writer streams: a report of a million records
// never sits in memory.

// Format is a bulk export's format.
type Format string

// The bulk export formats.
const (
	CSV    Format = "csv"    // one row per record, its report's columns first
	NDJSON Format = "ndjson" // one report per line, with its records
)

// ExportBatch is how many reports one read transaction of a bulk export
// lists.
const ExportBatch = 100

// csvHeader is the header row of a report's CSV export.
var csvHeader = []string{"source_ip", "count", "disposition", "dkim", "spf", "dmarc", "header_from",
	"envelope_from", "country_code", "city", "asn", "as_org", "dkim_domains", "spf_domains"}

// csvExportHeader is the bulk CSV export's header: the report's columns,
// then a record's.
var csvExportHeader = append([]string{"report_id", "domain", "org_name", "external_report_id", "date_begin", "date_end"}, csvHeader...)

// WriteReportCSV writes the records of report id as RFC 4180 CSV, one
// row per record under csvHeader, every cell made safe for spreadsheets.
// The caller found the report first; NotFound when it went meanwhile.
func (a *App) WriteReportCSV(_ context.Context, actor Actor, id string, w io.Writer) error {
	if err := Authorize(actor, Read); err != nil {
		return err
	}
	cw := csv.NewWriter(w)
	cw.UseCRLF = true // RFC 4180 ends lines with CRLF
	var row csvRow
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	err := a.db.ReportRecords(actor.orgID(), id, func(rec *store.Record) error { return cw.Write(row.fill(rec)) })
	if err != nil {
		return notFound(err, "report")
	}
	cw.Flush()
	return cw.Error()
}

// WriteReportJSON writes rep as its JSON object with its records added as
// "records", one at a time as the store reads them, and a newline: the
// body of GET /reports/{id} and a line of the NDJSON export. NotFound
// when the report went since it was found.
func (a *App) WriteReportJSON(_ context.Context, actor Actor, rep *store.Report, w io.Writer) error {
	if err := Authorize(actor, Read); err != nil {
		return err
	}
	return a.writeReportJSON(actor.orgID(), rep, w)
}

func (a *App) writeReportJSON(orgID string, rep *store.Report, w io.Writer) error {
	head, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	if _, err := w.Write(head[:len(head)-1]); err != nil { // the report object, left open
		return err
	}
	if _, err := io.WriteString(w, `,"records":[`); err != nil {
		return err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	n := 0
	err = a.db.ReportRecords(orgID, rep.ID, func(rec *store.Record) error {
		buf.Reset()
		if n > 0 {
			buf.WriteByte(',')
		}
		n++
		if err := enc.Encode(rec); err != nil {
			return err
		}
		_, err := w.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
		return err
	})
	if err != nil {
		return notFound(err, "report")
	}
	_, err = io.WriteString(w, "]}\n")
	return err
}

// ExportFilter selects the reports of a bulk export.
type ExportFilter struct {
	DomainID         string     // "" for every domain
	DateFrom, DateTo *time.Time // on date_begin; nil for no bound
}

// ExportReports writes every report of the actor's organization that f
// selects, newest date_begin first, in format. It reads the reports a
// batch at a time by cursor, so memory stays flat and reports stored
// meanwhile are neither repeated nor skipped; a report deleted meanwhile
// is left out of a CSV export and ends an NDJSON one. batch, when not nil, is called before each batch is read
// (to give the client a new write deadline, say). NotFound for an unknown
// domain.
func (a *App) ExportReports(_ context.Context, actor Actor, format Format, f ExportFilter, w io.Writer, batch func()) error {
	if err := Authorize(actor, Read); err != nil {
		return err
	}
	var cw *csv.Writer
	if format == CSV {
		cw = csv.NewWriter(w)
		cw.UseCRLF = true
		if err := cw.Write(csvExportHeader); err != nil {
			return err
		}
	}
	org := actor.orgID()
	rf := store.ReportFilter{DomainID: f.DomainID, DateFrom: f.DateFrom, DateTo: f.DateTo,
		Page: store.Page{Page: 1, Limit: ExportBatch}}
	for {
		if batch != nil {
			batch()
		}
		page, err := a.db.ListReportsPage(org, rf)
		if err != nil {
			return notFound(err, "domain")
		}
		for _, rep := range page.Reports {
			if cw != nil {
				// A report deleted meanwhile is left out: nothing of it
				// was written.
				if err := a.exportCSV(org, cw, rep); err != nil && !errors.Is(err, store.ErrNotFound) {
					return err
				}
			} else if err := a.writeReportJSON(org, rep, w); err != nil {
				return err // its line is begun: the export cannot go on
			}
		}
		if page.Next == nil {
			break
		}
		rf.After = page.Next
	}
	if cw != nil {
		cw.Flush()
		return cw.Error()
	}
	return nil
}

// exportCSV writes a row per record of rep.
func (a *App) exportCSV(orgID string, cw *csv.Writer, rep *store.Report) error {
	var row csvRow
	cells := make([]string, len(csvExportHeader))
	cells[0], cells[1], cells[2] = rep.ID, csvCell(rep.Domain), csvCell(rep.OrgName)
	cells[3] = csvCell(rep.ExternalReportID)
	cells[4], cells[5] = rep.DateBegin.UTC().Format(time.RFC3339), rep.DateEnd.UTC().Format(time.RFC3339)
	return a.db.ReportRecords(orgID, rep.ID, func(rec *store.Record) error {
		copy(cells[6:], row.fill(rec))
		return cw.Write(cells)
	})
}

// csvRow is the reusable buffer of one CSV row.
type csvRow struct {
	cells [14]string
	auth  []byte
}

// fill sets the row to rec's cells, each made safe for spreadsheets.
func (c *csvRow) fill(rec *store.Record) []string {
	var country, city, asn, asOrg string
	if g := rec.Geo; g != nil {
		country, city, asOrg = deref(g.CountryCode), deref(g.City), deref(g.ASOrg)
		if g.ASN != nil {
			asn = strconv.FormatUint(uint64(*g.ASN), 10)
		}
	}
	c.cells = [14]string{
		rec.SourceIP, strconv.FormatInt(rec.Count, 10), rec.Disposition, string(rec.DKIM), string(rec.SPF), rec.DMARC,
		rec.HeaderFrom, deref(rec.EnvelopeFrom), country, city, asn, asOrg,
		c.authDomains(len(rec.AuthResults.DKIM), func(i int) (string, string) {
			return rec.AuthResults.DKIM[i].Domain, rec.AuthResults.DKIM[i].Result
		}),
		c.authDomains(len(rec.AuthResults.SPF), func(i int) (string, string) {
			return rec.AuthResults.SPF[i].Domain, rec.AuthResults.SPF[i].Result
		}),
	}
	for i, v := range c.cells {
		c.cells[i] = csvCell(v)
	}
	return c.cells[:]
}

// authDomains renders n auth results as domain:result, joined with ';'
// (the DKIM and the SPF column alike); at gives result i.
func (c *csvRow) authDomains(n int, at func(i int) (domain, result string)) string {
	c.auth = c.auth[:0]
	for i := range n {
		if i > 0 {
			c.auth = append(c.auth, ';')
		}
		domain, result := at(i)
		c.auth = append(append(append(c.auth, domain...), ':'), result...)
	}
	return string(c.auth)
}

// csvCell defuses a cell that a spreadsheet would run as a formula
// (CSV injection): whatever reporters put in a report reaches the user's
// spreadsheet, so a leading =, +, -, @, tab or carriage return gets a ' in
// front, which spreadsheets show as text.
func csvCell(v string) string {
	if v == "" {
		return v
	}
	switch v[0] {
	case '=', '+', '-', '@', '\t', '\r':
		return "'" + v
	}
	return v
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
