package dnscheck

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dmarcd/dmarcd/dmarc"
	"github.com/dmarcd/dmarcd/internal/dnstest"
)

const reportAddr = "d7k2m9xq4p@reports.example.net"

// TestVerify ensures verification succeeds only for one valid record listing the address in rua, and names the reason otherwise.
func TestVerify(t *testing.T) {
	s := dnstest.Start(t)
	s.AddTXT("_dmarc.ok.example", "v=DMARC1; p=none; rua=mailto:own@ok.example,mailto:D7K2M9XQ4P@reports.example.net!10m")
	s.AddTXT("_dmarc.two.example", "v=DMARC1; p=none; rua=mailto:"+reportAddr)
	s.AddTXT("_dmarc.two.example", "v=DMARC1; p=reject; rua=mailto:"+reportAddr)
	s.AddTXT("_dmarc.bad.example", "v=DMARC1; p=maybe; rua=mailto:"+reportAddr)
	s.AddTXT("_dmarc.ruf.example", "v=DMARC1; p=none; rua=mailto:own@ruf.example; ruf=mailto:"+reportAddr)
	s.AddTXT("_dmarc.spf.example", "v=spf1 -all")
	s.AddTXT("_dmarc.parent.example", "v=DMARC1; p=none; rua=mailto:"+reportAddr)
	c := checker(t, s)
	tests := []struct{ domain, reason string }{
		{"ok.example", ""},
		{"missing.example", "no DMARC record found at _dmarc.missing.example"},
		{"spf.example", `the TXT record "v=spf1 -all" at _dmarc.spf.example is not a DMARC record: a DMARC record starts with v=DMARC1`},
		{"sub.parent.example", "no DMARC record found at _dmarc.sub.parent.example"}, // no tree walk
		{"two.example", "more than one DMARC record at _dmarc.two.example"},
		{"bad.example", "the TXT record at _dmarc.bad.example is not a valid DMARC record: p must be one of"},
		{"ruf.example", "the reporting address " + reportAddr + " is not in the rua tag of _dmarc.ruf.example"},
	}
	for _, tt := range tests {
		err := c.Verify(context.Background(), tt.domain, reportAddr)
		if tt.reason == "" {
			if err != nil {
				t.Errorf("Verify(%s) = %v, want nil", tt.domain, err)
			}
			continue
		}
		var ve *VerifyError
		if !errors.As(err, &ve) || !strings.HasPrefix(ve.Reason, tt.reason) || err.Error() != ve.Reason {
			t.Errorf("Verify(%s) = %v, want a VerifyError starting %q", tt.domain, err, tt.reason)
		}
	}
}

// TestVerifyTemporary ensures DNS trouble is ErrTemporary, not a verification failure.
func TestVerifyTemporary(t *testing.T) {
	s := dnstest.Start(t)
	s.SetRcode("_dmarc.fail.example", dns.RcodeServerFailure)
	s.SetDrop("_dmarc.slow.example", true)
	c := checker(t, s)
	for _, domain := range []string{"fail.example", "slow.example"} {
		err := c.Verify(context.Background(), domain, reportAddr)
		var ve *VerifyError
		if !errors.Is(err, ErrTemporary) || errors.As(err, &ve) {
			t.Errorf("Verify(%s) = %v, want ErrTemporary", domain, err)
		}
	}
}

// TestSuggestRecord ensures the suggestion keeps an existing valid policy and falls back to the default otherwise.
func TestSuggestRecord(t *testing.T) {
	s := dnstest.Start(t)
	s.AddTXT("_dmarc.strict.example", "v=DMARC1; p=reject; sp=reject; adkim=s; rua=mailto:own@strict.example")
	s.AddTXT("_dmarc.two.example", "v=DMARC1; p=reject")
	s.AddTXT("_dmarc.two.example", "v=DMARC1; p=quarantine")
	s.AddTXT("_dmarc.bad.example", "v=DMARC1; p=reject; pct=200")
	s.SetRcode("_dmarc.fail.example", dns.RcodeServerFailure)
	s.SetDrop("_dmarc.slow.example", true)
	c := &Checker{
		Resolver:       mustResolver(t, Config{Servers: []string{s.Addr}, Timeout: time.Second, Attempts: 3}),
		SuggestTimeout: 100 * time.Millisecond,
	}
	def := dmarc.DefaultRecord(reportAddr)
	tests := []struct{ domain, want string }{
		{"strict.example", "v=DMARC1; p=reject; sp=reject; adkim=s; rua=mailto:own@strict.example,mailto:" + reportAddr + "; ruf=mailto:" + reportAddr},
		{"none.example", def},
		{"two.example", def},
		{"bad.example", def},
	}
	for _, tt := range tests {
		got, err := c.SuggestRecord(context.Background(), tt.domain, reportAddr)
		if err != nil || got.Record != tt.want {
			t.Errorf("SuggestRecord(%s) = %q, %v, want %q", tt.domain, got.Record, err, tt.want)
		}
	}
	// A blind suggestion could weaken p=reject: a DNS that cannot answer
	// (SERVFAIL; no answer, SuggestTimeout cutting the 3 one-second
	// attempts short) is an error, never the default record.
	for _, domain := range []string{"fail.example", "slow.example"} {
		got, err := c.SuggestRecord(context.Background(), domain, reportAddr)
		if !errors.Is(err, ErrTemporary) {
			t.Errorf("SuggestRecord(%s) = %q, %v, want ErrTemporary", domain, got.Record, err)
		}
	}
	got, err := c.SuggestRecord(context.Background(), "strict.example", reportAddr)
	if err != nil || got.Published != "v=DMARC1; p=reject; sp=reject; adkim=s; rua=mailto:own@strict.example" {
		t.Errorf("SuggestRecord(strict.example).Published = %q, %v", got.Published, err)
	}
	if n := s.Queries("_dmarc.slow.example"); n > 1 {
		t.Errorf("slow domain queried %d times, want at most 1 within the budget", n)
	}
}

// TestPublishRecords ensures the records to publish are the DMARC record and the external reporting authorization.
func TestPublishRecords(t *testing.T) {
	got := PublishRecords("example.com", "v=DMARC1; p=none", "reports.example.net")
	want := []DNSRecord{
		{Type: "TXT", Name: "_dmarc.example.com", Value: "v=DMARC1; p=none"},
		{Type: "TXT", Name: "example.com._report._dmarc.reports.example.net", Value: "v=DMARC1"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("PublishRecords = %+v, want %+v", got, want)
	}
}
