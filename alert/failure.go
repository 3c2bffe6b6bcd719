package alert

import (
	"fmt"
	"strconv"
	"time"
)

// The failure report rule: forensic_report_received, at most once per
// domain per UTC clock hour.

// Failure is what the failure report rule needs of a stored failure
// (forensic) report.
type Failure struct {
	ID, DomainID string
	// Domain is the name of the domain it was stored for.
	Domain string
	// SourceIP is the source of the failing message, "" when unknown.
	SourceIP    string
	ArrivalDate time.Time
	// Origin is where SourceIP is, as far as known; Geo is the report's
	// whole geolocation, put in the details as it is (nil: null).
	Origin
	Geo any
}

// failureDetails explain a forensic_report_received alert.
type failureDetails struct {
	ForensicReportID string    `json:"forensic_report_id"`
	SourceIP         *string   `json:"source_ip"`
	Geo              any       `json:"geo"`
	ArrivalDate      time.Time `json:"arrival_date"`
	HourStart        time.Time `json:"hour_start"`
}

// EvaluateFailure returns the alert stored failure report f raises at now,
// nil when the domain had one this hour.
func (r Rules) EvaluateFailure(f *Failure, h History, now time.Time) *Candidate {
	if r.Disabled || now.Sub(f.ArrivalDate) > r.MaxReportAge {
		// An archive being imported: old news, as for aggregate reports.
		return nil
	}
	hour := now.Truncate(time.Hour)
	key := DedupKey{Day: Day(now), DomainID: f.DomainID, Type: TypeFailureReportReceived, Cause: strconv.Itoa(hour.Hour())}
	if _, ok := h.Raised(key); ok {
		return nil
	}
	det := failureDetails{ForensicReportID: f.ID, Geo: f.Geo, ArrivalDate: f.ArrivalDate.UTC().Truncate(time.Second), HourStart: hour}
	from := ""
	if f.SourceIP != "" {
		det.SourceIP = new(f.SourceIP)
		from = " about mail from " + f.SourceIP + f.describe()
	}
	return &Candidate{
		Type: TypeFailureReportReceived, Severity: SeverityInfo,
		Title:   "Failure report received for " + f.Domain,
		Message: fmt.Sprintf("A failure (forensic) report%s arrived for %s; further ones this hour raise no alert.", from, f.Domain),
		Details: det, Dedup: key,
	}
}
