package alert

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The report rules: dmarc_failure_rate and new_failing_source, evaluated
// for each stored aggregate report (see the package documentation).

// Report is what the report rules need of a stored aggregate report.
type Report struct {
	ID, DomainID, Domain string
	// Reporter, ReporterEmail and ExternalReportID are the report's
	// org_name, email and report_id.
	Reporter, ReporterEmail, ExternalReportID string
	DateBegin, DateEnd                        time.Time
	Messages, DMARCPass, DMARCFail            int64
	// FailingSources are the report's sources with mail failing DMARC,
	// in any order.
	FailingSources []Source
}

// Source is one source IP of a report with its counts and where it is.
type Source struct {
	IP                             string
	Messages, DMARCPass, DMARCFail int64
	Origin
}

// Origin is what is known of where mail came from (nil: unknown).
type Origin struct {
	CountryCode *string
	ASN         *uint32
	ASOrg       *string
}

// topFailingSources is how many sources a failure rate alert lists.
const topFailingSources = 5

// Fresh reports whether a report whose range ended at dateEnd raises
// alerts when it is stored at now (MaxReportAge).
func (r Rules) Fresh(dateEnd, now time.Time) bool { return now.Sub(dateEnd) <= r.MaxReportAge }

// KeepsSources reports whether the sources of a report of UTC day day,
// stored on UTC day today, can still make a source known to a report of
// today or later; older ones need not be learnt.
func (r Rules) KeepsSources(day, today uint32) bool {
	return int64(day)+int64(r.NewSourceDays)+1 >= int64(today)
}

// SourceWindow returns the UTC days a failing source of a report of day
// must have been seen in for it not to be new: NewSourceDays days before,
// up to day itself.
func (r Rules) SourceWindow(day uint32) (from, to uint32) {
	return uint32(max(int64(day)-int64(r.NewSourceDays), 0)), day
}

// EvaluateReport returns the alerts stored report rep raises at now, in
// the order to raise them: dmarc_failure_rate, then new_failing_source
// alerts, most failing source first. h must not know rep's own sources
// yet. A report that is not Fresh raises none.
func (r Rules) EvaluateReport(rep *Report, h History, now time.Time) []Candidate {
	if r.Disabled || !r.Fresh(rep.DateEnd, now) {
		return nil
	}
	today := Day(now)
	var out []Candidate
	if c := r.failureRate(rep, h, today); c != nil {
		out = append(out, *c)
	}
	return r.newFailingSources(out, rep, h, today)
}

// failureRateDetails explain a dmarc_failure_rate alert.
type failureRateDetails struct {
	reportRef
	Messages       int64           `json:"messages"`
	DMARCPass      int64           `json:"dmarc_pass"`
	DMARCFail      int64           `json:"dmarc_fail"`
	FailureRate    float64         `json:"failure_rate"`
	Threshold      float64         `json:"threshold"`
	MinFailing     int64           `json:"min_failing"`
	FailingSources []failingSource `json:"top_failing_sources"`
}

// reportRef names the aggregate report an alert comes from.
type reportRef struct {
	ReportID         string    `json:"report_id"`
	Reporter         string    `json:"reporter"`
	ReporterEmail    string    `json:"reporter_email"`
	ExternalReportID string    `json:"external_report_id"`
	DateBegin        time.Time `json:"date_begin"`
	DateEnd          time.Time `json:"date_end"`
}

// failingSource is a source IP of a report with its failures and geo.
type failingSource struct {
	SourceIP    string  `json:"source_ip"`
	Messages    int64   `json:"messages"`
	DMARCFail   int64   `json:"dmarc_fail"`
	CountryCode *string `json:"country_code"`
	ASN         *uint32 `json:"asn"`
	ASOrg       *string `json:"as_org"`
}

func refOf(r *Report) reportRef {
	return reportRef{ReportID: r.ID, Reporter: r.Reporter, ReporterEmail: r.ReporterEmail,
		ExternalReportID: r.ExternalReportID, DateBegin: r.DateBegin, DateEnd: r.DateEnd}
}

func sourceOf(s *Source) failingSource {
	return failingSource{SourceIP: s.IP, Messages: s.Messages, DMARCFail: s.DMARCFail,
		CountryCode: s.CountryCode, ASN: s.ASN, ASOrg: s.ASOrg}
}

