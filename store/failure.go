package store

import (
	"net/netip"
	"time"

	"github.com/dmarcd/dmarcd/store/internal/reports"
)

// Failure (forensic, RUF) reports. Each is one message that failed DMARC,
// as a receiver reported it: stored under its own id with its original
// headers beside it (bucketFailureHeaders, read only by the single GET),
// indexed by organization and by domain in arrival-date order, and counted
// in per-organization, per-day, per-domain roll-ups (failure_stats.go) so
// that the summary and statistics never scan reports. Bodies of original
// messages are never stored: package dmarc does not even keep them.

// FailureDraft is a failure report ready to be committed (IngestBatch
// Failures). After the commit, Outcome says what became of it.
type FailureDraft struct {
	rep  FailureReport
	mask byte
	dkim [2]*string
	hdrs []FailureHeader

	val, hdrVal []byte
	out         FailureOutcome
}

// FailureOutcome is what a commit did with one failure draft.
type FailureOutcome struct {
	// Stored is set when the report is now visible.
	Stored bool
	// DuplicateID is the report already stored with the same reporter,
	// source IP, message id and arrival date for the domain, when that kept
	// this one out.
	DuplicateID string
	// DomainGone is set when the domain was deleted before the commit.
	DomainGone bool
}

// NewFailureDraft prepares d for storing. The caller sets DomainID, Domain
// and OrgID (from routing), ReceivedAt and what the report says; the draft
// gets a new ID. Times are kept in UTC at second precision. A zero
// ArrivalDate becomes ReceivedAt, and so does one after ReceivedAt (a
// message cannot arrive after the report about it, and retention and the
// daily counts go by the arrival date). AuthFailure keeps only "dmarc",
// "spf" and "dkim", in that order; FeedbackType defaults to "auth-failure";
// SourceIP must be an IP address (stored in its canonical form); empty
// strings become nil, text over 1024 bytes is cut, and at most 1,000
// headers (1 MiB) are kept. Errors: ErrInvalid for a malformed domain or
// organization id, a zero ReceivedAt or a SourceIP that is not an IP.
func NewFailureDraft(d *FailureReportDetail) (*FailureDraft, error) {
	if d == nil || d.FailureReport == nil {
		return nil, errorf(ErrInvalid, "failure report is required")
	}
	r := *d.FailureReport
	if !ValidID(r.DomainID) || !ValidID(r.OrgID) {
		return nil, errorf(ErrInvalid, "failure report needs a domain and an organization")
	}
	if r.ReceivedAt.IsZero() {
		return nil, errorf(ErrInvalid, "failure report needs a receive time")
	}
	if r.SourceIP != nil && *r.SourceIP != "" {
		ip, err := netip.ParseAddr(*r.SourceIP)
		if err != nil || ip.Zone() != "" {
			return nil, errorf(ErrInvalid, "failure report source IP %q is not an IP address", *r.SourceIP)
		}
		r.SourceIP = new(ip.Unmap().String())
	}
	r.ID = NewID()
	r.ReceivedAt = r.ReceivedAt.UTC().Truncate(time.Second)
	r.ArrivalDate = r.ArrivalDate.UTC().Truncate(time.Second)
	if r.ArrivalDate.IsZero() || r.ArrivalDate.After(r.ReceivedAt) {
		r.ArrivalDate = r.ReceivedAt
	}
	if r.FeedbackType == "" {
		r.FeedbackType = "auth-failure"
	}
	r.FeedbackType = reports.CutText(r.FeedbackType)
	r.Domain = reports.CutText(r.Domain)
	for _, p := range []**string{&r.Reporter, &r.SourceIP, &r.OriginalMailFrom, &r.OriginalRcptTo,
		&r.ReportedDomain, &r.Subject, &r.MessageID, &r.DeliveryResult,
		&r.AuthenticationResults.DMARC, &r.AuthenticationResults.SPF, &r.AuthenticationResults.DKIM} {
		*p = reports.CutOpt(*p)
	}
	f := &FailureDraft{rep: r, mask: reports.FailMask(r.AuthFailure)}
	f.rep.AuthFailure = reports.FailChecksOf(f.mask)
	f.rep.Geo = reports.CloneGeo(r.Geo)
	f.dkim = [2]*string{reports.CutOpt(d.DKIMDomain), reports.CutOpt(d.DKIMSelector)}
	f.hdrs = reports.KeepHeaders(d.Headers)
	f.val = reports.AppendFailure(nil, &f.rep, f.mask, f.dkim)
	if f.hdrs != nil {
		f.hdrVal = reports.AppendFailureHeaders(nil, f.hdrs)
	}
	return f, nil
}

// Report returns the report as it will be stored.
func (f *FailureDraft) Report() FailureReport { return f.rep }

// Outcome returns what the last commit of the draft did with it.
func (f *FailureDraft) Outcome() FailureOutcome { return f.out }

// Failure reports are package reports' values.
type (
	// FailureAuthResults are a failure report's result per check.
	FailureAuthResults = reports.FailureAuthResults
	// FailureReport is one stored failure report as the list shows it.
	FailureReport = reports.FailureReport
	// FailureHeader is one header field of a reported message.
	FailureHeader = reports.FailureHeader
	// FailureReportDetail is a failure report as the single GET shows it.
	FailureReportDetail = reports.FailureReportDetail
)
