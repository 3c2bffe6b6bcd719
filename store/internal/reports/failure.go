package reports

import (
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

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
	// (see store's failDedupKey): for a report without Arrival-Date, what
	// tells it from another report about the same message (the report
	// mail's Date, else a hash of its content), so that the same report
	// received again later is found. Not in the API.
	Identity string `json:"-"`
}

// ReportedKinds returns the Auth-Failure values reported that are no
// family name (bodyhash, revoked...): what AuthFailure alone does not say.
func (r *FailureReport) ReportedKinds() []string {
	var out []string
	for _, v := range r.AuthFailureReported {
		if FailureCheckBit(v) == 0 {
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

// FailureCheckBit returns the mask bit of a check ("dmarc", "spf", "dkim"),
// or 0 for anything else.
func FailureCheckBit(check string) byte {
	for _, c := range failChecks {
		if c.name == check {
			return c.bit
		}
	}
	return 0
}

// FailMask turns a list of checks into a mask, ignoring unknown ones.
func FailMask(checks []string) byte {
	var m byte
	for _, c := range checks {
		m |= FailureCheckBit(c)
	}
	return m
}

// FailChecksOf turns a mask back into the list of checks, in API order;
// never nil, so that JSON shows [].
func FailChecksOf(m byte) []string {
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

// KeepReported cleans the Auth-Failure values as reported: lower-cased,
// trimmed, without repeats, at most maxFailureReported of at most 64 bytes;
// none (a caller that knows only the families) gives the families.
func KeepReported(vs, families []string) []string {
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

// CutIdentity trims a report's identity to maxFailureIdentity bytes.
func CutIdentity(s string) string { return cutTo(s, maxFailureIdentity) }

// CutText trims s to maxFailureText bytes, never inside a character.
func CutText(s string) string {
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

// CutOpt is CutText for an optional field: "" becomes nil, and the value is
// copied so that the draft shares nothing with the caller.
func CutOpt(p *string) *string {
	if p == nil || *p == "" {
		return nil
	}
	return new(CutText(*p))
}

// KeepHeaders copies at most maxFailureHeaders headers, within
// maxFailureHdrSize bytes, each value cut to maxFailureHdrText. Nil stays
// nil ("the report carried none").
func KeepHeaders(hs []FailureHeader) []FailureHeader {
	if hs == nil {
		return nil
	}
	out := make([]FailureHeader, 0, min(len(hs), maxFailureHeaders))
	size := 0
	for _, h := range hs {
		if len(out) == maxFailureHeaders {
			break
		}
		h = FailureHeader{Name: CutText(h.Name), Value: cutTo(h.Value, maxFailureHdrText)}
		if size += len(h.Name) + len(h.Value); size > maxFailureHdrSize {
			break
		}
		out = append(out, h)
	}
	return out
}

// CloneGeo copies g, so that a draft shares nothing with its caller.
func CloneGeo(g *Geo) *Geo {
	if g == nil {
		return nil
	}
	return &Geo{CountryCode: clonePtr(g.CountryCode), CountryName: clonePtr(g.CountryName), City: clonePtr(g.City),
		Latitude: clonePtr(g.Latitude), Longitude: clonePtr(g.Longitude), ASN: clonePtr(g.ASN), ASOrg: clonePtr(g.ASOrg)}
}

// SourceIPOf returns the source IP of r, "" when unknown.
func SourceIPOf(r *FailureReport) string {
	if r.SourceIP == nil {
		return ""
	}
	return *r.SourceIP
}
