package reports

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
	"time"
)

// TestFailureDayCodec ensures a roll-up reads back as written and that a
// truncated one is refused.
func TestFailureDayCodec(t *testing.T) {
	f := NewFailureDay()
	r := &FailureReport{SourceIP: new("192.0.2.1"), Geo: &Geo{CountryCode: new("GB"), CountryName: new("United Kingdom"), ASN: new(uint32(1)), ASOrg: new("x")}}
	f.Add(r, failDMARC|failDKIM, 1)
	f.Add(&FailureReport{}, failSPF, 1)
	raw := AppendFailureDay(nil, f)
	got, err := DecodeFailureDay(raw)
	if err != nil {
		t.Fatal(err)
	}
	if got.total != 2 || got.auth != [3]int64{1, 1, 1} || len(got.countries) != 2 || len(got.asns) != 2 || got.sources["192.0.2.1"].n != 1 {
		t.Errorf("decoded %+v", got)
	}
	for i := range raw {
		if _, err := DecodeFailureDay(raw[:i]); err == nil {
			t.Fatalf("a roll-up cut at %d bytes decodes", i)
		}
	}
}

// TestCutTo ensures text is cut at a character boundary, as close to the
// limit as that allows, and comes out valid UTF-8.
func TestCutTo(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"abc", 5, "abc"},
		{"abcdef", 3, "abc"},
		{"€€€", 7, "€€"},
		{"€€€", 6, "€€"},
		{"é€", 4, "é"},
		{"€", 2, ""},
		{"a\xffb", 5, "a\uFFFDb"},
	} {
		if got := cutTo(c.in, c.n); got != c.want {
			t.Errorf("cutTo(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

// TestTopFailSources ensures the selection of the busiest sources agrees
// with sorting them all: most reports first, ties by IP.
func TestTopFailSources(t *testing.T) {
	sources := map[string]*failSource{}
	for i := range 500 {
		sources[fmt.Sprintf("10.0.%d.%d", i/200, i%200)] = &failSource{n: int64(i*7919%13 + 1)}
	}
	f := &FailureDay{sources: sources}
	for _, n := range []int{1, 10, 499, 500, 600} {
		got, want := topFailSources(sources, n), f.topSources(n)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("top %d: %v\nwant %v", n, got[:min(len(got), 5)], want[:min(len(want), 5)])
		}
	}
	if got := topFailSources(nil, 10); len(got) != 0 {
		t.Errorf("no sources: %v", got)
	}
}

// failureSample is a failure report with every field set.
func failureSample() (*FailureReport, [2]*string, []FailureHeader) {
	s := func(v string) *string { return &v }
	r := &FailureReport{DomainID: "00000000-0000-7000-8000-000000000001", Domain: "example.com",
		OrgID: "00000000-0000-7000-8000-000000000002", ReceivedAt: time.Unix(1700000000, 0).UTC(),
		ArrivalDate: time.Unix(1699990000, 0).UTC(), Reporter: s("reporter.example"), SourceIP: s("192.0.2.1"),
		OriginalMailFrom: s("a@example.com"), OriginalRcptTo: s("b@example.net"), ReportedDomain: s("example.com"),
		Subject: s("Hello"), MessageID: s("<1@example.com>"), FeedbackType: "auth-failure", AuthFailure: []string{"dmarc", "dkim"}, AuthFailureReported: []string{"dmarc", "bodyhash"}, Identity: "date 1699990000",
		DeliveryResult: s("reject"), AuthenticationResults: FailureAuthResults{DMARC: s("fail"), SPF: s("pass")},
		Geo: &Geo{CountryCode: s("GB"), Latitude: new(51.5), ASN: new(uint32(20712))}}
	return r, [2]*string{s("example.com"), s("s1")}, []FailureHeader{{Name: "From", Value: "a@example.com"}, {Name: "Subject", Value: ""}}
}

// TestFailureCodec ensures a failure report and its headers read back as
// written, and that every truncation is refused.
func TestFailureCodec(t *testing.T) {
	r, dkim, hs := failureSample()
	raw := AppendFailure(nil, r, FailMask(r.AuthFailure), dkim)
	got, mask, err := DecodeFailure("id", raw)
	if err != nil {
		t.Fatal(err)
	}
	want := *r
	want.ID = "id"
	if !reflect.DeepEqual(got.FailureReport, &want) || mask != FailMask(r.AuthFailure) || *got.DKIMDomain != "example.com" || *got.DKIMSelector != "s1" {
		t.Errorf("decoded %+v (mask %b)\nwant %+v", got.FailureReport, mask, &want)
	}
	hraw := AppendFailureHeaders(nil, hs)
	if gotHs, err := DecodeFailureHeaders("id", hraw); err != nil || !reflect.DeepEqual(gotHs, hs) {
		t.Errorf("headers %+v, %v", gotHs, err)
	}
	for i := range raw {
		if _, _, err := DecodeFailure("id", raw[:i]); err == nil {
			t.Fatalf("a report cut at %d bytes decodes", i)
		}
	}
	for i := range hraw {
		if _, err := DecodeFailureHeaders("id", hraw[:i]); err == nil {
			t.Fatalf("headers cut at %d bytes decode", i)
		}
	}
}

// FuzzFailureCodec ensures the decoders of failure reports, their headers
// and their day roll-ups never panic on damaged bytes, and that what they
// accept encodes to bytes that decode to the same encoding again.
func FuzzFailureCodec(f *testing.F) {
	r, dkim, hs := failureSample()
	f.Add([]byte(AppendFailure(nil, r, FailMask(r.AuthFailure), dkim)))
	f.Add([]byte(AppendFailureHeaders(nil, hs)))
	day := NewFailureDay()
	day.Add(r, FailMask(r.AuthFailure), 1)
	f.Add([]byte(AppendFailureDay(nil, day)))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if det, mask, err := DecodeFailure("id", raw); err == nil {
			once := AppendFailure(nil, det.FailureReport, mask, [2]*string{det.DKIMDomain, det.DKIMSelector})
			again, mask2, err := DecodeFailure("id", once)
			if err != nil || !bytes.Equal(AppendFailure(nil, again.FailureReport, mask2, [2]*string{again.DKIMDomain, again.DKIMSelector}), once) {
				t.Fatalf("failure report %x does not round-trip: %v", raw, err)
			}
		}
		if hs, err := DecodeFailureHeaders("id", raw); err == nil {
			if again, err := DecodeFailureHeaders("id", AppendFailureHeaders(nil, hs)); err != nil || !reflect.DeepEqual(again, hs) {
				t.Fatalf("headers %x do not round-trip: %v", raw, err)
			}
		}
		if d, err := DecodeFailureDay(raw); err == nil {
			if again, err := DecodeFailureDay(AppendFailureDay(nil, d)); err != nil || again.Total() != d.Total() {
				t.Fatalf("failure day %x does not round-trip: %v", raw, err)
			}
		}
	})
}
