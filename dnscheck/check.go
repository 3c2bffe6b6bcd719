package dnscheck

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dmarcd/dmarcd/dmarc"
)

// DefaultSuggestTimeout bounds SuggestRecord when Checker.SuggestTimeout is 0.
const DefaultSuggestTimeout = 3 * time.Second

// Checker answers DMARC questions about domains from the DNS. Resolver must
// be set. A Checker is safe for concurrent use.
type Checker struct {
	Resolver       *Resolver
	SuggestTimeout time.Duration // budget of SuggestRecord; 0 means DefaultSuggestTimeout
}

// ExternalAuthorization says whether the host of a reporting address
// outside the domain agreed to receive its reports (RFC 7489 section 7.1).
type ExternalAuthorization struct {
	URI        string `json:"uri"`
	Host       string `json:"host"`
	Authorized *bool  `json:"authorized"` // nil when the DNS could not tell
}

// Policy holds the effective policy values of a record.
type Policy struct {
	P     string  `json:"p"`
	SP    string  `json:"sp"`
	NP    string  `json:"np"`
	PCT   int     `json:"pct"`
	ADKIM string  `json:"adkim"`
	ASPF  string  `json:"aspf"`
	FO    string  `json:"fo"`
	PSD   *string `json:"psd"`
	T     *string `json:"t"`
}

// CheckResult is the check-dmarc answer of API.md. Slices and maps are
// never nil, so they encode as [] and {}.
type CheckResult struct {
	Domain                string                  `json:"domain"`
	RecordName            string                  `json:"record_name"`
	Record                *string                 `json:"record"`
	Found                 bool                    `json:"found"`
	InheritedFrom         *string                 `json:"inherited_from"`
	Valid                 bool                    `json:"valid"`
	Tags                  map[string]string       `json:"tags"`
	Policy                *Policy                 `json:"policy"`
	RUA                   []string                `json:"rua"`
	RUF                   []string                `json:"ruf"`
	ExternalAuthorization []ExternalAuthorization `json:"external_authorization"`
	Warnings              []string                `json:"warnings"`
	Errors                []string                `json:"errors"`
}

func newResult(domain string) *CheckResult {
	return &CheckResult{
		Domain:                domain,
		RecordName:            recordName(domain),
		Tags:                  map[string]string{},
		RUA:                   []string{},
		RUF:                   []string{},
		ExternalAuthorization: []ExternalAuthorization{},
		Warnings:              []string{},
		Errors:                []string{},
	}
}

func recordName(domain string) string { return "_dmarc." + domain }

