package alert

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dmarcd/dmarcd/dmarc"
)

// The DNS rule: what a change of a domain's _dmarc record means. A change
// raises one alert, the most specific:
//
//   - no DMARC record any more: dns_record_missing (critical);
//   - the record no longer valid (or several): dns_record_changed (warning);
//   - the reporting address gone from rua: reporting_address_removed
//     (critical: reports stop arriving);
//   - p or pct lowered: policy_weakened (warning);
//   - anything else, a record published again included:
//     dns_record_changed (info).
//
// The first look at a domain only remembers, unless the domain is active
// and its reporting address is already gone, or the record is weaker (p or
// pct lower) than the one published when the domain was registered:
// policy_weakened. A domain whose record lacks
// its reporting address is to go from active to inactive (API.md).

// NoRecord is the DNS state of a _dmarc name without a DMARC record. A
// DMARC record starts with "v=", so it cannot be mistaken for one.
const NoRecord = "(none)"

// DNSChange is what a DNS check of a domain saw. A state is "" when the
// name was never looked at, NoRecord when it has no DMARC record, or else
// its DMARC records, sorted, one per line.
type DNSChange struct {
	// Domain is the domain's name; ReportingEmail its reporting address.
	Domain, ReportingEmail string
	// Active is set when the domain is active (verified).
	Active bool
	// Old is the state at the previous check, New the state now.
	Old, New string
	// Registered is the record published when the domain was registered
	// ("" when none was): the first look (Old "") compares with it.
	Registered string
}

// DNSVerdict is what a DNS change means.
type DNSVerdict struct {
	// Alert is the alert to raise, nil for none.
	Alert *Candidate
	// Deactivate is set when the new record lacks the reporting address:
	// an active domain goes inactive.
	Deactivate bool
}

// parsed is one side of a change: the record, or why there is none.
type parsed struct {
	text    *string       // nil: no record
	rec     *dmarc.Record // nil: none or not valid
	problem string        // why rec is nil although text is not
}

func parseState(s string) parsed {
	if s == "" || s == NoRecord {
		return parsed{}
	}
	p := parsed{text: &s}
	if strings.Contains(s, "\n") {
		p.problem = "more than one DMARC record is published, so receivers apply none"
		return p
	}
	rec, err := dmarc.ParseRecord(s)
	if err != nil {
		var re *dmarc.RecordError
		p.problem = err.Error()
		if errors.As(err, &re) {
			p.problem = strings.Join(re.Problems, "; ")
		}
		return p
	}
	p.rec = rec
	return p
}

func (p parsed) hasAddress(addr string) bool { return p.rec != nil && p.rec.HasReportingAddress(addr) }

// changeDetails explain a DNS alert.
type changeDetails struct {
	RecordName     string       `json:"record_name"`
	OldRecord      *string      `json:"old_record"`
	NewRecord      *string      `json:"new_record"`
	ReportingEmail string       `json:"reporting_email,omitempty"`
	OldPolicy      *policyShort `json:"old_policy,omitempty"`
	NewPolicy      *policyShort `json:"new_policy,omitempty"`
	Problem        string       `json:"problem,omitempty"`
}

type policyShort struct {
	P   string `json:"p"`
	PCT int    `json:"pct"`
}

func policyOf(r *dmarc.Record) *policyShort { return &policyShort{P: r.P, PCT: r.PCT} }

// policyRank orders p values from weakest to strongest.
func policyRank(p string) int {
	switch p {
	case "quarantine":
		return 1
	case "reject":
		return 2
	}
	return 0
}

// ClassifyDNSChange decides what the change from c.Old to c.New means.
func ClassifyDNSChange(c DNSChange) DNSVerdict {
	old, cur := parseState(c.Old), parseState(c.New)
	first := c.Old == ""
	if first && c.Registered != "" {
		old = parseState(c.Registered)
	}
	weakened := old.rec != nil && cur.rec != nil &&
		(policyRank(cur.rec.P) < policyRank(old.rec.P) || cur.rec.PCT < old.rec.PCT)
	lost := !cur.hasAddress(c.ReportingEmail)
	v := DNSVerdict{Deactivate: lost}
	name := "_dmarc." + c.Domain
	det := changeDetails{RecordName: name, OldRecord: old.text, NewRecord: cur.text}
	var typ, sev, title, msg string
	switch {
	case first && (!lost || !c.Active) && !weakened:
		return v // the first look only remembers, unless weaker than at registration
	case cur.text == nil:
		typ, sev = TypeDNSRecordMissing, SeverityCritical
		title = "DMARC record of " + c.Domain + " is gone"
		msg = "No DMARC record is published at " + name + " any more: receivers apply no policy and send no reports."
	case cur.rec == nil:
		typ, sev = TypeDNSRecordChanged, SeverityWarning
		det.Problem = cur.problem
		title = "DMARC record of " + c.Domain + " is no longer valid"
		msg = "The DMARC record at " + name + " changed and is not valid: " + cur.problem + "."
	case lost && (first || old.hasAddress(c.ReportingEmail)):
		typ, sev = TypeReportingAddressRemoved, SeverityCritical
		det.ReportingEmail = c.ReportingEmail
		title = "Reporting address removed from the DMARC record of " + c.Domain
		msg = "The rua tag at " + name + " no longer lists " + c.ReportingEmail + ": reports stop reaching dmarcd, and the domain is now inactive until it is verified again."
	case weakened:
		typ, sev = TypePolicyWeakened, SeverityWarning
		det.OldPolicy, det.NewPolicy = policyOf(old.rec), policyOf(cur.rec)
		title = "DMARC policy of " + c.Domain + " weakened"
		msg = fmt.Sprintf("The DMARC record at %s went from p=%s pct=%d to p=%s pct=%d.",
			name, old.rec.P, old.rec.PCT, cur.rec.P, cur.rec.PCT)
	default:
		typ, sev = TypeDNSRecordChanged, SeverityInfo
		title = "DMARC record of " + c.Domain + " changed"
		msg = "The DMARC record at " + name + " changed."
		if old.text == nil {
			msg = "A DMARC record is published again at " + name + "."
		}
	}
	v.Alert = &Candidate{Type: typ, Severity: sev, Title: title, Message: msg, Details: det}
	return v
}
