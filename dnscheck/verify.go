package dnscheck

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/dmarcd/dmarcd/dmarc"
)

// VerifyError says why a domain failed verification, in words for the
// domain's owner.
type VerifyError struct {
	Reason string
}

// Error returns the reason.
func (e *VerifyError) Error() string { return e.Reason }

// Verify checks that _dmarc.<domain> itself (no tree walk) publishes exactly
// one valid DMARC record whose rua holds mailto:reportingEmail (compared
// case-insensitively, a size suffix allowed). It returns nil when it does,
// a *VerifyError naming the reason when it does not, and an error wrapping
// ErrTemporary when the DNS could not answer.
func (c *Checker) Verify(ctx context.Context, domain, reportingEmail string) error {
	name := recordName(domain)
	recs, others, err := c.txtRecords(ctx, domain)
	if err != nil {
		return err
	}
	switch {
	case len(recs) == 0 && len(others) > 0:
		return &VerifyError{Reason: fmt.Sprintf("the TXT record %q at %s is not a DMARC record: a DMARC record starts with v=DMARC1",
			others[0], name)}
	case len(recs) == 0:
		return &VerifyError{Reason: "no DMARC record found at " + name}
	case len(recs) > 1:
		return &VerifyError{Reason: "more than one DMARC record at " + name}
	}
	rec, err := dmarc.ParseRecord(recs[0])
	if err != nil {
		return &VerifyError{Reason: "the TXT record at " + name + " is not a valid DMARC record: " +
			strings.Join(problems(err), "; ")}
	}
	if !rec.HasReportingAddress(reportingEmail) {
		return &VerifyError{Reason: "the reporting address " + reportingEmail + " is not in the rua tag of " + name}
	}
	return nil
}

// Suggestion is what SuggestRecord proposes, and what it saw.
type Suggestion struct {
	// Record is the DMARC record to publish at _dmarc.<domain>.
	Record string
	// Published is what _dmarc.<domain> published when it was looked up:
	// its DMARC records, sorted, one per line; "" when it had none.
	Published string
}

// SuggestRecord returns the DMARC record to publish at _dmarc.<domain> so
// that reports reach reportingEmail, without weakening what is there: when
// the domain has one valid record, that record with the address added to
// rua and ruf (dmarc.Record.WithReportingAddress); when it has none (also
// NXDOMAIN), several, or an invalid one, dmarc.DefaultRecord. When the DNS
// does not answer (SERVFAIL, a timeout, SuggestTimeout passing) it returns
// an error wrapping ErrTemporary: a suggestion made blind could be weaker
// than what the domain publishes.
func (c *Checker) SuggestRecord(ctx context.Context, domain, reportingEmail string) (Suggestion, error) {
	budget := c.SuggestTimeout
	if budget <= 0 {
		budget = DefaultSuggestTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	recs, err := c.dmarcRecords(ctx, domain, nil)
	if err != nil {
		return Suggestion{}, err
	}
	slices.Sort(recs)
	sug := Suggestion{Record: dmarc.DefaultRecord(reportingEmail), Published: strings.Join(recs, "\n")}
	if len(recs) != 1 {
		return sug, nil
	}
	rec, err := dmarc.ParseRecord(recs[0])
	if err != nil {
		return sug, nil
	}
	sug.Record = rec.WithReportingAddress(reportingEmail)
	return sug, nil
}

// DNSRecord is one record a domain owner publishes.
type DNSRecord struct {
	Type  string `json:"type"`
	Name  string `json:"name"`
	Value string `json:"value"`
}

// PublishRecords lists the TXT records that make reports about domain
// reach an address at reportingDomain: the DMARC record at _dmarc.<domain>,
// which the domain's owner publishes, and the RFC 7489 section 7.1
// authorization <domain>._report._dmarc.<reportingDomain> "v=DMARC1" in
// the reporting domain's zone (a wildcard *._report._dmarc.<reportingDomain>
// covers it).
func PublishRecords(domain, record, reportingDomain string) []DNSRecord {
	return []DNSRecord{
		{Type: "TXT", Name: recordName(domain), Value: record},
		{Type: "TXT", Name: authorizationName(domain, reportingDomain), Value: "v=DMARC1"},
	}
}