// CheckDMARC reports the DMARC record that applies to domain, which the
// caller has normalized (dmarc.NormalizeDomain).
//
// It looks up _dmarc.<domain>. Without a DMARC record there it performs the
// DNS tree walk of RFC 9989 section 4.10 (which also reaches the RFC 7489
// Organizational Domain) and sets InheritedFrom to the domain whose record
// applies. Several DMARC records at _dmarc.<domain> make the result
// invalid; TXT records that are not DMARC are ignored. For reporting
// addresses outside the policy domain's Organizational Domain it checks the
// RFC 7489 section 7.1 authorization record.
//
// "No record anywhere" is a result with Found false. The error, which wraps
// ErrTemporary, comes back only when a lookup needed to find the record
// failed, so the answer cannot be known.
func (c *Checker) CheckDMARC(ctx context.Context, domain string) (*CheckResult, error) {
	res := newResult(domain)
	recs, err := c.dmarcRecords(ctx, domain, res)
	if err != nil {
		return nil, err
	}
	switch {
	case len(recs) == 1:
		c.describe(ctx, res, domain, recs[0])
		return res, nil
	case len(recs) > 1:
		res.Found = true
		res.Errors = append(res.Errors, fmt.Sprintf(
			"multiple DMARC records at %s (%d): receivers ignore all of them (RFC 9989 section 4.10); publish exactly one: %s",
			res.RecordName, len(recs), quoteAll(recs)))
		return res, nil
	}
	hit, err := c.treeWalk(ctx, domain, res)
	if err != nil {
		return nil, err
	}
	if hit == nil {
		return res, nil
	}
	res.InheritedFrom = &hit.domain
	res.Warnings = append(res.Warnings, fmt.Sprintf(
		"no DMARC record at %s: the record of %s applies (RFC 9989 section 4.10.1), with sp=%s for existing and np=%s for non-existent subdomains",
		res.RecordName, hit.domain, hit.rec.SP, hit.rec.NP))
	c.describe(ctx, res, hit.domain, hit.txt)
	return res, nil
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// dmarcRecords returns the TXT records at _dmarc.<domain> that claim to be
// DMARC. A missing name is no records. When res is not nil, TXT records
// that look like a mistyped DMARC record are noted in its warnings.
func (c *Checker) dmarcRecords(ctx context.Context, domain string, res *CheckResult) ([]string, error) {
	recs, others, err := c.txtRecords(ctx, domain)
	if res != nil {
		for _, t := range others {
			if looksLikeDMARC(t) {
				res.Warnings = append(res.Warnings, fmt.Sprintf(
					"the TXT record %q at %s is ignored: a DMARC record must start with v=DMARC1 exactly", t, recordName(domain)))
			}
		}
	}
	return recs, err
}

// txtRecords returns the TXT records at _dmarc.<domain> that claim to be
// DMARC, and the others. A missing name is no records.
func (c *Checker) txtRecords(ctx context.Context, domain string) (recs, others []string, err error) {
	return txtMatching(ctx, c.Resolver, recordName(domain), dmarc.IsDMARCRecord)
}

// txtMatching returns the TXT records at name that match, and the others.
// A missing name (ErrNotFound) is no records; other errors are r's.
func txtMatching(ctx context.Context, r TXTResolver, name string, match func(string) bool) (matching, others []string, err error) {
	txts, err := r.LookupTXT(ctx, name)
	if errors.Is(err, ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	for _, t := range txts {
		if match(t) {
			matching = append(matching, t)
		} else {
			others = append(others, t)
		}
	}
	return matching, others, nil
}

func looksLikeDMARC(txt string) bool {
	return strings.Contains(strings.ToLower(txt), "dmarc")
}

// describe fills res from the record txt published at _dmarc.<policyDomain>.
func (c *Checker) describe(ctx context.Context, res *CheckResult, policyDomain, txt string) {
	res.Found = true
	res.Record = &txt
	tags, _ := dmarc.ParseTags(txt) // the problems come again from ParseRecord
	for _, t := range tags {
		if _, dup := res.Tags[t.Name]; !dup {
			res.Tags[t.Name] = t.Value
		}
	}
	rec, err := dmarc.ParseRecord(txt)
	if err != nil {
		res.Errors = append(res.Errors, problems(err)...)
		return
	}
	res.Valid = true
	res.Policy = &Policy{P: rec.P, SP: rec.SP, NP: rec.NP, PCT: rec.PCT, ADKIM: rec.ADKIM,
		ASPF: rec.ASPF, FO: rec.FO, PSD: rec.PSD, T: rec.T}
	for _, u := range rec.RUA {
		res.RUA = append(res.RUA, u.Raw)
	}
	for _, u := range rec.RUF {
		res.RUF = append(res.RUF, u.Raw)
	}
	res.Warnings = append(res.Warnings, rec.Warnings...)
	c.checkExternal(ctx, res, policyDomain, rec)
}

// problems returns the client-facing sentences of a ParseRecord error.
func problems(err error) []string {
	var re *dmarc.RecordError
	if errors.As(err, &re) {
		return re.Problems
	}
	return []string{err.Error()}
}

// TXTResolver looks up TXT records, as Resolver does: its errors wrap
// ErrNotFound for a name without TXT records and ErrTemporary when the DNS
// could not tell.
type TXTResolver interface {
	LookupTXT(ctx context.Context, name string) ([]string, error)
}

// DMARCRecords returns the DMARC records (TXT records starting with
// v=DMARC1) published at _dmarc.<domain>, sorted; none when the name has
// no TXT records. Errors are r's other than ErrNotFound.
func DMARCRecords(ctx context.Context, r TXTResolver, domain string) ([]string, error) {
	recs, _, err := txtMatching(ctx, r, recordName(domain), dmarc.IsDMARCRecord)
	slices.Sort(recs)
	return recs, err
}
