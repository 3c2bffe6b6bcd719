package webhook

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// details is the union of what the alert rules write in an alert's
// details (package alert), read for a chat message's evidence lines.
// Every string in it may come from a report or a DNS answer: a sender's
// name, a reporter, a record, an AS name, a mailbox server's error.
type details struct {
	// An aggregate or TLS report (dmarc_failure_rate, tls_failure_rate;
	// Report for new_failing_source).
	reportRef
	Report *reportRef `json:"report"`

	Messages  *int64 `json:"messages"`
	DMARCFail *int64 `json:"dmarc_fail"`

	// A source (new_failing_source, forensic_report_received).
	source
	WindowDays  int        `json:"window_days"`
	ArrivalDate *time.Time `json:"arrival_date"`

	// DNS changes.
	RecordName     string  `json:"record_name"`
	OldRecord      *string `json:"old_record"`
	NewRecord      *string `json:"new_record"`
	ReportingEmail string  `json:"reporting_email"`
	OldPolicy      *policy `json:"old_policy"`
	NewPolicy      *policy `json:"new_policy"`
	Problem        string  `json:"problem"`

	// TLS reports.
	Failed      *int64 `json:"failed_sessions"`
	Successful  *int64 `json:"successful_sessions"`
	ResultTypes []struct {
		ResultType string `json:"result_type"`
		Failed     int64  `json:"failed_sessions"`
	} `json:"result_types"`

	// Mailboxes.
	Host         string `json:"host"`
	Username     string `json:"username"`
	Folder       string `json:"folder"`
	FailingHours int64  `json:"failing_hours"`
	LastError    string `json:"last_error"`

	// Senders and the enforcement stage.
	Sender        string   `json:"sender"`
	SenderType    string   `json:"sender_type"`
	TotalMessages *int64   `json:"total_messages"`
	Share         *float64 `json:"share"`
	DMARCPassRate *float64 `json:"dmarc_pass_rate"`
	Hints         []string `json:"hints"`
	Stage         string   `json:"stage"`
	PreviousStage string   `json:"previous_stage"`
	NextRecord    *string  `json:"next_record"`
	Reasons       []string `json:"reasons"`
}

type reportRef struct {
	Reporter         string     `json:"reporter"`
	ReporterEmail    string     `json:"reporter_email"`
	ExternalReportID string     `json:"external_report_id"`
	TLSReportID      string     `json:"tls_report_id"`
	ReportID         string     `json:"report_id"` // a TLS report's own id when TLSReportID is set
	DateBegin        *time.Time `json:"date_begin"`
	DateEnd          *time.Time `json:"date_end"`
}

type source struct {
	SourceIP    *string `json:"source_ip"`
	CountryCode *string `json:"country_code"`
	ASN         *uint32 `json:"asn"`
	ASOrg       *string `json:"as_org"`
}

// topSource is a source of top_failing_sources, with its counts.
type topSource struct {
	source
	Messages  int64 `json:"messages"`
	DMARCFail int64 `json:"dmarc_fail"`
}

type policy struct {
	P   string `json:"p"`
	PCT int    `json:"pct"`
}

