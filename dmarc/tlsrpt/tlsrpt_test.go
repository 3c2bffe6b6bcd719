package tlsrpt

import (
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/dmarc/container"
)

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// parseBytes reads one report from data as the intake does: plain JSON
// with Parse, gzip through package container's walk (which unpacks it
// under its own caps), then Parse.
func parseBytes(data []byte, lim Limits) (*Report, error) {
	if len(data) < 2 || data[0] != 0x1f || data[1] != 0x8b {
		return Parse(bytes.NewReader(data), lim)
	}
	var rep *Report
	n, err := container.Walk(bytes.NewReader(data), container.Limits{}, container.KindJSON,
		func([]byte) bool { return true }, func(p container.Payload) error {
			var err error
			rep, err = Parse(p.Body, lim)
			return err
		})
	if err == nil && n != 1 {
		err = errors.New("no JSON payload in the gzip data")
	}
	if err != nil {
		return nil, err
	}
	return rep, nil
}

// TestParseGoogle ensures a Google-style report (one line, sts policy
// without mx-host) is read field by field, plain and gzipped alike.
func TestParseGoogle(t *testing.T) {
	raw := readTestdata(t, "google.json")
	want := &Report{
		OrganizationName: "Google Inc.",
		ContactInfo:      "smtp-tls-reporting@google.com",
		ReportID:         "2026-11-20T00:00:00Z_example.com",
		DateBegin:        time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC),
		DateEnd:          time.Date(2026, 11, 20, 23, 59, 59, 0, time.UTC),
		Policies: []Policy{{
			Type:               PolicySTS,
			Domain:             "example.com",
			Strings:            []string{"version: STSv1", "mode: enforce", "mx: mx1.example.com", "mx: mx2.example.com", "max_age: 604800"},
			SuccessfulSessions: 1200, FailedSessions: 3,
			Failures: []FailureDetail{
				{ResultType: "certificate-expired", SendingMTAIP: "209.85.220.41", ReceivingMXHostname: "mx2.example.com", ReceivingIP: "192.0.2.25", FailedSessions: 2},
				{ResultType: "starttls-not-supported", SendingMTAIP: "2607:f8b0:4864:20::c2a", ReceivingMXHostname: "mx1.example.com", ReceivingIP: "2001:db8::25", FailedSessions: 1},
			},
		}},
	}
	for name, in := range map[string][]byte{"plain": raw, "gzip": gz(t, raw)} {
		t.Run(name, func(t *testing.T) {
			got, err := parseBytes(in, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}
	got, err := Parse(bytes.NewReader(raw), Limits{})
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Parse = %+v, %v", got, err)
	}
	if s, f := got.Sessions(); s != 1200 || f != 3 {
		t.Errorf("Sessions = %d, %d", s, f)
	}
}

// TestParseMicrosoft ensures a Microsoft-style report (pretty-printed,
// mx-host as an array, then as a bare string, every optional field of a
// failure detail, a tlsa policy without failure-details) is read fully.
func TestParseMicrosoft(t *testing.T) {
	got, err := parseBytes(readTestdata(t, "microsoft.json"), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Policies) != 2 {
		t.Fatalf("%d policies", len(got.Policies))
	}
	p := got.Policies[0]
	if !reflect.DeepEqual(p.MXHosts, []string{"*.example.com"}) || p.SuccessfulSessions != 845 || p.FailedSessions != 12 {
		t.Errorf("policy 0 = %+v", p)
	}
	wantF := FailureDetail{ResultType: "certificate-host-mismatch", SendingMTAIP: "2a01:111:f403:2412::700",
		ReceivingMXHostname: "mx1.example.com", ReceivingMXHelo: "mx1.example.com", ReceivingIP: "192.0.2.25",
		FailedSessions: 10, AdditionalInformation: "https://tlsrpt.example.com/details",
		FailureReasonCode: "X509_V_ERR_HOSTNAME_MISMATCH"}
	if !reflect.DeepEqual(p.Failures[0], wantF) {
		t.Errorf("failure 0 = %+v", p.Failures[0])
	}
	q := got.Policies[1]
	if q.Type != PolicyTLSA || !reflect.DeepEqual(q.MXHosts, []string{"mx3.example.com"}) || q.Failures != nil || q.Domain != "mx3.example.com" {
		t.Errorf("policy 1 = %+v", q)
	}
	if s, f := got.Sessions(); s != 885 || f != 12 {
		t.Errorf("Sessions = %d, %d", s, f)
	}
}

// TestParseNullsAndUnknown ensures nulls and absent optional fields are
// accepted as empty, unknown fields ignored, an unknown result type kept
// as sent, and date-times with offsets turned to UTC.
func TestParseNullsAndUnknown(t *testing.T) {
	got, err := parseBytes(readTestdata(t, "nopolicy_nulls.json"), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got.ContactInfo != "" || !got.DateBegin.Equal(time.Date(2026, 11, 18, 23, 0, 0, 0, time.UTC)) || got.DateBegin.Location() != time.UTC {
		t.Errorf("report = %+v", got)
	}
	p := got.Policies[0]
	if p.Type != PolicyNoPolicyFound || p.Strings != nil || p.MXHosts != nil || p.SuccessfulSessions != 7 || p.FailedSessions != 0 {
		t.Errorf("policy = %+v", p)
	}
	f := p.Failures[0]
	if f.ResultType != "quantum-handshake-refused" || KnownResultType(f.ResultType) || f.FailedSessions != 4 || f.SendingMTAIP != "" {
		t.Errorf("failure = %+v", f)
	}
	if !KnownResultType("sts-policy-fetch-error") {
		t.Error("sts-policy-fetch-error not known")
	}
}

const minimal = `{"organization-name":"o","date-range":{"start-datetime":"2026-01-01T00:00:00Z","end-datetime":"2026-01-02T00:00:00Z"},"report-id":"r","policies":[%s]}`

func withPolicy(p string) string { return strings.Replace(minimal, "%s", p, 1) }

const okPolicy = `{"policy":{"policy-type":"sts","policy-domain":"example.com"},"summary":{"total-successful-session-count":1,"total-failure-session-count":0}}`

// TestParseHostile ensures each kind of bad input is refused with
// ErrMalformed and a reason naming what is wrong, and size-related ones
// also with ErrTooLarge.
func TestParseHostile(t *testing.T) {
	deep := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	deepObj := `{"organization-name":` + strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10001)
	huge := withPolicy(strings.TrimSuffix(strings.Repeat(okPolicy+",", 10001), ","))
	hugeStrings := withPolicy(`{"policy":{"policy-type":"sts","policy-domain":"d","policy-string":[` + strings.TrimSuffix(strings.Repeat(`"x",`, 20000), ",") + `]},"summary":{}}`)
	cases := []struct {
		name, in, reason string
		tooLarge         bool
	}{
		{"empty", "", "unexpected end", false},
		{"invalid JSON", `{"organization-name": "x",`, "unexpected end", false},
		{"not an object", `[1,2]`, "report: a JSON array", false},
		{"trailing garbage", withPolicy(okPolicy) + "}", "invalid character", false},
		{"deep arrays", deep, "nesting deeper than 16", true},
		{"deep objects", deepObj, "nesting deeper than 16", true},
		{"huge policies", huge, "more than 10000 elements", true},
		{"huge policy-string", hugeStrings, "more than 10000 elements", true},
		{"no org", `{"report-id":"r"}`, "organization-name is missing", false},
		{"empty report-id", `{"organization-name":"o","report-id":""}`, "report-id is empty", false},
		{"no date-range", `{"organization-name":"o","report-id":"r"}`, "date-range is missing", false},
		{"bad date", strings.Replace(withPolicy(okPolicy), "2026-01-01T00:00:00Z", "yesterday", 1), "start-datetime \"yesterday\" is not an RFC 3339", false},
		{"reversed dates", strings.Replace(withPolicy(okPolicy), "2026-01-01", "2027-01-01", 1), "ends", false},
		{"no policies", strings.Replace(minimal, `,"policies":[%s]`, "", 1), "policies is missing", false},
		{"null policies", strings.Replace(minimal, `[%s]`, "null", 1), "policies is missing", false},
		{"policies object", strings.Replace(minimal, `[%s]`, "{}", 1), "policies", false},
		{"null policy", withPolicy("null"), "policies[0] is null", false},
		{"no policy-type", withPolicy(`{"policy":{"policy-domain":"d"},"summary":{}}`), "policies[0].policy.policy-type is missing", false},
		{"bad policy-type", withPolicy(`{"policy":{"policy-type":"dane","policy-domain":"d"},"summary":{}}`), `policy-type "dane" is not`, false},
		{"no policy-domain", withPolicy(`{"policy":{"policy-type":"sts"},"summary":{}}`), "policy-domain is missing", false},
		{"no summary", withPolicy(`{"policy":{"policy-type":"sts","policy-domain":"d"}}`), "summary is missing", false},
		{"negative count", withPolicy(`{"policy":{"policy-type":"sts","policy-domain":"d"},"summary":{"total-successful-session-count":-5}}`), "total-successful-session-count -5 is negative", false},
		{"overflowing count", withPolicy(`{"policy":{"policy-type":"sts","policy-domain":"d"},"summary":{"total-failure-session-count":99999999999999999999999}}`), "is not a whole number", false},
		{"over 2^53", withPolicy(`{"policy":{"policy-type":"sts","policy-domain":"d"},"summary":{"total-failure-session-count":9007199254740992}}`), "is over 9007199254740991", false},
		{"fractional count", withPolicy(`{"policy":{"policy-type":"sts","policy-domain":"d"},"summary":{"total-failure-session-count":1.5}}`), "not a whole number", false},
		{"count as text", withPolicy(`{"policy":{"policy-type":"sts","policy-domain":"d"},"summary":{"total-failure-session-count":"lots"}}`), "", false},
		{"negative failed-session-count", withPolicy(`{"policy":{"policy-type":"sts","policy-domain":"d"},"summary":{},"failure-details":[{"result-type":"x","failed-session-count":-1}]}`), "failure-details[0].failed-session-count -1 is negative", false},
		{"no result-type", withPolicy(`{"policy":{"policy-type":"sts","policy-domain":"d"},"summary":{},"failure-details":[{}]}`), "failure-details[0].result-type is missing", false},
		{"null failure", withPolicy(`{"policy":{"policy-type":"sts","policy-domain":"d"},"summary":{},"failure-details":[null]}`), "failure-details[0] is null", false},
		{"mx-host number", withPolicy(`{"policy":{"policy-type":"sts","policy-domain":"d","mx-host":5},"summary":{}}`), "string or an array of strings", false},
		{"org number", `{"organization-name":5}`, "organization-name: a JSON number", false},
		{"not gzip after magic", "\x1f\x8bnot really", "gzip", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := parseBytes([]byte(c.in), Limits{})
			if err == nil {
				t.Fatalf("accepted: %+v", r)
			}
			if r != nil {
				t.Errorf("report %+v with error", r)
			}
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("error %v does not wrap ErrMalformed", err)
			}
			if errors.Is(err, ErrTooLarge) != c.tooLarge {
				t.Errorf("error %v: ErrTooLarge %v, want %v", err, !c.tooLarge, c.tooLarge)
			}
			if !strings.Contains(err.Error(), c.reason) {
				t.Errorf("error %q does not say %q", err, c.reason)
			}
		})
	}
}

