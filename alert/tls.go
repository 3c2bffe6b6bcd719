package alert

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// The TLS report rule: tls_failure_rate, per stored SMTP TLS report (RFC
// 8460), deduplicated like dmarc_failure_rate.

// TLSReport is what the TLS rule needs of a stored TLS report.
type TLSReport struct {
	ID, DomainID, Domain string
	// Reporter and ReportID are the report's organization-name and
	// report-id.
	Reporter, ReportID string
	DateBegin, DateEnd time.Time
	Successful, Failed int64
	// ResultTypes counts the failed sessions of the failure details by
	// result type (e.g. "certificate-expired").
	ResultTypes map[string]int64
}

// tlsRateDetails explain a tls_failure_rate alert.
type tlsRateDetails struct {
	TLSReportID string          `json:"tls_report_id"`
	Reporter    string          `json:"reporter"`
	ReportID    string          `json:"report_id"`
	DateBegin   time.Time       `json:"date_begin"`
	DateEnd     time.Time       `json:"date_end"`
	Successful  int64           `json:"successful_sessions"`
	Failed      int64           `json:"failed_sessions"`
	FailureRate float64         `json:"failure_rate"`
	Threshold   float64         `json:"threshold"`
	MinFailed   int64           `json:"min_failed"`
	ResultTypes []tlsResultType `json:"result_types"`
}

type tlsResultType struct {
	ResultType string `json:"result_type"`
	Failed     int64  `json:"failed_sessions"`
}

// EvaluateTLS returns the tls_failure_rate alert stored TLS report rep
// raises at now: warning when at least TLSMinFailed sessions failed and
// they are at least TLSFailureRateWarning of its sessions, critical at
// TLSFailureRateCritical. At most one per domain per UTC day and
// severity, a critical one holding back a later warning; a report that
// is not Fresh raises none.
func (r Rules) EvaluateTLS(rep *TLSReport, h History, now time.Time) *Candidate {
	total := rep.Successful + rep.Failed
	if r.Disabled || !r.Fresh(rep.DateEnd, now) || total <= 0 || rep.Failed < r.TLSMinFailed {
		return nil
	}
	rate := float64(rep.Failed) / float64(total)
	sev, threshold := SeverityCritical, r.TLSFailureRateCritical
	if rate < threshold {
		sev, threshold = SeverityWarning, r.TLSFailureRateWarning
	}
	if rate < threshold {
		return nil
	}
	key := DedupKey{Day: Day(now), DomainID: rep.DomainID, Type: TypeTLSFailureRate}
	if prev, ok := h.Raised(key); ok && Rank(prev) >= Rank(sev) {
		return nil
	}
	det := tlsRateDetails{TLSReportID: rep.ID, Reporter: rep.Reporter, ReportID: rep.ReportID,
		DateBegin: rep.DateBegin, DateEnd: rep.DateEnd, Successful: rep.Successful, Failed: rep.Failed,
		FailureRate: round4(rate), Threshold: threshold, MinFailed: r.TLSMinFailed, ResultTypes: []tlsResultType{}}
	for t, n := range rep.ResultTypes {
		det.ResultTypes = append(det.ResultTypes, tlsResultType{ResultType: t, Failed: n})
	}
	slices.SortFunc(det.ResultTypes, func(x, y tlsResultType) int {
		return cmp.Or(cmp.Compare(y.Failed, x.Failed), cmp.Compare(x.ResultType, y.ResultType))
	})
	why := ""
	if len(det.ResultTypes) > 0 {
		why = fmt.Sprintf(" The most frequent failure: %s (%d sessions).", det.ResultTypes[0].ResultType, det.ResultTypes[0].Failed)
	}
	return &Candidate{
		Type: TypeTLSFailureRate, Severity: sev,
		Title: fmt.Sprintf("%s of TLS sessions to %s's mail servers failed", percent(rate), rep.Domain),
		Message: fmt.Sprintf("The TLS report of %s (%s to %s) counts %d of %d sessions that could not be secured (%s), at or over the %s threshold of %s.%s",
			rep.Reporter, rep.DateBegin.Format(time.DateOnly), rep.DateEnd.Format(time.DateOnly),
			rep.Failed, total, percent(rate), sev, percent(threshold), why),
		Details: det, Dedup: key,
	}
}
