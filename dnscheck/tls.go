package dnscheck

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// SMTP TLS reporting (RFC 8460) and MTA-STS (RFC 8461) checks: the
// check-tls answer of API.md.

// MTASTSBudget is the time allowed to fetch an MTA-STS policy file.
const MTASTSBudget = 5 * time.Second

// maxPolicyFile is the most of a policy file read (RFC 8461 section 3.3
// lets senders stop at 64 KiB).
const maxPolicyFile = 64 << 10

// maxMTASTSAge is the largest max_age of RFC 8461 section 3.2 (one year).
const maxMTASTSAge = 31557600

// PolicyFetcher fetches a URL under the outbound address policy; the
// egress.Client (Get) is one.
type PolicyFetcher interface {
	Get(ctx context.Context, rawURL string, max int64) (status int, contentType string, body []byte, err error)
}

// TLSChecker answers check-tls. Resolver must be set; without Fetcher the
// policy file is not fetched (an error in the answer says so).
type TLSChecker struct {
	Resolver *Resolver
	Fetcher  PolicyFetcher
	// Port of the policy host; 0 means 443. Tests point it at a local
	// HTTPS server.
	Port int
}

// TLSRPTResult is the TLS-RPT part of check-tls. Slices are never nil.
type TLSRPTResult struct {
	RecordName string   `json:"record_name"`
	Record     *string  `json:"record"`
	Found      bool     `json:"found"`
	RUA        []string `json:"rua"`
	Errors     []string `json:"errors"`
	Warnings   []string `json:"warnings"`
}

// MTASTSPolicy is a parsed MTA-STS policy file.
type MTASTSPolicy struct {
	Version string   `json:"version"`
	Mode    string   `json:"mode"`
	MX      []string `json:"mx"`
	MaxAge  *int64   `json:"max_age"`
}

// MTASTSResult is the MTA-STS part of check-tls.
type MTASTSResult struct {
	RecordName string        `json:"record_name"`
	TXTRecord  *string       `json:"txt_record"`
	Found      bool          `json:"found"`
	ID         *string       `json:"id"`
	PolicyURL  string        `json:"policy_url"`
	Policy     *MTASTSPolicy `json:"policy"`
	Errors     []string      `json:"errors"`
	Warnings   []string      `json:"warnings"`
}

// TLSResult is the check-tls answer.
type TLSResult struct {
	Domain string        `json:"domain"`
	TLSRPT *TLSRPTResult `json:"tlsrpt"`
	MTASTS *MTASTSResult `json:"mta_sts"`
}

// TLSRPTRecord is the TXT record that sends a domain's TLS reports to
// reportingEmail (RFC 8460 section 3), for dns_records.
func TLSRPTRecord(domain, reportingEmail string) DNSRecord {
	return DNSRecord{Type: "TXT", Name: "_smtp._tls." + domain, Value: "v=TLSRPTv1; rua=mailto:" + reportingEmail}
}

// TLSRPTRecordWith is TLSRPTRecord with an https URI reporters may POST
// to as well (RFC 8460 section 3), after the mailto URI; none when "".
func TLSRPTRecordWith(domain, reportingEmail, httpsURI string) DNSRecord {
	rec := TLSRPTRecord(domain, reportingEmail)
	if httpsURI != "" {
		rec.Value += "," + httpsURI
	}
	return rec
}

// CheckTLS reports domain's TLS-RPT record, MTA-STS record and MTA-STS
// policy file. The domain is normalized by the caller. Missing or broken
// records are findings in the answer; the error, wrapping ErrTemporary,
// comes back only when the DNS could not answer.
func (c *TLSChecker) CheckTLS(ctx context.Context, domain string) (*TLSResult, error) {
	res := &TLSResult{Domain: domain,
		TLSRPT: &TLSRPTResult{RecordName: "_smtp._tls." + domain, RUA: []string{}, Errors: []string{}, Warnings: []string{}},
		MTASTS: &MTASTSResult{RecordName: "_mta-sts." + domain, PolicyURL: c.policyURL(domain), Errors: []string{}, Warnings: []string{}},
	}
	rpt, err := c.txtWith(ctx, res.TLSRPT.RecordName, "v=TLSRPTv1")
	if err != nil {
		return nil, err
	}
	describeTLSRPT(res.TLSRPT, rpt)
	sts, err := c.txtWith(ctx, res.MTASTS.RecordName, "v=STSv1")
	if err != nil {
		return nil, err
	}
	if describeMTASTS(res.MTASTS, sts) {
		c.fetchPolicy(ctx, res.MTASTS)
	}
	return res, nil
}