func (r Rules) failureRate(rep *Report, h History, today uint32) *Candidate {
	if rep.Messages <= 0 || rep.DMARCFail < r.MinFailing {
		return nil
	}
	rate := float64(rep.DMARCFail) / float64(rep.Messages)
	sev, threshold := SeverityCritical, r.FailureRateCritical
	if rate < threshold {
		sev, threshold = SeverityWarning, r.FailureRateWarning
	}
	if rate < threshold {
		return nil
	}
	key := DedupKey{Day: today, DomainID: rep.DomainID, Type: TypeDMARCFailureRate}
	if prev, ok := h.Raised(key); ok && Rank(prev) >= Rank(sev) {
		return nil
	}
	det := failureRateDetails{reportRef: refOf(rep), Messages: rep.Messages, DMARCPass: rep.DMARCPass,
		DMARCFail: rep.DMARCFail, FailureRate: round4(rate), Threshold: threshold, MinFailing: r.MinFailing,
		FailingSources: []failingSource{}}
	top := slices.Clone(rep.FailingSources)
	slices.SortFunc(top, func(x, y Source) int {
		return cmp.Or(cmp.Compare(y.Messages, x.Messages), cmp.Compare(x.IP, y.IP))
	})
	for i := range top[:min(len(top), topFailingSources)] {
		det.FailingSources = append(det.FailingSources, sourceOf(&top[i]))
	}
	return &Candidate{
		Type: TypeDMARCFailureRate, Severity: sev,
		Title: fmt.Sprintf("%s of the mail from %s failed DMARC", percent(rate), rep.Domain),
		Message: fmt.Sprintf("The report of %s (%s to %s) counts %d of %d messages failing DMARC (%s), at or over the %s threshold of %s.",
			rep.Reporter, rep.DateBegin.Format(time.DateOnly), rep.DateEnd.Format(time.DateOnly),
			rep.DMARCFail, rep.Messages, percent(rate), sev, percent(threshold)),
		Details: det, Dedup: key,
	}
}

// newSourceDetails explain a new_failing_source alert.
type newSourceDetails struct {
	failingSource
	WindowDays int       `json:"window_days"`
	Report     reportRef `json:"report"`
}

// newFailingSources appends to out the new_failing_source alerts of rep:
// none for the domain's baseline report or a report too old to be learnt.
func (r Rules) newFailingSources(out []Candidate, rep *Report, h History, today uint32) []Candidate {
	day := Day(rep.DateBegin)
	if len(rep.FailingSources) == 0 || !r.KeepsSources(day, today) || !h.HasSources(rep.DomainID) {
		return out
	}
	from, to := r.SourceWindow(day)
	var fresh []*Source
	for i := range rep.FailingSources {
		if s := &rep.FailingSources[i]; !h.SeenSource(rep.DomainID, s.IP, from, to) {
			fresh = append(fresh, s)
		}
	}
	if len(fresh) == 0 {
		return out
	}
	slices.SortFunc(fresh, func(x, y *Source) int {
		return cmp.Or(cmp.Compare(y.DMARCFail, x.DMARCFail), cmp.Compare(x.IP, y.IP))
	})
	raised := h.RaisedCount(today, rep.DomainID, TypeNewFailingSource)
	for _, s := range fresh {
		if raised >= r.MaxNewSourceAlerts {
			break
		}
		key := DedupKey{Day: today, DomainID: rep.DomainID, Type: TypeNewFailingSource, Cause: s.IP}
		if _, ok := h.Raised(key); ok {
			continue
		}
		out = append(out, Candidate{
			Type: TypeNewFailingSource, Severity: SeverityInfo,
			Title: fmt.Sprintf("New source %s sends mail failing DMARC for %s", s.IP, rep.Domain),
			Message: fmt.Sprintf("%s%s sent %d messages failing DMARC in the report of %s (%s to %s) and was not seen for %s in the %d days before.",
				s.IP, s.describe(), s.DMARCFail, rep.Reporter, rep.DateBegin.Format(time.DateOnly),
				rep.DateEnd.Format(time.DateOnly), rep.Domain, r.NewSourceDays),
			Details: newSourceDetails{failingSource: sourceOf(s), WindowDays: r.NewSourceDays, Report: refOf(rep)},
			Dedup:   key,
		})
		raised++
	}
	return out
}

// describe renders " (US, AS15169 GOOGLE)" from what is known.
func (o Origin) describe() string {
	var parts []string
	if o.CountryCode != nil {
		parts = append(parts, *o.CountryCode)
	}
	if o.ASN != nil {
		as := "AS" + strconv.FormatUint(uint64(*o.ASN), 10)
		if o.ASOrg != nil {
			as += " " + *o.ASOrg
		}
		parts = append(parts, as)
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

func round4(f float64) float64 { return math.Round(f*10000) / 10000 }

// percent renders a rate as "12.5%".
func percent(f float64) string {
	return strconv.FormatFloat(math.Round(f*1000)/10, 'f', -1, 64) + "%"
}
