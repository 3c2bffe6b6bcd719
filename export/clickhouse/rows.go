package clickhouse

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/dmarcd/dmarcd/store"
)

// Rows are written as RowBinary, by hand: one appender per type, no
// reflection, values in the order of the table's columns, which the
// INSERT names (so a column added later to the table does not break an
// older dmarcd). RowBinary is ClickHouse's cheapest input to parse (JSON
// cost the server several times the CPU) and 18.16 and current releases
// read it alike; LowCardinality(String) columns take plain strings.
// Absent text is "" (ClickHouse's default), which keeps the columns plain
// String for Grafana's queries. Each appender checks that it writes the
// column its table expects next: a mismatch is a programming error, and
// panics in the tests.

// rowBuf accumulates the rows of one table.
type rowBuf struct {
	cols []column
	b    []byte
	rows int
	i    int // the next column
}

func (w *rowBuf) begin() { w.i = 0 }

func (w *rowBuf) end() {
	if w.i != len(w.cols) {
		panic(fmt.Sprintf("clickhouse: row of %d columns, the table has %d", w.i, len(w.cols)))
	}
	w.rows++
}

// col returns the next column, which must be named k.
func (w *rowBuf) col(k string) *column {
	c := &w.cols[w.i]
	if c.name != k {
		panic(fmt.Sprintf("clickhouse: column %d is %s, not %s", w.i, c.name, k))
	}
	w.i++
	return c
}

func (w *rowBuf) str(k, v string) {
	w.col(k)
	w.b = binary.AppendUvarint(w.b, uint64(len(v)))
	w.b = append(w.b, v...)
}

func (w *rowBuf) opt(k string, v *string) {
	if v == nil {
		w.str(k, "")
		return
	}
	w.str(k, *v)
}

func (w *rowBuf) uint(k string, v uint64) {
	switch w.col(k).typ {
	case "UInt8":
		w.b = append(w.b, byte(min(v, 0xff)))
	case "UInt16":
		w.b = binary.LittleEndian.AppendUint16(w.b, uint16(min(v, 0xffff)))
	case "UInt32":
		w.b = binary.LittleEndian.AppendUint32(w.b, uint32(min(v, 0xffffffff)))
	default:
		w.b = binary.LittleEndian.AppendUint64(w.b, v)
	}
}

func (w *rowBuf) int(k string, v int64) { w.uint(k, uint64(max(v, 0))) }

func (w *rowBuf) strs(k string, v []string) {
	w.col(k)
	w.b = binary.AppendUvarint(w.b, uint64(len(v)))
	for _, s := range v {
		w.b = binary.AppendUvarint(w.b, uint64(len(s)))
		w.b = append(w.b, s...)
	}
}

// dateTime writes t as DateTime: Unix seconds in a UInt32, so times
// before 1970 are 1970 and after 2106 are 2106.
func (w *rowBuf) dateTime(k string, t time.Time) {
	w.col(k)
	w.b = binary.LittleEndian.AppendUint32(w.b, uint32(min(max(t.Unix(), 0), 1<<32-1)))
}

// date writes t's UTC day as Date: days since 1970 in a UInt16.
func (w *rowBuf) date(k string, t time.Time) {
	w.col(k)
	w.b = binary.LittleEndian.AppendUint16(w.b, uint16(min(max(t.Unix()/86400, 0), 0xffff)))
}

// head writes the columns every table starts with.
func (w *rowBuf) head(org *orgName, domainID, domain string, day time.Time, reportID string) {
	w.begin()
	w.str("org_id", org.id)
	w.str("org_name", org.name)
	w.str("domain_id", domainID)
	w.str("domain", domain)
	w.date("day", day)
	w.str("report_id", reportID)
}

// orgName is an organization as the rows name it.
type orgName struct{ id, name string }

func (w *rowBuf) aggregateReport(org *orgName, r *store.Report, ver uint64) {
	w.head(org, r.DomainID, r.Domain, r.DateBegin, r.ID)
	w.str("reporter", r.OrgName)
	w.str("reporter_email", r.OrgEmail)
	w.str("external_report_id", r.ExternalReportID)
	w.dateTime("date_begin", r.DateBegin)
	w.dateTime("date_end", r.DateEnd)
	w.dateTime("received_at", r.ReceivedAt)
	p := &r.PolicyPublished
	w.str("policy_domain", p.Domain)
	w.str("policy_p", p.P)
	w.opt("policy_sp", p.SP)
	w.uint("policy_pct", uint64(min(max(p.PCT, 0), 255)))
	w.str("policy_adkim", p.ADKIM)
	w.str("policy_aspf", p.ASPF)
	w.int("message_count", r.MessageCount)
	w.int("dmarc_pass_count", r.DMARCPassCount)
	w.int("dmarc_fail_count", r.DMARCFailCount)
	w.uint("record_count", uint64(r.RecordCount))
	w.uint("version", ver)
	w.end()
}