// TestParseGzipOverMaxBytes ensures a large but honest gzipped report is
// read up to MaxBytes, not past it, once package container has unpacked
// it (gzip bombs are refused by the container's ratio cap:
// dmarc/container's TestRatioReader).
func TestParseGzipOverMaxBytes(t *testing.T) {
	big := []byte(withPolicy(okPolicy) + strings.Repeat(" ", 2<<20))
	if _, err := parseBytes(gz(t, big), Limits{MaxBytes: 1 << 20}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over MaxBytes: err = %v", err)
	}
	if _, err := parseBytes(gz(t, big), Limits{MaxBytes: 3 << 20}); err != nil {
		t.Fatalf("2 MiB of spaces under MaxBytes: %v", err)
	}
}

// TestParseSizeCap ensures Parse stops reading at MaxBytes.
func TestParseSizeCap(t *testing.T) {
	in := withPolicy(okPolicy) + strings.Repeat(" ", 100)
	if _, err := Parse(strings.NewReader(in), Limits{MaxBytes: int64(len(in))}); err != nil {
		t.Fatalf("at the cap: %v", err)
	}
	_, err := Parse(strings.NewReader(in+" "), Limits{MaxBytes: int64(len(in))})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over the cap: %v", err)
	}
}

// TestParseMaxFailures ensures the report-wide cap on failure details
// holds across policies, each within the array cap.
func TestParseMaxFailures(t *testing.T) {
	pol := `{"policy":{"policy-type":"sts","policy-domain":"d"},"summary":{},"failure-details":[` +
		strings.TrimSuffix(strings.Repeat(`{"result-type":"x"},`, 6), ",") + `]}`
	in := withPolicy(pol + "," + pol)
	if _, err := parseBytes([]byte(in), Limits{MaxFailures: 12}); err != nil {
		t.Fatalf("12 of 12: %v", err)
	}
	if _, err := parseBytes([]byte(in), Limits{MaxFailures: 11}); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "more than 11 failure-details") {
		t.Fatalf("12 of 11: %v", err)
	}
}

