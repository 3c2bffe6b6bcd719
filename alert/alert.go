package alert

import (
	"math"
	"time"
)

// The alert types of API.md.
const (
	// TypeDMARCFailureRate: a stored aggregate report shows a DMARC
	// failure rate over a threshold.
	TypeDMARCFailureRate = "dmarc_failure_rate"
	// TypeNewFailingSource: a source IP with failing mail not seen for the
	// domain in the previous days.
	TypeNewFailingSource = "new_failing_source"
	// TypeFailureReportReceived: a failure (forensic) report arrived. The
	// name is API.md's.
	TypeFailureReportReceived = "forensic_report_received"
	// TypeDNSRecordChanged: the _dmarc record changed in some other way.
	TypeDNSRecordChanged = "dns_record_changed"
	// TypeDNSRecordMissing: the _dmarc record vanished.
	TypeDNSRecordMissing = "dns_record_missing"
	// TypePolicyWeakened: p or pct of the _dmarc record was lowered.
	TypePolicyWeakened = "policy_weakened"
	// TypeReportingAddressRemoved: the reporting address left rua.
	TypeReportingAddressRemoved = "reporting_address_removed"
	// TypeTLSFailureRate: a stored SMTP TLS report (RFC 8460) counts a
	// share of failed sessions over a threshold.
	TypeTLSFailureRate = "tls_failure_rate"
	// TypeMailboxFailing: every poll of an IMAP mailbox has failed for a
	// day. It concerns no domain.
	TypeMailboxFailing = "mailbox_failing"
)

// The alert severities, least severe first.
const (
	SeverityInfo     = "info"
	SeverityWarning  = "warning"
	SeverityCritical = "critical"
)

// ValidType reports whether t is one of the alert types.
func ValidType(t string) bool {
	switch t {
	case TypeDMARCFailureRate, TypeNewFailingSource, TypeFailureReportReceived, TypeDNSRecordChanged,
		TypeDNSRecordMissing, TypePolicyWeakened, TypeReportingAddressRemoved, TypeTLSFailureRate,
		TypeMailboxFailing:
		return true
	case TypeNewSender, TypePolicyReady: // sender.go
		return true
	}
	return false
}

// Rank orders severities: 1 for info, 2 for warning, 3 for critical, 0
// for anything else.
func Rank(severity string) int {
	switch severity {
	case SeverityInfo:
		return 1
	case SeverityWarning:
		return 2
	case SeverityCritical:
		return 3
	}
	return 0
}

// Candidate is an alert a rule decided to raise. The caller stores it,
// giving it an id, organization, domain and creation time, and remembers
// its Dedup key with its severity.
type Candidate struct {
	Type, Severity string
	Title, Message string
	// Details explain the cause; they marshal to a JSON object.
	Details any
	// Dedup is the key under which the alert is remembered, so that the
	// rule does not raise it again (History.Raised); the zero key for an
	// alert that is never repeated by its rule (the DNS alerts: each
	// change is seen once).
	Dedup DedupKey
}

// DedupKey names what an alert was raised for: a domain, a type, a UTC
// day (Day) and a cause within them (a source IP, an hour; "" for the
// domain as a whole). Keys of past days are forgotten.
type DedupKey struct {
	Day      uint32
	DomainID string
	Type     string
	Cause    string
}

// History is what the rules read of the past: the alerts raised and the
// sources seen. It is read-only for the rules; the caller updates it as
// it stores what they decide, so that a rule sees the alerts raised
// before it in the same commit.
type History interface {
	// Raised returns the severity of the alert remembered under key, and
	// whether there is one.
	Raised(key DedupKey) (severity string, ok bool)
	// RaisedCount returns how many alerts of type typ are remembered for
	// the domain on day, whatever their cause.
	RaisedCount(day uint32, domainID, typ string) int
	// HasSources reports whether the sources of an earlier report of the
	// domain were learnt: a report without them is the domain's baseline.
	HasSources(domainID string) bool
	// SeenSource reports whether source IP ip was in a report of the
	// domain dated from day from to day to (UTC days, both included).
	SeenSource(domainID, ip string, from, to uint32) bool
}

// Day returns the UTC day of t: days since 1970-01-01 (0 before).
func Day(t time.Time) uint32 {
	s := t.Unix()
	if s < 0 {
		return 0
	}
	return uint32(min(s/86400, math.MaxUint32))
}
