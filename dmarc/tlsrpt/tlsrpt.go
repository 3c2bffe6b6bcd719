// Package tlsrpt reads SMTP TLS reports (RFC 8460): the JSON a sending
// mail server publishes about the TLS sessions it tried with a domain's MX
// hosts. It is pure, like package dmarc: an io.Reader of the JSON in, a
// Report out, under caps on size, nesting depth and array lengths, so that
// hostile input costs little and is refused with a reason. Compressed
// reports (application/tlsrpt+gzip) are unpacked by package
// dmarc/container, whose walk caps sizes and ratios for every kind of
// report alike.
//
// Every error describing the input wraps ErrMalformed (test with
// errors.Is); those about size also wrap ErrTooLarge. Errors of the
// caller's own io.Reader come back wrapped but unchanged.
package tlsrpt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/dmarcd/dmarcd/dmarc/container"
)

// Errors, shared with package dmarc so that the intake classifies a TLS
// report the way it classifies a DMARC one.
var (
	// ErrMalformed means the input is no RFC 8460 report, or a broken one.
	ErrMalformed = container.ErrMalformed
	// ErrTooLarge means the input exceeds a Limit; such errors also wrap
	// ErrMalformed.
	ErrTooLarge = container.ErrTooLarge
)

// Policy types of RFC 8460 section 4.4.
const (
	PolicySTS           = "sts"
	PolicyTLSA          = "tlsa"
	PolicyNoPolicyFound = "no-policy-found"
)

// ResultTypes are the failure result types of RFC 8460 section 4.3, in the
// RFC's order. A report may carry others (later RFCs, or a reporter's
// own); they are kept as sent.
var ResultTypes = []string{
	// Negotiation failures (4.3.1).
	"starttls-not-supported", "certificate-host-mismatch", "certificate-expired",
	"certificate-not-trusted", "validation-failure",
	// Policy failures: DANE (4.3.2.1) and MTA-STS (4.3.2.2).
	"tlsa-invalid", "dnssec-invalid", "dane-required",
	"sts-policy-fetch-error", "sts-policy-invalid", "sts-webpki-invalid",
}

// KnownResultType reports whether t is one of ResultTypes.
func KnownResultType(t string) bool {
	for _, k := range ResultTypes {
		if k == t {
			return true
		}
	}
	return false
}

// Report is one RFC 8460 report. Optional text the report leaves out (or
// sends as null) is "".
type Report struct {
	OrganizationName string
	ContactInfo      string
	ReportID         string
	DateBegin        time.Time // UTC
	DateEnd          time.Time // UTC
	Policies         []Policy
}

// Policy is one entry of a report's "policies": the policy applied and the
// sessions it covered.
type Policy struct {
	Type               string   // PolicySTS, PolicyTLSA or PolicyNoPolicyFound
	Domain             string   // policy-domain
	Strings            []string // policy-string, nil when absent
	MXHosts            []string // mx-host, nil when absent
	SuccessfulSessions int64
	FailedSessions     int64
	Failures           []FailureDetail
}

// FailureDetail is one entry of a policy's "failure-details". ResultType
// is kept as sent, known (KnownResultType) or not.
type FailureDetail struct {
	ResultType            string
	SendingMTAIP          string
	ReceivingMXHostname   string
	ReceivingMXHelo       string
	ReceivingIP           string
	FailedSessions        int64
	AdditionalInformation string
	FailureReasonCode     string
}

// Sessions returns the report's successful and failed sessions, summed over
// its policies (each count is at most MaxCount, so the sums cannot
// overflow).
func (r *Report) Sessions() (successful, failed int64) {
	for i := range r.Policies {
		successful += r.Policies[i].SuccessfulSessions
		failed += r.Policies[i].FailedSessions
	}
	return successful, failed
}

// Limits bound the work spent on one input. A zero field means its default.
type Limits struct {
	MaxBytes    int64 // JSON bytes read (default 8 MiB)
	MaxDepth    int   // nesting of objects and arrays (default 16; the schema needs 5)
	MaxArray    int   // elements of any one array (default 10,000)
	MaxFailures int   // failure-details of a whole report (default 100,000)
}

// Defaults of Limits.
const (
	DefaultMaxBytes    = 8 << 20
	DefaultMaxDepth    = 16
	DefaultMaxArray    = 10_000
	DefaultMaxFailures = 100_000

	// MaxCount is the largest session count accepted: the largest integer
	// a JSON number holds exactly in every reader (2^53-1).
	MaxCount = 1<<53 - 1
)

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	if l.MaxArray <= 0 {
		l.MaxArray = DefaultMaxArray
	}
	if l.MaxFailures <= 0 {
		l.MaxFailures = DefaultMaxFailures
	}
	return l
}