// TestScanStrings ensures brackets and commas inside strings (escaped
// quotes included) count for nothing.
func TestScanStrings(t *testing.T) {
	in := withPolicy(`{"policy":{"policy-type":"sts","policy-domain":"d","policy-string":["[[[[[[[[[[[[[[[[[[[[ \" ,,,,, {{{{{{{{{{{{{{{{{{{{{"]},"summary":{}}`)
	if _, err := parseBytes([]byte(in), Limits{MaxDepth: 6, MaxArray: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := parseBytes([]byte(in), Limits{MaxDepth: 4}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("depth 5 under MaxDepth 4: %v", err)
	}
}

// TestLooksLikeTLSReport ensures TLS reports are told from DMARC reports
// and other JSON by content.
func TestLooksLikeTLSReport(t *testing.T) {
	g := readTestdata(t, "google.json")
	yes := map[string][]byte{
		"google": g, "microsoft": readTestdata(t, "microsoft.json"),
		"bom": append([]byte("\xef\xbb\xbf\n "), g...),
	}
	no := map[string][]byte{
		"dmarc xml":   []byte(`<?xml version="1.0"?><feedback><report_metadata><report_id>1</report_id></report_metadata></feedback>`),
		"gzip json":   gz(t, g), // the container's walk unpacks first
		"json array":  []byte(`[{"policies":1,"report-id":2}]`),
		"other json":  []byte(`{"policies":[]}`),
		"empty":       nil,
		"broken gzip": {0x1f, 0x8b, 0},
	}
	for name, b := range yes {
		if !LooksLikeTLSReport(b) {
			t.Errorf("%s: not recognized", name)
		}
	}
	for name, b := range no {
		if LooksLikeTLSReport(b) {
			t.Errorf("%s: recognized", name)
		}
	}
}