// aggregateRecord writes record i of report r; scratch is reused between
// calls for the arrays.
func (w *rowBuf) aggregateRecord(org *orgName, r *store.Report, i uint32, rec *store.Record, ver uint64, scratch *[3][]string) {
	w.head(org, r.DomainID, r.Domain, r.DateBegin, r.ID)
	w.uint("record_index", uint64(i))
	w.str("source_ip", rec.SourceIP)
	w.str("reporter", r.OrgName)
	w.dateTime("date_begin", r.DateBegin)
	w.int("count", rec.Count)
	w.str("disposition", rec.Disposition)
	w.str("dkim", string(rec.DKIM))
	w.str("spf", string(rec.SPF))
	w.str("dmarc", rec.DMARC)
	w.uint("dmarc_derived", b2u(rec.DMARCDerived))
	w.str("header_from", rec.HeaderFrom)
	w.opt("envelope_from", rec.EnvelopeFrom)
	w.opt("envelope_to", rec.EnvelopeTo)
	s := scratch
	s[0] = s[0][:0]
	for _, x := range rec.Reasons {
		s[0] = append(s[0], x.Type)
	}
	w.strs("reasons", s[0])
	s[0], s[1], s[2] = s[0][:0], s[1][:0], s[2][:0]
	for _, x := range rec.AuthResults.DKIM {
		s[0], s[2] = append(s[0], x.Domain), append(s[2], x.Result)
		s[1] = append(s[1], deref(x.Selector))
	}
	w.strs("dkim_domains", s[0])
	w.strs("dkim_selectors", s[1])
	w.strs("dkim_results", s[2])
	s[0], s[1], s[2] = s[0][:0], s[1][:0], s[2][:0]
	for _, x := range rec.AuthResults.SPF {
		s[0], s[2] = append(s[0], x.Domain), append(s[2], x.Result)
		s[1] = append(s[1], deref(x.Scope))
	}
	w.strs("spf_domains", s[0])
	w.strs("spf_scopes", s[1])
	w.strs("spf_results", s[2])
	var cc, city, asOrg *string
	var asn uint64
	if g := rec.Geo; g != nil {
		cc, city, asOrg = g.CountryCode, g.City, g.ASOrg
		if g.ASN != nil {
			asn = uint64(*g.ASN)
		}
	}
	w.opt("country_code", cc)
	w.opt("city", city)
	w.uint("asn", asn)
	w.opt("as_org", asOrg)
	w.str("policy_p", r.PolicyPublished.P)
	w.uint("version", ver)
	w.end()
}

func (w *rowBuf) failureReport(org *orgName, f *store.FailureReportDetail, ver uint64) {
	day := f.ArrivalDate
	if day.IsZero() {
		day = f.ReceivedAt
	}
	w.head(org, f.DomainID, f.Domain, day, f.ID)
	w.dateTime("received_at", f.ReceivedAt)
	w.dateTime("arrival_date", f.ArrivalDate)
	w.opt("reporter", f.Reporter)
	w.opt("source_ip", f.SourceIP)
	w.opt("original_mail_from", f.OriginalMailFrom)
	w.opt("original_rcpt_to", f.OriginalRcptTo)
	w.opt("reported_domain", f.ReportedDomain)
	w.opt("subject", f.Subject)
	w.opt("message_id", f.MessageID)
	w.str("feedback_type", f.FeedbackType)
	w.strs("auth_failure", f.AuthFailure)
	w.opt("delivery_result", f.DeliveryResult)
	w.opt("dmarc_result", f.AuthenticationResults.DMARC)
	w.opt("spf_result", f.AuthenticationResults.SPF)
	w.opt("dkim_result", f.AuthenticationResults.DKIM)
	w.opt("dkim_domain", f.DKIMDomain)
	w.opt("dkim_selector", f.DKIMSelector)
	var cc, asOrg *string
	var asn uint64
	if g := f.Geo; g != nil {
		cc, asOrg = g.CountryCode, g.ASOrg
		if g.ASN != nil {
			asn = uint64(*g.ASN)
		}
	}
	w.opt("country_code", cc)
	w.uint("asn", asn)
	w.opt("as_org", asOrg)
	w.uint("version", ver)
	w.end()
}

// tlsReport writes a TLS report's row to w and its failure details to
// details; domain is the report's domain name.
func (w *rowBuf) tlsReport(details *rowBuf, org *orgName, domain string, t *store.TLSReportDetail, ver uint64) {
	w.head(org, t.DomainID, domain, t.DateBegin, t.ID)
	w.str("reporter", t.OrganizationName)
	w.str("external_report_id", t.ReportID)
	w.opt("contact_info", t.ContactInfo)
	w.dateTime("date_begin", t.DateBegin)
	w.dateTime("date_end", t.DateEnd)
	w.dateTime("received_at", t.ReceivedAt)
	w.int("successful_sessions", t.SuccessfulSessions)
	w.int("failed_sessions", t.FailedSessions)
	w.uint("version", ver)
	w.end()
	for pi, p := range t.Policies {
		for di, d := range p.FailureDetails {
			details.head(org, t.DomainID, domain, t.DateBegin, t.ID)
			details.uint("policy_index", uint64(pi))
			details.uint("detail_index", uint64(di))
			details.str("reporter", t.OrganizationName)
			details.str("policy_type", p.PolicyType)
			details.str("policy_domain", p.PolicyDomain)
			details.str("result_type", d.ResultType)
			details.opt("sending_mta_ip", d.SendingMTAIP)
			details.opt("receiving_mx_hostname", d.ReceivingMXHostname)
			details.opt("receiving_mx_helo", d.ReceivingMXHelo)
			details.opt("receiving_ip", d.ReceivingIP)
			details.int("failed_sessions", d.FailedSessions)
			details.opt("additional_information", d.AdditionalInformation)
			details.opt("failure_reason_code", d.FailureReasonCode)
			details.uint("version", ver)
			details.end()
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
