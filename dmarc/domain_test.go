package dmarc

import (
	"errors"
	"strings"
	"testing"
)

// TestNormalizeDomain ensures accepted names come out trimmed, lower-case, dot-less and in A-label form.
func TestNormalizeDomain(t *testing.T) {
	label63 := strings.Repeat("a", 63)
	max253 := strings.Repeat(strings.Repeat("a", 60)+".", 4) + "examp.com" // 244 + 9 octets
	tests := []struct{ in, want string }{
		{"example.com", "example.com"},
		{"  Example.COM.  ", "example.com"},
		{"mail.example.co.uk", "mail.example.co.uk"},
		{"bücher.example", "xn--bcher-kva.example"},
		{"BÜCHER.example", "xn--bcher-kva.example"},
		{"xn--bcher-kva.example", "xn--bcher-kva.example"},
		{"münchen.de", "xn--mnchen-3ya.de"},
		{"a-b.example", "a-b.example"},
		{"123.example", "123.example"},
		{label63 + ".example", label63 + ".example"},
		{"example.test", "example.test"},
		{max253, max253},
	}
	for _, tt := range tests {
		got, err := NormalizeDomain(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("NormalizeDomain(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// TestNormalizeDomainInvalid ensures bad names are refused with ErrInvalidDomain and a message naming the rule.
func TestNormalizeDomainInvalid(t *testing.T) {
	long := strings.Repeat(strings.Repeat("a", 60)+".", 4) + "example.com" // 244 + 11 octets
	tests := []struct{ in, msg string }{
		{"", "empty"},
		{"   ", "empty"},
		{".", "empty"},
		{"com", "at least two labels"},
		{"localhost", "at least two labels"},
		{"localhost.", "at least two labels"},
		{"foo.localhost", "localhost"},
		{"127.0.0.1", "IP address"},
		{"::1", "IP address"},
		{"[2001:db8::1]", "IP address"},
		{"1.2.3.300", "all digits"},
		{"*.example.com", "wildcard"},
		{"*", "wildcard"},
		{"_dmarc.example.com", "underscore"},
		{strings.Repeat("a", 64) + ".example", "longer than 63"},
		{long, "longer than 253"},
		{"exa mple.com", "not a valid hostname"},
		{"-example.com", "hyphen"},
		{"example-.com", "hyphen"},
		{"example..com", "empty label"},
		{"example.com..", "empty label"},
		{"http://example.com", "hostname"},
		{"example.com/path", "hostname"},
		{"user@example.com", "hostname"},
	}
	for _, tt := range tests {
		got, err := NormalizeDomain(tt.in)
		if err == nil {
			t.Errorf("NormalizeDomain(%q) = %q, want error", tt.in, got)
			continue
		}
		if !errors.Is(err, ErrInvalidDomain) {
			t.Errorf("NormalizeDomain(%q) error %v does not wrap ErrInvalidDomain", tt.in, err)
		}
		if !strings.HasPrefix(err.Error(), "dmarc: ") || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("NormalizeDomain(%q) error %q, want it to mention %q", tt.in, err, tt.msg)
		}
	}
}

// TestNormalizeDomainNamesTheLabel ensures a refusal names the domain and
// the label refused, and says why (issue 24 item 19), and that DomainError
// gives both apart for callers that phrase their own sentence.
func TestNormalizeDomainNamesTheLabel(t *testing.T) {
	for in, want := range map[string]string{
		"a-domain.localhost": "dmarc: a-domain.localhost: .localhost is reserved",
		"x.Y.LocalHost.":     "dmarc: x.y.localhost: .localhost is reserved",
		"_dmarc.example.com": `dmarc: _dmarc.example.com: the label "_dmarc" contains an underscore`,
		"*.example.com":      `dmarc: *.example.com: the label "*" is a wildcard`,
		"a.-b.example":       `dmarc: a.-b.example: the label "-b" starts or ends with a hyphen`,
		"a.b-.example":       `dmarc: a.b-.example: the label "b-" starts or ends with a hyphen`,
		"host.1.2.300":       `dmarc: host.1.2.300: the last label "300" is all digits`,
		"a.b!c.example":      `dmarc: a.b!c.example: the label "b!c" may contain only letters, digits and hyphens`,
		"localhost":          "dmarc: localhost: a domain name has at least two labels",
		"example..com":       "dmarc: example..com: it has an empty label",
		"192.0.2.1":          "dmarc: 192.0.2.1: an IP address, not a domain name",
	} {
		_, err := NormalizeDomain(in)
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("NormalizeDomain(%q) = %v, want %q...", in, err, want)
		}
	}
	_, err := NormalizeDomain("a-domain.localhost")
	var de *DomainError
	if !errors.As(err, &de) || de.Name != "a-domain.localhost" || !strings.HasPrefix(de.Reason, ".localhost is reserved") {
		t.Errorf("DomainError of a-domain.localhost: %+v", de)
	}
	long := strings.Repeat("a", 300) + ".example"
	if _, err := NormalizeDomain(long); err == nil || len(err.Error()) > 200 {
		t.Errorf("the error of a 308-octet name is not cut short: %v", err)
	}
}

// TestOrganizationalDomain ensures the Public Suffix List gives the RFC 7489 Organizational Domain.
func TestOrganizationalDomain(t *testing.T) {
	tests := []struct{ in, want string }{
		{"example.com", "example.com"},
		{"a.b.example.com", "example.com"},
		{"mail.example.co.uk", "example.co.uk"},
		{"reports.example.net.", "example.net"},
		{"co.uk", "co.uk"},
		{"com", "com"},
	}
	for _, tt := range tests {
		if got := OrganizationalDomain(tt.in); got != tt.want {
			t.Errorf("OrganizationalDomain(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
