package dnscheck

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/dmarcd/dmarcd/internal/dnstest"
)

func checker(tb testing.TB, s *dnstest.Server) *Checker {
	return &Checker{Resolver: quickResolver(tb, s)}
}

func mustCheck(tb testing.TB, c *Checker, domain string) *CheckResult {
	tb.Helper()
	res, err := c.CheckDMARC(context.Background(), domain)
	if err != nil {
		tb.Fatalf("CheckDMARC(%s): %v", domain, err)
	}
	return res
}

func hasText(list []string, sub string) bool {
	return slices.ContainsFunc(list, func(s string) bool { return strings.Contains(s, sub) })
}

// TestCheckDMARCJSON ensures a found record encodes exactly as the API.md check-dmarc example.
func TestCheckDMARCJSON(t *testing.T) {
	s := dnstest.Start(t)
	s.AddTXT("_dmarc.example.com", "v=DMARC1; p=reject; rua=mailto:dmarc@example.com")
	res := mustCheck(t, checker(t, s), "example.com")
	got, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"domain": "example.com", "record_name": "_dmarc.example.com",
 "record": "v=DMARC1; p=reject; rua=mailto:dmarc@example.com", "found": true,
 "inherited_from": null, "valid": true,
 "tags": {"v": "DMARC1", "p": "reject", "rua": "mailto:dmarc@example.com"},
 "policy": {"p": "reject", "sp": "reject", "np": "reject", "pct": 100, "adkim": "r", "aspf": "r", "fo": "0", "psd": null, "t": null},
 "rua": ["mailto:dmarc@example.com"], "ruf": [], "external_authorization": [],
 "warnings": [], "errors": []}`
	var gotV, wantV any
	if err := json.Unmarshal(got, &gotV); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &wantV); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotV, wantV) {
		t.Errorf("JSON\n got %s\nwant %s", got, want)
	}
}

// TestCheckDMARCNotFound ensures a domain without any record is a result, not an error, for NXDOMAIN and NODATA alike.
func TestCheckDMARCNotFound(t *testing.T) {
	s := dnstest.Start(t)
	s.SetA("_dmarc.nodata.example", "192.0.2.1") // _dmarc name exists, no TXT
	s.AddTXT("_dmarc.spf-only.example", "v=spf1 -all")
	c := checker(t, s)
	for _, domain := range []string{"nxdomain.example", "nodata.example", "spf-only.example"} {
		res := mustCheck(t, c, domain)
		if res.Found || res.Valid || res.Record != nil || res.Policy != nil || res.InheritedFrom != nil {
			t.Errorf("%s: %+v, want not found", domain, res)
		}
		b, _ := json.Marshal(res)
		if !strings.Contains(string(b), `"record":null`) || !strings.Contains(string(b), `"tags":{}`) || !strings.Contains(string(b), `"rua":[]`) {
			t.Errorf("%s: JSON %s lacks null record or empty lists", domain, b)
		}
	}
	// The walk went up to the top-level domain, one query per label.
	if n := s.Queries("_dmarc.example"); n != 3 {
		t.Errorf("_dmarc.example queried %d times, want once per check", n)
	}
}

// TestCheckDMARCIgnoresOtherTXT ensures non-DMARC TXT records beside the DMARC one are ignored.
func TestCheckDMARCIgnoresOtherTXT(t *testing.T) {
	s := dnstest.Start(t)
	s.AddTXT("_dmarc.example.com", "v=spf1 -all")
	s.AddTXT("_dmarc.example.com", "v=DMARC1; ", "p=quarantine; ", "rua=mailto:d@example.com") // split strings
	s.AddTXT("_dmarc.example.com", "some-verification=abc")
	res := mustCheck(t, checker(t, s), "example.com")
	if !res.Valid || *res.Record != "v=DMARC1; p=quarantine; rua=mailto:d@example.com" || res.Policy.P != "quarantine" {
		t.Errorf("got %+v", res)
	}
}

// TestCheckDMARCMultiple ensures several DMARC records at one name make the result invalid.
func TestCheckDMARCMultiple(t *testing.T) {
	s := dnstest.Start(t)
	s.AddTXT("_dmarc.example.com", "v=DMARC1; p=none")
	s.AddTXT("_dmarc.example.com", "v=DMARC1; p=reject")
	s.AddTXT("_dmarc.com", "v=DMARC1; p=reject; rua=mailto:x@example.net")
	res := mustCheck(t, checker(t, s), "example.com")
	if !res.Found || res.Valid || res.Policy != nil || res.InheritedFrom != nil || !hasText(res.Errors, "multiple DMARC records") {
		t.Errorf("got %+v", res)
	}
}

// TestCheckDMARCInvalid ensures a broken record is found but invalid, with its tags and the reasons.
func TestCheckDMARCInvalid(t *testing.T) {
	s := dnstest.Start(t)
	s.AddTXT("_dmarc.example.com", "v=DMARC1; p=block; rua=mailto:d@example.com")
	s.AddTXT("_dmarc.mistyped.example", "v=dmarc1; p=reject")
	c := checker(t, s)
	res := mustCheck(t, c, "example.com")
	if !res.Found || res.Valid || res.Policy != nil || res.Tags["p"] != "block" || !hasText(res.Errors, `p must be one of`) {
		t.Errorf("got %+v", res)
	}
	res = mustCheck(t, c, "mistyped.example")
	if res.Found || !hasText(res.Warnings, "must start with v=DMARC1 exactly") {
		t.Errorf("mistyped: got %+v", res)
	}
}

// TestCheckDMARCInherited ensures a subdomain without a record gets its parent's record through the tree walk.
func TestCheckDMARCInherited(t *testing.T) {
	s := dnstest.Start(t)
	s.AddTXT("_dmarc.example.com", "v=DMARC1; p=reject; sp=quarantine; rua=mailto:d@example.com")
	res := mustCheck(t, checker(t, s), "mail.sub.example.com")
	if !res.Found || !res.Valid || res.InheritedFrom == nil || *res.InheritedFrom != "example.com" {
		t.Fatalf("got %+v", res)
	}
	if res.RecordName != "_dmarc.mail.sub.example.com" || res.Policy.SP != "quarantine" || !hasText(res.Warnings, "the record of example.com applies") {
		t.Errorf("got %+v", res)
	}
	for name, want := range map[string]int{"_dmarc.mail.sub.example.com": 1, "_dmarc.sub.example.com": 1, "_dmarc.example.com": 1, "_dmarc.com": 1} {
		if n := s.Queries(name); n != want {
			t.Errorf("%s queried %d times, want %d", name, n, want)
		}
	}
}

// TestCheckDMARCTreeWalkShortcut ensures a name of eight or more labels jumps to seven labels (RFC 9989 section 4.10 step 4).
func TestCheckDMARCTreeWalkShortcut(t *testing.T) {
	s := dnstest.Start(t)
	s.AddTXT("_dmarc.example.com", "v=DMARC1; p=reject; rua=mailto:d@example.com")
	domain := "a.b.c.d.e.f.g.h.i.j.mail.example.com"
	res := mustCheck(t, checker(t, s), domain)
	if res.InheritedFrom == nil || *res.InheritedFrom != "example.com" {
		t.Fatalf("got %+v", res)
	}
	queried := []string{domain, "g.h.i.j.mail.example.com", "h.i.j.mail.example.com", "i.j.mail.example.com",
		"j.mail.example.com", "mail.example.com", "example.com", "com"}
	for _, d := range queried {
		if n := s.Queries("_dmarc." + d); n != 1 {
			t.Errorf("_dmarc.%s queried %d times, want 1", d, n)
		}
	}
	for _, d := range []string{"b.c.d.e.f.g.h.i.j.mail.example.com", "f.g.h.i.j.mail.example.com"} {
		if n := s.Queries("_dmarc." + d); n != 0 {
			t.Errorf("_dmarc.%s queried %d times, want 0 (shortcut)", d, n)
		}
	}
}

// TestCheckDMARCOrganizationalDomain ensures the record applied is chosen as RFC 9989 section 4.10 says, psd tags included.
func TestCheckDMARCOrganizationalDomain(t *testing.T) {
	tests := []struct {
		name    string
		records map[string]string
		domain  string
		want    string // InheritedFrom
	}{
		{"fewest labels wins", map[string]string{
			"mail.example.com": "v=DMARC1; p=none; rua=mailto:d@example.com",
			"example.com":      "v=DMARC1; p=reject; rua=mailto:d@example.com",
		}, "a.mail.example.com", "example.com"},
		{"psd=n stops the walk", map[string]string{
			"mail.example.com": "v=DMARC1; p=none; psd=n; rua=mailto:d@example.com",
			"example.com":      "v=DMARC1; p=reject; rua=mailto:d@example.com",
		}, "a.mail.example.com", "mail.example.com"},
		{"psd=y gives the domain below, which has a record", map[string]string{
			"example.gov": "v=DMARC1; p=quarantine; rua=mailto:d@example.gov",
			"gov":         "v=DMARC1; p=reject; psd=y; rua=mailto:psd@registry.gov",
		}, "a.b.example.gov", "example.gov"},
		{"psd=y without an Organizational Domain record applies the PSD policy", map[string]string{
			"gov": "v=DMARC1; p=reject; psd=y; rua=mailto:psd@registry.gov",
		}, "a.example.gov", "gov"},
		{"an invalid parent is skipped", map[string]string{
			"b.example.com": "v=DMARC1; p=bogus",
			"example.com":   "v=DMARC1; p=reject; rua=mailto:d@example.com",
		}, "a.b.example.com", "example.com"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := dnstest.Start(t)
			for d, txt := range tt.records {
				s.AddTXT("_dmarc."+d, txt)
			}
			res := mustCheck(t, checker(t, s), tt.domain)
			if res.InheritedFrom == nil || *res.InheritedFrom != tt.want || *res.Record != tt.records[tt.want] {
				t.Errorf("got inherited_from %v record %v, want %s", res.InheritedFrom, res.Record, tt.want)
			}
		})
	}
}

// TestCheckDMARCMultipleParent ensures a parent with several DMARC records is skipped by the walk, with a warning.
func TestCheckDMARCMultipleParent(t *testing.T) {
	s := dnstest.Start(t)
	s.AddTXT("_dmarc.b.example.com", "v=DMARC1; p=none; rua=mailto:d@example.com")
	s.AddTXT("_dmarc.b.example.com", "v=DMARC1; p=reject; rua=mailto:d@example.com")
	s.AddTXT("_dmarc.example.com", "v=DMARC1; p=quarantine; rua=mailto:d@example.com")
	res := mustCheck(t, checker(t, s), "a.b.example.com")
	if res.InheritedFrom == nil || *res.InheritedFrom != "example.com" || !hasText(res.Warnings, "_dmarc.b.example.com has 2 DMARC records") {
		t.Errorf("got %+v", res)
	}
}

// TestCheckDMARCTemporary ensures SERVFAIL or timeouts on lookups needed to find the record are errors wrapping ErrTemporary.
func TestCheckDMARCTemporary(t *testing.T) {
	s := dnstest.Start(t)
	s.SetRcode("_dmarc.fail.example", dns.RcodeServerFailure)
	s.SetDrop("_dmarc.slow.example", true)
	s.SetRcode("_dmarc.example", dns.RcodeServerFailure) // the walk's last step
	c := checker(t, s)
	for _, domain := range []string{"fail.example", "slow.example", "sub.fail.example"} {
		res, err := c.CheckDMARC(context.Background(), domain)
		if !errors.Is(err, ErrTemporary) || res != nil {
			t.Errorf("CheckDMARC(%s) = %+v, %v; want ErrTemporary", domain, res, err)
		}
	}
	// A record at the name itself needs no walk, so the broken parent does not matter.
	s.AddTXT("_dmarc.ok.example", "v=DMARC1; p=reject; rua=mailto:d@ok.example")
	if res := mustCheck(t, c, "ok.example"); !res.Valid {
		t.Errorf("ok.example: %+v", res)
	}
}

// TestCheckDMARCExternalAuthorization ensures outside reporting hosts are checked: authorized, not authorized, and unknown.
func TestCheckDMARCExternalAuthorization(t *testing.T) {
	s := dnstest.Start(t)
	s.AddTXT("_dmarc.example.com", "v=DMARC1; p=reject; "+
		"rua=mailto:own@example.com,mailto:a@sub.example.com,mailto:x@yes.example.net,mailto:y@no.example.org,mailto:z@flaky.example; "+
		"ruf=mailto:x@yes.example.net,mailto:f@Yes.Example.NET")
	s.AddTXT("example.com._report._dmarc.yes.example.net", "v=DMARC1")
	s.AddTXT("example.com._report._dmarc.no.example.org", "not dmarc")
	s.SetRcode("example.com._report._dmarc.flaky.example", dns.RcodeServerFailure)
	res := mustCheck(t, checker(t, s), "example.com")
	yes, no := true, false
	want := []ExternalAuthorization{
		{URI: "mailto:x@yes.example.net", Host: "yes.example.net", Authorized: &yes},
		{URI: "mailto:y@no.example.org", Host: "no.example.org", Authorized: &no},
		{URI: "mailto:z@flaky.example", Host: "flaky.example", Authorized: nil},
		{URI: "mailto:f@Yes.Example.NET", Host: "yes.example.net", Authorized: &yes},
	}
	if !reflect.DeepEqual(res.ExternalAuthorization, want) {
		b, _ := json.Marshal(res.ExternalAuthorization)
		t.Errorf("external_authorization = %s", b)
	}
	if !res.Valid || !hasText(res.Warnings, "mailto:y@no.example.org is outside example.com") || !hasText(res.Warnings, "could not check whether flaky.example") {
		t.Errorf("warnings %q", res.Warnings)
	}
	if n := s.Queries("example.com._report._dmarc.yes.example.net"); n != 1 {
		t.Errorf("authorization of one host looked up %d times, want 1", n)
	}
}

// TestCheckDMARCInheritedExternal ensures authorization is asked for the domain that published the record.
func TestCheckDMARCInheritedExternal(t *testing.T) {
	s := dnstest.Start(t)
	s.AddTXT("_dmarc.example.com", "v=DMARC1; p=reject; rua=mailto:r@reports.example.net")
	s.AddTXT("example.com._report._dmarc.reports.example.net", "v=DMARC1")
	res := mustCheck(t, checker(t, s), "shop.example.com")
	if len(res.ExternalAuthorization) != 1 || res.ExternalAuthorization[0].Authorized == nil || !*res.ExternalAuthorization[0].Authorized {
		t.Errorf("external_authorization = %+v", res.ExternalAuthorization)
	}
}

// TestWalkTargets ensures the parents queried follow RFC 9989 section 4.10, including its own example.
func TestWalkTargets(t *testing.T) {
	tests := []struct {
		domain string
		want   []string
	}{
		{"example.com", []string{"com"}},
		{"a.mail.example.com", []string{"mail.example.com", "example.com", "com"}},
		{"a.b.c.d.e.f.g.h", []string{"b.c.d.e.f.g.h", "c.d.e.f.g.h", "d.e.f.g.h", "e.f.g.h", "f.g.h", "g.h", "h"}},
		{"a.b.c.d.e.f.g.h.i.j.mail.example.com", []string{"g.h.i.j.mail.example.com", "h.i.j.mail.example.com",
			"i.j.mail.example.com", "j.mail.example.com", "mail.example.com", "example.com", "com"}},
	}
	for _, tt := range tests {
		if got := walkTargets(tt.domain); !slices.Equal(got, tt.want) {
			t.Errorf("walkTargets(%s) = %v, want %v", tt.domain, got, tt.want)
		}
	}
	if got := oneLabelBelow("a.b.example.gov", "gov"); got != "example.gov" {
		t.Errorf("oneLabelBelow = %s", got)
	}
}
