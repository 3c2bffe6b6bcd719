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
		{"1.2.3.300", "numeric label"},
		{"*.example.com", "wildcard"},
		{"*", "wildcard"},
		{"_dmarc.example.com", "underscore"},
		{strings.Repeat("a", 64) + ".example", "longer than 63"},
		{long, "longer than 253"},
		{"exa mple.com", "not a valid hostname"},
		{"-example.com", "hostname"},
		{"example-.com", "hostname"},
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
