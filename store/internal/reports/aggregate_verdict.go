package reports

import (
	"encoding/json"
	"strings"

	"github.com/dmarcd/dmarcd/dmarc"
)

// A record's DMARC verdict goes by its policy_evaluated dkim and spf
// results: the reporter's aligned verdicts. Legacy reports (AOL's of
// 2012) leave both out: DKIM and SPF are then stored as "" (JSON null),
// and the verdict is derived here from auth_results, each pass counted
// when its domain is aligned with header_from in relaxed mode (the same
// organizational domain, RFC 7489's default; the record does not carry
// the report's adkim and aspf). The record then says DMARCDerived. It is
// computed alike when a record is read and when a report's counts are
// made at ingest, from what is stored, so nothing is stored for it.

// aligned returns whether r's messages passed DKIM and SPF aligned with
// their From domain, and whether that was derived from auth_results
// because the report gave neither verdict.
func (r *Record) aligned() (dkim, spf, derived bool) {
	if r.DKIM != "" || r.SPF != "" {
		return r.DKIM == "pass", r.SPF == "pass", false
	}
	from := strings.ToLower(strings.TrimSpace(r.HeaderFrom))
	if from == "" {
		return false, false, true
	}
	org := ""
	alignedWith := func(domain string) bool {
		domain = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(domain), "."))
		if domain == "" {
			return false
		}
		if domain == from {
			return true
		}
		if org == "" {
			org = dmarc.OrganizationalDomain(from)
		}
		return dmarc.OrganizationalDomain(domain) == org
	}
	for i := range r.AuthResults.DKIM {
		if a := &r.AuthResults.DKIM[i]; a.Result == "pass" && alignedWith(a.Domain) {
			dkim = true
			break
		}
	}
	for i := range r.AuthResults.SPF {
		// SPF of the HELO identity is no DMARC identifier.
		if a := &r.AuthResults.SPF[i]; a.Result == "pass" && (a.Scope == nil || *a.Scope != "helo") && alignedWith(a.Domain) {
			spf = true
			break
		}
	}
	return dkim, spf, true
}

// Verdict is a policy_evaluated result of a record ("pass", "fail"...),
// "" when the report left it out, which JSON shows as null.
type Verdict string

var (
	jsonNull = []byte("null")
	jsonPass = []byte(`"pass"`)
	jsonFail = []byte(`"fail"`)
)

// MarshalJSON writes v, null when it is "".
func (v Verdict) MarshalJSON() ([]byte, error) {
	switch v {
	case "":
		return jsonNull, nil
	case "pass":
		return jsonPass, nil
	case "fail":
		return jsonFail, nil
	}
	return json.Marshal(string(v))
}

// MarshalJSON writes the group with dkim and spf null for records whose
// report left them out.
func (g AuthResultGroup) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		DKIM     *string `json:"dkim"`
		SPF      *string `json:"spf"`
		DMARC    string  `json:"dmarc"`
		Messages int64   `json:"messages"`
	}{nullIfEmpty(g.DKIM), nullIfEmpty(g.SPF), g.DMARC, g.Messages})
}

func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