// evidence returns the evidence lines of an alert's details, at most
// maxFacts, each value cleaned. Details it cannot read give none: the
// title and message still say what happened.
func evidence(raw json.RawMessage) []fact {
	var d details
	var top struct {
		Top []topSource `json:"top_failing_sources"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &d) != nil || json.Unmarshal(raw, &top) != nil {
		return nil
	}
	var out []fact
	add := func(label, value string) {
		if v := clean(value, maxValueRunes); v != "" && len(out) < maxFacts {
			out = append(out, fact{label, v})
		}
	}
	ref := d.reportRef
	if d.Report != nil {
		ref = *d.Report
	}
	if ref.Reporter != "" {
		who := ref.Reporter
		if ref.ReporterEmail != "" {
			who += " (" + ref.ReporterEmail + ")"
		}
		add("Reporter", who)
		id := ref.ExternalReportID
		if d.TLSReportID != "" {
			id = ref.ReportID
		}
		add("Report ID", id)
	}
	if ref.DateBegin != nil && ref.DateEnd != nil {
		add("Period", ref.DateBegin.UTC().Format("2006-01-02 15:04")+" to "+ref.DateEnd.UTC().Format("2006-01-02 15:04 UTC"))
	}
	switch {
	case d.Failed != nil && d.Successful != nil:
		total := *d.Failed + *d.Successful
		add("TLS sessions", fmt.Sprintf("%d of %d failed (%s)", *d.Failed, total, pct(ratio(*d.Failed, total))))
		for _, r := range d.ResultTypes {
			add("Failure", fmt.Sprintf("%s: %d sessions", r.ResultType, r.Failed))
		}
	case d.Sender != "":
		name := d.Sender
		if d.SenderType != "" {
			name += " (" + d.SenderType + ")"
		}
		add("Sender", name)
		if d.Messages != nil && d.TotalMessages != nil {
			add("Messages", fmt.Sprintf("%d of the domain's %d", *d.Messages, *d.TotalMessages))
		}
		if d.DMARCPassRate != nil {
			add("DMARC pass", pct(*d.DMARCPassRate))
		}
	case d.Messages != nil && d.DMARCFail != nil:
		add("Messages", fmt.Sprintf("%d, of which %d failed DMARC (%s)", *d.Messages, *d.DMARCFail, pct(ratio(*d.DMARCFail, *d.Messages))))
	}
	for _, s := range top.Top {
		add("Failing source", s.describe()+fmt.Sprintf(": %d of %d messages failed", s.DMARCFail, s.Messages))
	}
	if d.SourceIP != nil && *d.SourceIP != "" {
		add("Source", d.source.describe())
	}
	if d.WindowDays > 0 {
		add("Unseen for", strconv.Itoa(d.WindowDays)+" days before")
	}
	if d.ArrivalDate != nil && !d.ArrivalDate.IsZero() {
		add("Arrived", d.ArrivalDate.UTC().Format("2006-01-02 15:04 UTC"))
	}
	if d.RecordName != "" {
		add("Record", d.RecordName)
		add("Before", orNone(d.OldRecord))
		add("Now", orNone(d.NewRecord))
	}
	if d.OldPolicy != nil && d.NewPolicy != nil {
		add("Policy", fmt.Sprintf("p=%s pct=%d → p=%s pct=%d", d.OldPolicy.P, d.OldPolicy.PCT, d.NewPolicy.P, d.NewPolicy.PCT))
	}
	add("Problem", d.Problem)
	add("Reporting address", d.ReportingEmail)
	if d.Host != "" {
		add("Mailbox", d.Username+" on "+d.Host+", folder "+d.Folder)
		if d.FailingHours > 0 {
			add("Failing for", strconv.FormatInt(d.FailingHours, 10)+" hours")
		}
		add("Last error", d.LastError)
	}
	if d.Stage != "" {
		stage := d.Stage
		if d.PreviousStage != "" {
			stage = d.PreviousStage + " → " + d.Stage
		}
		add("Stage", stage)
		if d.NextRecord != nil {
			add("Next record", *d.NextRecord)
		}
	}
	for _, h := range d.Hints {
		add("Hint", h)
	}
	for _, r := range d.Reasons {
		add("Reason", r)
	}
	return out
}

// describe says where a source is: "192.0.2.1, AS15169 Google LLC, US".
func (s source) describe() string {
	var parts []string
	if s.SourceIP != nil {
		parts = append(parts, *s.SourceIP)
	}
	if s.ASN != nil || s.ASOrg != nil {
		as := ""
		if s.ASN != nil {
			as = "AS" + strconv.FormatUint(uint64(*s.ASN), 10)
		}
		if s.ASOrg != nil {
			as = strings.TrimSpace(as + " " + *s.ASOrg)
		}
		parts = append(parts, as)
	}
	if s.CountryCode != nil && *s.CountryCode != "" {
		parts = append(parts, *s.CountryCode)
	}
	return strings.Join(parts, ", ")
}

func orNone(s *string) string {
	if s == nil || *s == "" {
		return "none"
	}
	return *s
}

func ratio(n, d int64) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / float64(d)
}

// pct writes a share with one decimal, "37.5%", as the alert titles do.
func pct(f float64) string { return strconv.FormatFloat(f*100, 'f', 1, 64) + "%" }
