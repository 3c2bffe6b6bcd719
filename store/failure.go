package store

import (
	"net/netip"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Failure (forensic, RUF) reports. Each is one message that failed DMARC,
// as a receiver reported it: stored under its own id with its original
// headers beside it (bucketFailureHeaders, read only by the single GET),
// indexed by organization and by domain in arrival-date order, and counted
// in per-organization, per-day, per-domain roll-ups (failure_stats.go) so
// that the summary and statistics never scan reports. Bodies of original
// messages are never stored: package dmarc does not even keep them.

// FailureAuthResults are a failure report's result per check; nil when the
// report does not say.
type FailureAuthResults struct {
	DMARC *string `json:"dmarc"`
	SPF   *string `json:"spf"`
	DKIM  *string `json:"dkim"`
}

// FailureReport is one stored failure report as the list shows it: API.md's
// forensic report object. Text the report left out is nil (JSON null).
// AuthFailure holds the checks the report names as failed, among "dmarc",
// "spf" and "dkim", in that order (the families the filters and counts go
// by); AuthFailureReported the Auth-Failure values as the report gave
// them (RFC 6591's bodyhash, revoked, signature, adsp are DKIM failures).
type FailureReport struct {
	ID                    string             `json:"id"`
	DomainID              string             `json:"domain_id"`
	Domain                string             `json:"domain"`
	OrgID                 string             `json:"-"`
	ReceivedAt            time.Time          `json:"received_at"`
	ArrivalDate           time.Time          `json:"arrival_date"`
	Reporter              *string            `json:"reporter"`
	SourceIP              *string            `json:"source_ip"`
	OriginalMailFrom      *string            `json:"original_mail_from"`
	OriginalRcptTo        *string            `json:"original_rcpt_to"`
	ReportedDomain        *string            `json:"reported_domain"`
	Subject               *string            `json:"subject"`
	MessageID             *string            `json:"message_id"`
	FeedbackType          string             `json:"feedback_type"`
	AuthFailure           []string           `json:"auth_failure"`
	AuthFailureReported   []string           `json:"auth_failure_reported"`
	DeliveryResult        *string            `json:"delivery_result"`
	AuthenticationResults FailureAuthResults `json:"authentication_results"`
	Geo                   *Geo               `json:"geo"`
	// Identity, when set, stands for ArrivalDate in the dedup identity
	// (see failDedupKey): for a report without Arrival-Date, what tells it
	// from another report about the same message (the report mail's Date,
	// else a hash of its content), so that the same report received again
	// later is found. Not in the API.
	Identity string `json:"-"`
}

// ReportedKinds returns the Auth-Failure values reported that are no
// family name (bodyhash, revoked...): what AuthFailure alone does not say.
func (r *FailureReport) ReportedKinds() []string {
	var out []string
	for _, v := range r.AuthFailureReported {
		if failureCheckBit(v) == 0 {
			out = append(out, v)
		}
	}
	return out
}

// FailureHeader is one header field of a reported message.
type FailureHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// FailureReportDetail is a failure report as the single GET shows it: the
// list object plus the DKIM signature named (when the report gave one) and
// the original message's headers in order, nil when the report carried
// none.
type FailureReportDetail struct {
	*FailureReport
	DKIMDomain   *string         `json:"dkim_domain"`
	DKIMSelector *string         `json:"dkim_selector"`
	Headers      []FailureHeader `json:"headers"`
}

// The checks a failure report may name as failed, as bits of a mask.
const (
	failDMARC byte = 1 << iota
	failSPF
	failDKIM
)

// failChecks are the checks in API order, with their bits.
var failChecks = [...]struct {
	name string
	bit  byte
}{{"dmarc", failDMARC}, {"spf", failSPF}, {"dkim", failDKIM}}

// failureCheckBit returns the mask bit of a check ("dmarc", "spf", "dkim"),
// or 0 for anything else.
func failureCheckBit(check string) byte {
	for _, c := range failChecks {
		if c.name == check {
			return c.bit
		}
	}
	return 0
}

// failMask turns a list of checks into a mask, ignoring unknown ones.
func failMask(checks []string) byte {
	var m byte
	for _, c := range checks {
		m |= failureCheckBit(c)
	}
	return m
}

// failChecksOf turns a mask back into the list of checks, in API order;
// never nil, so that JSON shows [].
func failChecksOf(m byte) []string {
	out := make([]string, 0, 3)
	for _, c := range failChecks {
		if m&c.bit != 0 {
			out = append(out, c.name)
		}
	}
	return out
}

// Bounds on what one failure report stores. Reports are small; these keep
// a hostile one from making every listing decode megabytes.
const (
	maxFailureText    = 1024     // a text field (subject, addresses...)
	maxFailureHeaders = 1000     // header fields kept
	maxFailureHdrSize = 1 << 20  // bytes of header names and values kept
	maxFailureHdrText = 64 << 10 // one header value
	// maxFailureReported bounds the Auth-Failure values kept as reported
	// (RFC 6591 knows seven), maxFailureIdentity the identity's bytes.
	maxFailureReported = 8
	maxFailureIdentity = 128
)

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
// "spf" and "dkim", in that order; AuthFailureReported (see keepReported)
// defaults to them; FeedbackType defaults to "auth-failure";
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
	r.FeedbackType = cutText(r.FeedbackType)
	r.Domain = cutText(r.Domain)
	for _, p := range []**string{&r.Reporter, &r.SourceIP, &r.OriginalMailFrom, &r.OriginalRcptTo,
		&r.ReportedDomain, &r.Subject, &r.MessageID, &r.DeliveryResult,
		&r.AuthenticationResults.DMARC, &r.AuthenticationResults.SPF, &r.AuthenticationResults.DKIM} {
		*p = cutOpt(*p)
	}
	f := &FailureDraft{rep: r, mask: failMask(r.AuthFailure)}
	f.rep.AuthFailure = failChecksOf(f.mask)
	f.rep.AuthFailureReported = keepReported(r.AuthFailureReported, f.rep.AuthFailure)
	f.rep.Identity = cutTo(r.Identity, maxFailureIdentity)
	f.rep.Geo = cloneGeo(r.Geo)
	f.dkim = [2]*string{cutOpt(d.DKIMDomain), cutOpt(d.DKIMSelector)}
	f.hdrs = keepHeaders(d.Headers)
	f.val = appendFailure(nil, &f.rep, f.mask, f.dkim)
	if f.hdrs != nil {
		f.hdrVal = appendFailureHeaders(nil, f.hdrs)
	}
	return f, nil
}

