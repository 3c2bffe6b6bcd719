package reports

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"
)

func tlsCodecSample() *TLSReportDetail {
	s := func(v string) *string { return &v }
	t0 := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	return &TLSReportDetail{
		TLSReport: &TLSReport{ID: "00000000-0000-7000-8000-000000000001", DomainID: "00000000-0000-7000-8000-000000000001", OrgID: "00000000-0000-7000-8000-000000000001", OrganizationName: "Google Inc.",
			ReportID: "2026-11-20T00:00:00Z_example.com", ContactInfo: s("smtp-tls-reporting@google.com"),
			DateBegin: t0, DateEnd: t0.Add(24*time.Hour - time.Second), ReceivedAt: t0.Add(30 * time.Hour),
			SuccessfulSessions: 1<<53 - 1, FailedSessions: 3},
		Policies: []TLSPolicy{
			{PolicyType: "sts", PolicyDomain: "example.com", PolicyString: []string{"version: STSv1", "mode: enforce"},
				MXHost: []string{"*.mail.example.com"}, SuccessfulSessions: 1<<53 - 1, FailedSessions: 3,
				FailureDetails: []TLSFailureDetail{
					{ResultType: "certificate-expired", SendingMTAIP: s("2001:db8::1"), ReceivingMXHostname: s("mx1.example.com"),
						ReceivingIP: s("192.0.2.1"), FailedSessions: 2, AdditionalInformation: s("https://x.example/why")},
					{ResultType: "made-up", FailedSessions: 1, FailureReasonCode: s("X509_V_ERR")},
				}},
			{PolicyType: "no-policy-found", PolicyDomain: "example.com", PolicyString: []string{}, MXHost: []string{},
				FailureDetails: []TLSFailureDetail{}},
		},
	}
}

// TestTLSCodecRoundTrip ensures a report reads back exactly as encoded,
// nil and empty text told apart.
func TestTLSCodecRoundTrip(t *testing.T) {
	want := tlsCodecSample()
	raw := AppendTLS(nil, want.OrgID, want)
	got, err := DecodeTLS(want.ID, raw)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(want)
		t.Fatalf("got  %s\nwant %s", a, b)
	}
}

// TestTLSCodecLegacyJSON ensures reports stored as JSON by the first
// release still read.
func TestTLSCodecLegacyJSON(t *testing.T) {
	want := tlsCodecSample()
	raw, err := json.Marshal(tlsStoredValue{OrgID: want.OrgID, TLSReportDetail: want})
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeTLS(want.ID, raw)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got.TLSReport, want.TLSReport)
	}
	if _, err := DecodeTLS(want.ID, []byte(`{"org_id":`)); err == nil {
		t.Fatal("broken JSON decoded")
	}
}

// TestTLSCodecCorrupt ensures every truncation of a value and trailing
// bytes are refused as corrupt, never a panic or a short report.
func TestTLSCodecCorrupt(t *testing.T) {
	d := tlsCodecSample()
	raw := AppendTLS(nil, d.OrgID, d)
	for n := 0; n < len(raw); n++ {
		if _, err := DecodeTLS(d.ID, raw[:n]); !errors.Is(err, errCorrupt) {
			t.Fatalf("%d of %d bytes: err = %v", n, len(raw), err)
		}
	}
	if _, err := DecodeTLS(d.ID, append(raw, 0)); !errors.Is(err, errCorrupt) {
		t.Fatalf("trailing byte: err = %v", err)
	}
}

// FuzzTLSCodec ensures the decoder of stored TLS reports (binary, or the
// JSON of the first release) never panics on damaged bytes, and that what
// it accepts encodes to bytes that decode to the same encoding again.
func FuzzTLSCodec(f *testing.F) {
	d := tlsCodecSample()
	f.Add([]byte(AppendTLS(nil, d.OrgID, d)))
	f.Add([]byte(`{"org_id":"o","id":"x","policies":[]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := DecodeTLS("id", raw)
		if err != nil {
			return
		}
		once := AppendTLS(nil, got.OrgID, got)
		again, err := DecodeTLS("id", once)
		if err != nil || !bytes.Equal(AppendTLS(nil, again.OrgID, again), once) {
			t.Fatalf("TLS report %x does not round-trip: %v", raw, err)
		}
	})
}