// malformed wraps ErrMalformed with a reason.
func malformed(format string, args ...any) error {
	return fmt.Errorf("tlsrpt: %w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// tooLarge wraps ErrTooLarge and ErrMalformed with a reason.
func tooLarge(format string, args ...any) error {
	return fmt.Errorf("tlsrpt: %w (%w): %s", ErrTooLarge, ErrMalformed, fmt.Sprintf(format, args...))
}

// Parse reads one report as JSON from r (not compressed: package
// dmarc/container unpacks what is), reading at most lim.MaxBytes.
func Parse(r io.Reader, lim Limits) (*Report, error) {
	lim = lim.withDefaults()
	buf := readBufs.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledBuf {
			buf.Reset()
			readBufs.Put(buf)
		}
	}()
	if _, err := buf.ReadFrom(io.LimitReader(r, lim.MaxBytes+1)); err != nil {
		if errors.Is(err, ErrTooLarge) || errors.Is(err, ErrMalformed) {
			// A container walker's error already says what went wrong
			// ("dmarc: gzip expands more than ..."): not "tlsrpt: read:"
			// in front of it again.
			return nil, err
		}
		return nil, fmt.Errorf("tlsrpt: read: %w", err)
	}
	if int64(buf.Len()) > lim.MaxBytes {
		return nil, tooLarge("report over %d bytes", lim.MaxBytes)
	}
	// The report keeps copies of what it needs: the buffer is reused.
	return parseJSON(buf.Bytes(), lim)
}

// readBufs recycles Parse's read buffers: a report is read whole, and
// growing a fresh buffer for each was a good part of a report's cost.
var readBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBuf is the largest buffer kept for reuse.
const maxPooledBuf = 1 << 20

// LooksLikeTLSReport reports whether data, the first bytes of a JSON
// payload (as package dmarc/container's walk hands them over, unpacked),
// looks like a TLS report rather than anything else, DMARC reports
// included: a JSON object naming "policies" and "report-id". It reads at
// most the first 1 MiB.
func LooksLikeTLSReport(data []byte) bool {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	data = bytes.TrimLeft(data, " \t\r\n")
	if len(data) == 0 || data[0] != '{' {
		return false
	}
	if len(data) > 1<<20 {
		data = data[:1<<20]
	}
	return bytes.Contains(data, []byte(`"policies"`)) && bytes.Contains(data, []byte(`"report-id"`))
}

// The JSON as sent. Pointers tell absent and null from empty.
type (
	rawReport struct {
		OrganizationName *string       `json:"organization-name"`
		DateRange        *rawDate      `json:"date-range"`
		ContactInfo      *string       `json:"contact-info"`
		ReportID         *string       `json:"report-id"`
		Policies         *[]*rawPolicy `json:"policies"`
	}
	rawDate struct {
		Start *string `json:"start-datetime"`
		End   *string `json:"end-datetime"`
	}
	rawPolicy struct {
		Policy   *rawPolicyHead `json:"policy"`
		Summary  *rawSummary    `json:"summary"`
		Failures []*rawFailure  `json:"failure-details"`
	}
	rawFailure struct {
		ResultType            *string      `json:"result-type"`
		SendingMTAIP          *string      `json:"sending-mta-ip"`
		ReceivingMXHostname   *string      `json:"receiving-mx-hostname"`
		ReceivingMXHelo       *string      `json:"receiving-mx-helo"`
		ReceivingIP           *string      `json:"receiving-ip"`
		FailedSessions        *json.Number `json:"failed-session-count"`
		AdditionalInformation *string      `json:"additional-information"`
		FailureReasonCode     *string      `json:"failure-reason-code"`
	}
)

// strList is a list of strings that also accepts one bare string (some
// reporters send mx-host that way) and null; null elements are skipped.
type strList []string

// UnmarshalJSON implements json.Unmarshaler.
func (s *strList) UnmarshalJSON(b []byte) error {
	switch {
	case bytes.Equal(b, []byte("null")):
		*s = nil
		return nil
	case len(b) > 0 && b[0] == '"':
		var one string
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*s = strList{one}
		return nil
	}
	var many []*string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("must be a string or an array of strings")
	}
	out := make(strList, 0, len(many))
	for _, p := range many {
		if p != nil {
			out = append(out, *p)
		}
	}
	*s = out
	return nil
}

// parseJSON decodes data (decode.go) under the limits and validates it.
func parseJSON(data []byte, lim Limits) (*Report, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	raw, err := decode(data, lim)
	if err != nil {
		return nil, err
	}
	return raw.convert(lim)
}

