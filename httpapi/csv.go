package httpapi

import (
	"encoding/csv"
	"net/http"
	"strconv"

	"github.com/dmarcd/dmarcd/store"
)

// csvHeader is the header row of a report's CSV export (API.md).
var csvHeader = []string{"source_ip", "count", "disposition", "dkim", "spf", "dmarc", "header_from",
	"envelope_from", "country_code", "city", "asn", "as_org", "dkim_domains", "spf_domains"}

// exportReportCSV streams a report as RFC 4180 CSV, one row per record,
// holding at most a chunk of it in memory.
func (s *Server) exportReportCSV(w http.ResponseWriter, r *request) error {
	rep, err := s.findReport(r)
	if err != nil {
		return err
	}
	out := newStream(w, http.Header{
		"Content-Type":        {"text/csv; charset=utf-8"},
		"Content-Disposition": {`attachment; filename="report-` + rep.ID + `.csv"`},
	})
	cw := csv.NewWriter(out)
	cw.UseCRLF = true // RFC 4180 ends lines with CRLF
	var row csvRow
	err = cw.Write(csvHeader)
	if err == nil {
		err = s.reportRecords(r, rep, func(rec *store.Record) error {
			return cw.Write(row.fill(rec))
		})
	}
	if err == nil {
		cw.Flush()
		if err = cw.Error(); err == nil {
			err = out.close()
		}
	}
	if err != nil {
		return s.failStream(r, out, err)
	}
	return nil
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
		c.dkimDomains(rec.AuthResults.DKIM), c.spfDomains(rec.AuthResults.SPF),
	}
	for i, v := range c.cells {
		c.cells[i] = csvCell(v)
	}
	return c.cells[:]
}

// dkimDomains renders every DKIM result as domain:result, joined with ';'.
func (c *csvRow) dkimDomains(res []store.DKIMAuth) string {
	c.auth = c.auth[:0]
	for i, a := range res {
		if i > 0 {
			c.auth = append(c.auth, ';')
		}
		c.auth = append(append(append(c.auth, a.Domain...), ':'), a.Result...)
	}
	return string(c.auth)
}

// spfDomains renders every SPF result as domain:result, joined with ';'.
func (c *csvRow) spfDomains(res []store.SPFAuth) string {
	c.auth = c.auth[:0]
	for i, a := range res {
		if i > 0 {
			c.auth = append(c.auth, ';')
		}
		c.auth = append(append(append(c.auth, a.Domain...), ':'), a.Result...)
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