// ID returns the id the report will have once stored.
func (f *FailureDraft) ID() string { return f.rep.ID }

// Report returns the report as it will be stored.
func (f *FailureDraft) Report() FailureReport { return f.rep }

// Outcome returns what the last commit of the draft did with it.
func (f *FailureDraft) Outcome() FailureOutcome { return f.out }

// keepReported cleans the Auth-Failure values as reported: lower-cased,
// trimmed, without repeats, at most maxFailureReported of at most 64 bytes;
// none (a caller that knows only the families) gives the families.
func keepReported(vs, families []string) []string {
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		v = cutTo(strings.ToLower(strings.TrimSpace(v)), 64)
		if v != "" && !slices.Contains(out, v) && len(out) < maxFailureReported {
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		return append(out, families...)
	}
	return out
}

// cutText trims s to maxFailureText bytes, never inside a character.
func cutText(s string) string {
	return cutTo(s, maxFailureText)
}

// cutTo trims s to at most n bytes at a character boundary, and replaces
// invalid UTF-8 so that JSON shows what is stored.
func cutTo(s string, n int) string {
	if len(s) > n {
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// cutOpt is cutText for an optional field: "" becomes nil, and the value is
// copied so that the draft shares nothing with the caller.
func cutOpt(p *string) *string {
	if p == nil || *p == "" {
		return nil
	}
	return new(cutText(*p))
}

// keepHeaders copies at most maxFailureHeaders headers, within
// maxFailureHdrSize bytes, each value cut to maxFailureHdrText. Nil stays
// nil ("the report carried none").
func keepHeaders(hs []FailureHeader) []FailureHeader {
	if hs == nil {
		return nil
	}
	out := make([]FailureHeader, 0, min(len(hs), maxFailureHeaders))
	size := 0
	for _, h := range hs {
		if len(out) == maxFailureHeaders {
			break
		}
		h = FailureHeader{Name: cutText(h.Name), Value: cutTo(h.Value, maxFailureHdrText)}
		if size += len(h.Name) + len(h.Value); size > maxFailureHdrSize {
			break
		}
		out = append(out, h)
	}
	return out
}

// cloneGeo copies g, so that a draft shares nothing with its caller.
func cloneGeo(g *Geo) *Geo {
	if g == nil {
		return nil
	}
	return &Geo{CountryCode: clonePtr(g.CountryCode), CountryName: clonePtr(g.CountryName), City: clonePtr(g.City),
		Latitude: clonePtr(g.Latitude), Longitude: clonePtr(g.Longitude), ASN: clonePtr(g.ASN), ASOrg: clonePtr(g.ASOrg)}
}

// sourceIPOf returns the source IP, "" when unknown.
func (r *FailureReport) sourceIPOf() string {
	if r.SourceIP == nil {
		return ""
	}
	return *r.SourceIP
}