func (raw *rawReport) convert(lim Limits) (*Report, error) {
	r := &Report{}
	var err error
	if r.OrganizationName, err = required(raw.OrganizationName, "organization-name"); err != nil {
		return nil, err
	}
	if r.ReportID, err = required(raw.ReportID, "report-id"); err != nil {
		return nil, err
	}
	r.ContactInfo = optional(raw.ContactInfo)
	if raw.DateRange == nil {
		return nil, malformed("date-range is missing")
	}
	if r.DateBegin, err = datetime(raw.DateRange.Start, "date-range.start-datetime"); err != nil {
		return nil, err
	}
	if r.DateEnd, err = datetime(raw.DateRange.End, "date-range.end-datetime"); err != nil {
		return nil, err
	}
	if r.DateEnd.Before(r.DateBegin) {
		return nil, malformed("date-range ends (%s) before it starts (%s)",
			r.DateEnd.Format(time.RFC3339), r.DateBegin.Format(time.RFC3339))
	}
	if raw.Policies == nil {
		return nil, malformed("policies is missing")
	}
	pols := *raw.Policies
	r.Policies = make([]Policy, 0, len(pols))
	failures := 0
	for i, rp := range pols {
		if rp == nil {
			return nil, malformed("policies[%d] is null", i)
		}
		p, err := rp.convert(fmt.Sprintf("policies[%d]", i))
		if err != nil {
			return nil, err
		}
		if failures += len(p.Failures); failures > lim.MaxFailures {
			return nil, tooLarge("more than %d failure-details", lim.MaxFailures)
		}
		r.Policies = append(r.Policies, p)
	}
	return r, nil
}

func (rp *rawPolicy) convert(at string) (Policy, error) {
	var p Policy
	if rp.Policy == nil {
		return p, malformed("%s.policy is missing", at)
	}
	t, err := required(rp.Policy.Type, at+".policy.policy-type")
	if err != nil {
		return p, err
	}
	switch t {
	case PolicySTS, PolicyTLSA, PolicyNoPolicyFound:
		p.Type = t
	default:
		return p, malformed("%s.policy.policy-type %q is not sts, tlsa or no-policy-found", at, clip(t))
	}
	if p.Domain, err = required(rp.Policy.Domain, at+".policy.policy-domain"); err != nil {
		return p, err
	}
	p.Strings = []string(rp.Policy.Strings)
	p.MXHosts = []string(rp.Policy.MXHost)
	if rp.Summary == nil {
		return p, malformed("%s.summary is missing", at)
	}
	if p.SuccessfulSessions, err = count(rp.Summary.Successful, at+".summary.total-successful-session-count"); err != nil {
		return p, err
	}
	if p.FailedSessions, err = count(rp.Summary.Failed, at+".summary.total-failure-session-count"); err != nil {
		return p, err
	}
	if rp.Failures != nil {
		p.Failures = make([]FailureDetail, 0, len(rp.Failures))
	}
	for j, rf := range rp.Failures {
		fat := fmt.Sprintf("%s.failure-details[%d]", at, j)
		if rf == nil {
			return p, malformed("%s is null", fat)
		}
		f := FailureDetail{
			SendingMTAIP:          optional(rf.SendingMTAIP),
			ReceivingMXHostname:   optional(rf.ReceivingMXHostname),
			ReceivingMXHelo:       optional(rf.ReceivingMXHelo),
			ReceivingIP:           optional(rf.ReceivingIP),
			AdditionalInformation: optional(rf.AdditionalInformation),
			FailureReasonCode:     optional(rf.FailureReasonCode),
		}
		if f.ResultType, err = required(rf.ResultType, fat+".result-type"); err != nil {
			return p, err
		}
		if f.FailedSessions, err = count(rf.FailedSessions, fat+".failed-session-count"); err != nil {
			return p, err
		}
		p.Failures = append(p.Failures, f)
	}
	return p, nil
}

// required returns a field that must be a non-empty string.
func required(p *string, field string) (string, error) {
	if p == nil {
		return "", malformed("%s is missing", field)
	}
	if *p == "" {
		return "", malformed("%s is empty", field)
	}
	return *p, nil
}

func optional(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// datetime reads an RFC 3339 date-time.
func datetime(p *string, field string) (time.Time, error) {
	s, err := required(p, field)
	if err != nil {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, malformed("%s %q is not an RFC 3339 date-time", field, clip(s))
	}
	return t.UTC(), nil
}

// count reads a session count: absent or null is 0; otherwise an integer
// from 0 to MaxCount.
func count(n *json.Number, field string) (int64, error) {
	if n == nil {
		return 0, nil
	}
	s := n.String()
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		if f, ferr := strconv.ParseFloat(s, 64); ferr == nil && f == float64(int64(f)) && f >= 0 && f <= MaxCount {
			return int64(f), nil // 12.0 or 1.2e1: a whole number written oddly
		}
		return 0, malformed("%s %s is not a whole number from 0 to %d", field, clip(s), int64(MaxCount))
	}
	if v < 0 {
		return 0, malformed("%s %d is negative", field, v)
	}
	if v > MaxCount {
		return 0, malformed("%s %d is over %d", field, v, int64(MaxCount))
	}
	return v, nil
}

// clip shortens text quoted in an error.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