func (c *TLSChecker) policyURL(domain string) string {
	host := "mta-sts." + domain
	if c.Port != 0 && c.Port != 443 {
		host = net.JoinHostPort(host, strconv.Itoa(c.Port))
	}
	return "https://" + host + "/.well-known/mta-sts.txt"
}

// txtWith returns the TXT records at name that start with version (the
// others are no concern of this check). No such name is no record.
func (c *TLSChecker) txtWith(ctx context.Context, name, version string) ([]string, error) {
	out, _, err := txtMatching(ctx, c.Resolver, name, func(t string) bool {
		v, _, _ := strings.Cut(t, ";")
		return strings.TrimSpace(v) == version
	})
	return out, err
}

// tagList splits "k=v; k=v" into tags in order; malformed parts are
// returned apart.
func tagList(rec string) (tags [][2]string, bad []string) {
	for _, part := range strings.Split(rec, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok || strings.TrimSpace(k) == "" {
			bad = append(bad, part)
			continue
		}
		tags = append(tags, [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
	}
	return tags, bad
}

// describeTLSRPT fills r from the TLS-RPT records found (RFC 8460
// section 3).
func describeTLSRPT(r *TLSRPTResult, recs []string) {
	switch len(recs) {
	case 0:
		r.Errors = append(r.Errors, "no TLS-RPT record at "+r.RecordName+": senders send no TLS reports")
		return
	case 1:
	default:
		r.Found = true
		r.Errors = append(r.Errors, fmt.Sprintf("%d TLS-RPT records at %s: senders ignore all of them (RFC 8460 section 3); publish exactly one", len(recs), r.RecordName))
		return
	}
	r.Found, r.Record = true, &recs[0]
	tags, bad := tagList(recs[0])
	for _, b := range bad {
		r.Errors = append(r.Errors, fmt.Sprintf("%q is not a field=value pair", b))
	}
	seenRUA := false
	for _, t := range tags[1:] {
		if t[0] != "rua" {
			continue // extension fields are allowed (RFC 8460 section 3)
		}
		if seenRUA {
			r.Errors = append(r.Errors, "rua appears more than once")
			continue
		}
		seenRUA = true
		for _, u := range strings.Split(t[1], ",") {
			u = strings.TrimSpace(u)
			if u == "" {
				continue
			}
			r.RUA = append(r.RUA, u)
			if why := badRUA(u); why != "" {
				r.Errors = append(r.Errors, fmt.Sprintf("rua %q %s", u, why))
			}
		}
	}
	if len(r.RUA) == 0 {
		r.Errors = append(r.Errors, "no rua: the record names no address to send reports to")
	}
}

// badRUA says what is wrong with a TLS-RPT reporting URI: mailto: or
// https: only (RFC 8460 section 3).
func badRUA(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "is not a URI"
	}
	switch strings.ToLower(p.Scheme) {
	case "mailto":
		if !strings.Contains(p.Opaque, "@") {
			return "is not a mail address"
		}
	case "https":
		if p.Host == "" {
			return "has no host"
		}
	default:
		return "must be mailto: or https:"
	}
	return ""
}

// describeMTASTS fills r from the MTA-STS records found (RFC 8461 section
// 3.1) and says whether the policy file should be fetched.
func describeMTASTS(r *MTASTSResult, recs []string) bool {
	switch len(recs) {
	case 0:
		r.Warnings = append(r.Warnings, "no MTA-STS record at "+r.RecordName+": senders may deliver without TLS")
		return false
	case 1:
	default:
		r.Found = true
		r.Errors = append(r.Errors, fmt.Sprintf("%d MTA-STS records at %s: senders ignore all of them (RFC 8461 section 3.1); publish exactly one", len(recs), r.RecordName))
		return false
	}
	r.Found, r.TXTRecord = true, &recs[0]
	tags, bad := tagList(recs[0])
	for _, b := range bad {
		r.Errors = append(r.Errors, fmt.Sprintf("%q is not a field=value pair", b))
	}
	for _, t := range tags[1:] {
		if t[0] == "id" {
			id := t[1]
			r.ID = &id
			if !validSTSID(id) {
				r.Errors = append(r.Errors, fmt.Sprintf("id %q must be 1 to 32 letters and digits", id))
			}
		}
	}
	if r.ID == nil {
		r.Errors = append(r.Errors, "no id: senders cannot tell when the policy changes")
	}
	return true
}

func validSTSID(id string) bool {
	if id == "" || len(id) > 32 {
		return false
	}
	for _, c := range id {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// fetchPolicy fetches and reads the policy file within MTASTSBudget.
func (c *TLSChecker) fetchPolicy(ctx context.Context, r *MTASTSResult) {
	if c.Fetcher == nil {
		r.Errors = append(r.Errors, "the policy file was not fetched: no HTTPS client configured")
		return
	}
	ctx, cancel := context.WithTimeout(ctx, MTASTSBudget)
	defer cancel()
	status, ctype, body, err := c.Fetcher.Get(ctx, r.PolicyURL, maxPolicyFile)
	if err != nil {
		r.Errors = append(r.Errors, "policy file "+r.PolicyURL+": "+err.Error())
		return
	}
	if status != 200 {
		r.Errors = append(r.Errors, fmt.Sprintf("policy file %s: HTTP %d (senders need 200; redirects are not followed)", r.PolicyURL, status))
		return
	}
	if mt, _, _ := strings.Cut(ctype, ";"); !strings.EqualFold(strings.TrimSpace(mt), "text/plain") {
		r.Warnings = append(r.Warnings, fmt.Sprintf("policy file is served as %q, not text/plain (RFC 8461 section 3.2)", ctype))
	}
	r.Policy = ParseMTASTSPolicy(string(body), &r.Errors, &r.Warnings)
}

// ParseMTASTSPolicy reads an MTA-STS policy file (RFC 8461 section 3.2),
// appending what is wrong to errs and what is doubtful to warns. MX is
// never nil.
func ParseMTASTSPolicy(text string, errs, warns *[]string) *MTASTSPolicy {
	p := &MTASTSPolicy{MX: []string{}}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			*errs = append(*errs, fmt.Sprintf("policy line %q is not key: value", clipText(line)))
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if k != "mx" && seen[k] {
			*errs = append(*errs, fmt.Sprintf("policy field %s appears more than once", k))
			continue
		}
		seen[k] = true
		switch k {
		case "version":
			p.Version = v
		case "mode":
			p.Mode = v
		case "mx":
			p.MX = append(p.MX, v)
		case "max_age":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 || len(v) > 10 {
				*errs = append(*errs, fmt.Sprintf("max_age %q is not a number of seconds", clipText(v)))
				continue
			}
			p.MaxAge = &n
			if n > maxMTASTSAge {
				*errs = append(*errs, fmt.Sprintf("max_age %d is over %d (one year)", n, maxMTASTSAge))
			} else if n < 86400 {
				*warns = append(*warns, fmt.Sprintf("max_age %d is under a day: senders will fetch the policy often and cache it briefly", n))
			}
		}
	}
	if p.Version != "STSv1" {
		*errs = append(*errs, fmt.Sprintf("version is %q, not STSv1", p.Version))
	}
	switch p.Mode {
	case "enforce", "none":
	case "testing":
		*warns = append(*warns, "mode is testing: failures are reported, not enforced")
	default:
		*errs = append(*errs, fmt.Sprintf("mode %q is not enforce, testing or none", p.Mode))
	}
	if p.MaxAge == nil && !seen["max_age"] {
		*errs = append(*errs, "no max_age")
	}
	if len(p.MX) == 0 && p.Mode != "none" {
		*errs = append(*errs, "no mx: the policy allows no mail server")
	}
	return p
}

func clipText(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// DomainRecords lists every record a registered domain publishes for
// dmarcd (the dns_records of its creation): the PublishRecords, then its
// TLS-RPT record at _smtp._tls.<domain>, whose rua also names the HTTPS
// endpoint <publicURL>/tlsrpt/<local part of reportingEmail> when
// publicURL is https.
func DomainRecords(domain, dmarcRecord, reportingEmail, reportingDomain, publicURL string) []DNSRecord {
	uri := ""
	if local, _, ok := strings.Cut(reportingEmail, "@"); ok && strings.HasPrefix(publicURL, "https://") {
		uri = publicURL + "/tlsrpt/" + local
	}
	return append(PublishRecords(domain, dmarcRecord, reportingDomain), TLSRPTRecordWith(domain, reportingEmail, uri))
}
