package arf

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/dmarc/container"
	"github.com/dmarcd/dmarcd/internal/mailtest"
)

// failHead is the header of a report mail; the Content-Type follows.
const failHead = "From: DMARC Reports <dmarc@reporter.example.org>\r\nTo: ruf@reports.example.net\r\n" +
	"Subject: DMARC failure report\r\nMIME-Version: 1.0\r\n"

// failARF is a complete RFC 6591 feedback part body.
const failARF = "Feedback-Type: auth-failure\r\nUser-Agent: Test/1.0\r\nVersion: 1\r\n" +
	"Original-Mail-From: <bounce@evil.test>\r\nOriginal-Rcpt-To: <user@example.com>\r\n" +
	"Arrival-Date: Thu, 8 Mar 2005 14:00:00 EDT\r\nReporting-MTA: dns; mail.reporter.example.org\r\n" +
	"Source-IP: 198.51.100.9\r\nReported-Domain: example.com\r\nAuth-Failure: dmarc\r\n" +
	"Delivery-Result: reject\r\nIdentity-Alignment: none\r\n"

// failOrig is the header and body of an original message.
const failOrig = "Authentication-Results: mx.reporter.example.org; dkim=fail header.d=example.com; spf=fail smtp.mailfrom=evil.test; dmarc=fail header.from=example.com\r\n" +
	"From: \"Example\" <ceo@example.com>\r\nTo: user@example.com\r\nSubject: =?UTF-8?Q?Invoice_=E2=82=AC?=\r\n" +
	"Message-ID: <abc@evil.test>\r\nDate: Thu, 8 Mar 2005 13:59:00 -0500\r\n\r\n" +
	"SECRET BODY TEXT that must never be kept\r\n"

// failReportMail is a report mail of the given parts under
// multipart/report.
func failReportMail(parts ...string) string {
	return failHead + "Content-Type: multipart/report; report-type=feedback-report; boundary=\"rr\"\r\n\r\n" +
		mailtest.Multipart("rr", parts...)
}

const (
	failPlainPart = "Content-Type: text/plain\r\n\r\nThis is an authentication failure report.\r\n"
	failFBPart    = "Content-Type: message/feedback-report\r\n\r\n" + failARF
	failOrigPart  = "Content-Type: message/rfc822\r\n\r\n" + failOrig
)

// failB64 is s in base64, without a line end after the last line.
func failB64(s string) string { return strings.TrimSuffix(mailtest.Base64([]byte(s)), "\r\n") }

// TestExtractFailureFull ensures every field of a complete RFC 6591
// report is read, from the feedback part and the original's header.
func TestExtractFailureFull(t *testing.T) {
	reps, err := Extract(strings.NewReader(failReportMail(failPlainPart, failFBPart, failOrigPart)), container.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 1 {
		t.Fatalf("%d reports", len(reps))
	}
	r := reps[0]
	want := &Report{
		FeedbackType: "auth-failure", Version: "1", UserAgent: "Test/1.0",
		SourceIP: netip.MustParseAddr("198.51.100.9"), OriginalMailFrom: "bounce@evil.test",
		OriginalRcptTo: []string{"user@example.com"},
		ArrivalDate:    time.Date(2005, 3, 8, 18, 0, 0, 0, time.UTC),
		ReportingMTA:   "mail.reporter.example.org", Reporter: "mail.reporter.example.org",
		ReportedDomain: "example.com", AuthFailure: []string{"dmarc"}, DeliveryResult: "reject",
		AuthResults:       map[string]string{"dmarc": "fail", "spf": "fail", "dkim": "fail"},
		IdentityAlignment: "none", Subject: "Invoice €", MessageID: "abc@evil.test",
	}
	got := *r
	got.Headers = nil
	if !reflect.DeepEqual(&got, want) {
		a, _ := json.Marshal(&got)
		b, _ := json.Marshal(want)
		t.Errorf("report\n%s\nwant\n%s", a, b)
	}
	var names []string
	for _, h := range r.Headers {
		names = append(names, h.Name)
	}
	if want := []string{"Authentication-Results", "From", "To", "Subject", "Message-ID", "Date"}; !slices.Equal(names, want) {
		t.Errorf("headers %q, want %q", names, want)
	}
	if r.Headers[3].Value != "Invoice €" {
		t.Errorf("Subject header %q not decoded", r.Headers[3].Value)
	}
	js, _ := json.Marshal(r)
	if strings.Contains(string(js), "SECRET") {
		t.Error("the original's body is in the report")
	}
}

// TestExtractFailureShapes ensures the MIME shapes and field quirks
// reporters produce are read, one property per case.
func TestExtractFailureShapes(t *testing.T) {
	arf := func(replace ...string) string { return strings.NewReplacer(replace...).Replace(failARF) }
	fb := func(body string) string { return "Content-Type: message/feedback-report\r\n\r\n" + body }
	tests := []struct {
		name  string
		in    string
		n     int // reports
		check func(t *testing.T, r []*Report)
	}{
		{name: "base64 feedback part without final line break, under multipart/mixed",
			in: failHead + "Content-Type: multipart/mixed; boundary=\"mm\"\r\n\r\n" + mailtest.Multipart("mm", failPlainPart,
				"Content-Type: message/feedback-report; name=\"ATT00001\"\r\nContent-Transfer-Encoding: base64\r\n\r\n\r\n"+failB64(strings.TrimSuffix(failARF, "\r\n")), failOrigPart),
			n: 1, check: func(t *testing.T, r []*Report) {
				if r[0].IdentityAlignment != "none" || r[0].SourceIP.String() != "198.51.100.9" {
					t.Errorf("fields lost: %+v", r[0])
				}
			}},
		{name: "Version 1.0 and a Delivery-Result outside RFC 6591",
			in: failReportMail(fb(arf("Version: 1\r\n", "Version: 1.0\r\n", "Delivery-Result: reject", "Delivery-Result: SMG-Policy-Action")), failOrigPart),
			n:  1, check: func(t *testing.T, r []*Report) {
				if r[0].Version != "1.0" || r[0].DeliveryResult != "smg-policy-action" {
					t.Errorf("Version %q, DeliveryResult %q", r[0].Version, r[0].DeliveryResult)
				}
			}},
		{name: "no Source-IP",
			in: failReportMail(fb(arf("Source-IP: 198.51.100.9\r\n", "")), failOrigPart),
			n:  1, check: func(t *testing.T, r []*Report) {
				if r[0].SourceIP.IsValid() {
					t.Errorf("SourceIP %v, want the zero Addr", r[0].SourceIP)
				}
			}},
		{name: "unparseable Source-IP and Arrival-Date, bracketed IPv4-mapped IPv6",
			in: failReportMail(fb(arf("Source-IP: 198.51.100.9", "Source-IP: [IPv6:::ffff:192.0.2.1]", "Arrival-Date: Thu, 8 Mar 2005 14:00:00 EDT", "Arrival-Date: yesterday")), failOrigPart),
			n:  1, check: func(t *testing.T, r []*Report) {
				if r[0].SourceIP != netip.MustParseAddr("192.0.2.1") || !r[0].ArrivalDate.IsZero() {
					t.Errorf("SourceIP %v, ArrivalDate %v", r[0].SourceIP, r[0].ArrivalDate)
				}
			}},
		{name: "only a feedback part with Feedback-Type and nothing else",
			in: failReportMail(fb("Feedback-Type: auth-failure\r\n")),
			n:  1, check: func(t *testing.T, r []*Report) {
				if r[0].Headers != nil || r[0].SourceIP.IsValid() || r[0].Reporter != "reporter.example.org" ||
					!slices.Equal(r[0].AuthFailure, []string{"dmarc"}) {
					t.Errorf("report %+v", r[0])
				}
			}},
		{name: "text/rfc822-headers instead of message/rfc822",
			in: failReportMail(failFBPart, "Content-Type: text/rfc822-headers\r\n\r\n"+strings.Split(failOrig, "\r\n\r\n")[0]+"\r\n"),
			n:  1, check: func(t *testing.T, r []*Report) {
				if r[0].MessageID != "abc@evil.test" || len(r[0].Headers) != 6 {
					t.Errorf("MessageID %q, %d headers", r[0].MessageID, len(r[0].Headers))
				}
			}},
		{name: "two reports in one mail, paired in order",
			in: failReportMail(fb(failARF), fb(arf("198.51.100.9", "203.0.113.7")), failOrigPart,
				"Content-Type: message/rfc822\r\n\r\nFrom: other@example.net\r\nMessage-ID: <second@x>\r\n\r\nbody\r\n"),
			n: 2, check: func(t *testing.T, r []*Report) {
				if r[0].MessageID != "abc@evil.test" || r[1].MessageID != "second@x" || r[1].SourceIP.String() != "203.0.113.7" {
					t.Errorf("pairs (%s, %s), (%s, %s)", r[0].SourceIP, r[0].MessageID, r[1].SourceIP, r[1].MessageID)
				}
			}},
		{name: "feedback part with no original pairs with none",
			in: failReportMail(fb(failARF), failOrigPart, fb(arf("198.51.100.9", "203.0.113.7"))),
			n:  2, check: func(t *testing.T, r []*Report) {
				if r[0].MessageID != "abc@evil.test" || r[1].Headers != nil {
					t.Errorf("second report has %d headers", len(r[1].Headers))
				}
			}},
		{name: "abuse and auth-failure parts: only the auth-failure one",
			in: failReportMail(fb(arf("auth-failure", "abuse")), fb(failARF), failOrigPart),
			n:  1, check: func(t *testing.T, r []*Report) {
				if r[0].FeedbackType != "auth-failure" {
					t.Errorf("FeedbackType %q", r[0].FeedbackType)
				}
			}},
		{name: "report mail forwarded as message/rfc822",
			in: "From: admin@example.com\r\nSubject: Fwd: report\r\nContent-Type: multipart/mixed; boundary=\"fw\"\r\n\r\n" +
				mailtest.Multipart("fw", "Content-Type: text/plain\r\n\r\nsee attached", "Content-Type: message/rfc822\r\n\r\n"+failReportMail(failFBPart, failOrigPart)),
			n: 1, check: func(t *testing.T, r []*Report) {
				if r[0].MessageID != "abc@evil.test" || r[0].SourceIP.String() != "198.51.100.9" {
					t.Errorf("forwarded report %+v", r[0])
				}
			}},
		{name: "mbox From line, LF line endings, folded fields",
			in: "From dmarc@reporter.example.org Mon Jan  1 00:00:00 2024\n" + strings.ReplaceAll(failReportMail(
				fb(arf("Auth-Failure: dmarc\r\n", "Auth-Failure: DKIM,\r\n  dmarc\r\nAuth-Failure: spf\r\nAuth-Failure: dkim\r\n")), failOrigPart), "\r\n", "\n"),
			n: 1, check: func(t *testing.T, r []*Report) {
				if !slices.Equal(r[0].AuthFailure, []string{"dkim", "dmarc", "spf"}) {
					t.Errorf("AuthFailure %q", r[0].AuthFailure)
				}
			}},
		{name: "no Auth-Failure: derived from Authentication-Results and Identity-Alignment",
			in: failReportMail(fb(arf("Auth-Failure: dmarc\r\n", "", "Identity-Alignment: none", "Identity-Alignment: dkim",
				"Reported-Domain: example.com\r\n", "Authentication-Results: x.example; dkim=pass header.d=example.com; spf=softfail\r\n")), failOrigPart),
			n: 1, check: func(t *testing.T, r []*Report) {
				if !slices.Equal(r[0].AuthFailure, []string{"dmarc", "spf"}) || r[0].AuthResults["dkim"] != "pass" || r[0].AuthResults["dmarc"] != "fail" {
					t.Errorf("AuthFailure %q, AuthResults %v", r[0].AuthFailure, r[0].AuthResults)
				}
				if r[0].ReportedDomain != "example.com" { // from the original's From
					t.Errorf("ReportedDomain %q", r[0].ReportedDomain)
				}
			}},
		{name: "DKIM fields, and a DKIM-Signature when they are absent",
			in: failReportMail(fb(failARF+"DKIM-Domain: Example.COM\r\nDKIM-Selector: s1\r\n"), failOrigPart,
				fb(failARF), "Content-Type: message/rfc822\r\n\r\nDKIM-Signature: v=1; a=rsa-sha256; d=mail.example.com;\r\n s=sel2; h=from; b=abc\r\n\r\n"),
			n: 2, check: func(t *testing.T, r []*Report) {
				if r[0].DKIMDomain != "example.com" || r[0].DKIMSelector != "s1" || r[1].DKIMDomain != "mail.example.com" || r[1].DKIMSelector != "sel2" {
					t.Errorf("DKIM (%q, %q), (%q, %q)", r[0].DKIMDomain, r[0].DKIMSelector, r[1].DKIMDomain, r[1].DKIMSelector)
				}
			}},
		{name: "several Original-Rcpt-To, a null Original-Mail-From",
			in: failReportMail(fb(arf("Original-Mail-From: <bounce@evil.test>", "Original-Mail-From: <>",
				"Original-Rcpt-To: <user@example.com>", "Original-Rcpt-To: <a@example.com>\r\nOriginal-Rcpt-To: b@example.com, <c@example.com>")), failOrigPart),
			n: 1, check: func(t *testing.T, r []*Report) {
				if r[0].OriginalMailFrom != "" || !slices.Equal(r[0].OriginalRcptTo, []string{"a@example.com", "b@example.com", "c@example.com"}) {
					t.Errorf("OriginalMailFrom %q, OriginalRcptTo %q", r[0].OriginalMailFrom, r[0].OriginalRcptTo)
				}
			}},
		{name: "quoted-printable original header, junk lines in the feedback part",
			in: failReportMail(fb("garbage line\r\n"+failARF+"\r\nmore: \r\n"),
				"Content-Type: message/rfc822\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nSubject: caf=C3=A9\r\nMessage-ID: <q@p>\r\n\r\nbody=\r\n"),
			n: 1, check: func(t *testing.T, r []*Report) {
				if r[0].Subject != "café" || r[0].MessageID != "q@p" || r[0].SourceIP.String() != "198.51.100.9" {
					t.Errorf("Subject %q, MessageID %q", r[0].Subject, r[0].MessageID)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reps, err := Extract(strings.NewReader(tt.in), container.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if len(reps) != tt.n {
				t.Fatalf("%d reports, want %d", len(reps), tt.n)
			}
			tt.check(t, reps)
		})
	}
}

// TestExtractFailureErrors ensures inputs that hold no failure report get
// the error that says why, with the feedback type named.
func TestExtractFailureErrors(t *testing.T) {
	abuse := strings.Replace(failARF, "auth-failure", "abuse", 1)
	deep := failFBPart
	for i := range 20 {
		b := "n" + strings.Repeat("x", i)
		deep = "Content-Type: multipart/mixed; boundary=\"" + b + "\"\r\n\r\n" + mailtest.Multipart(b, deep)
	}
	tests := []struct {
		name string
		in   string
		err  error
		text string // in the error message
	}{
		{"abuse report", failReportMail(failPlainPart, "Content-Type: message/feedback-report\r\n\r\n"+abuse, failOrigPart), ErrNotFailureReport, `"abuse"`},
		{"empty input", "", container.ErrNoReport, ""},
		{"mail without report", failHead + "Content-Type: text/plain\r\n\r\nHello, the DMARC meeting failed to start. Call 198.51.100.1.\r\n", container.ErrNoReport, ""},
		{"plain text without DMARC", "From: a@example.org\r\nSubject: hello\r\nContent-Type: text/plain\r\n\r\nSender IP Address: 198.51.100.1\r\nauthentication failed\r\n", container.ErrNoReport, ""},
		{"aggregate report mail", failHead + "Content-Type: multipart/mixed; boundary=\"xx\"\r\n\r\n" + mailtest.Multipart("xx",
			"Content-Type: text/plain\r\n\r\nThis is an aggregate DMARC report.", "Content-Type: application/gzip\r\nContent-Transfer-Encoding: base64\r\n\r\nH4sIAAAAAAAA/w=="), container.ErrNoReport, ""},
		{"broken multipart, nothing found", failHead + "Content-Type: multipart/report; boundary=\"xx\"\r\n\r\n--xx\r\nContent-Type: text/plain\r\n\r\nhi\r\n--xx\r\n bad header\r\n\r\n", container.ErrMalformed, ""},
		{"deep MIME nesting", failHead + deep, container.ErrTooLarge, "nested"},
		{"too many feedback parts", failReportMail(slices.Repeat([]string{"Content-Type: message/feedback-report\r\n\r\nFeedback-Type: auth-failure\r\n"}, failMaxItems+1)...), container.ErrTooLarge, "more than 1000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reps, err := Extract(strings.NewReader(tt.in), container.Limits{})
			if !errors.Is(err, tt.err) || reps != nil {
				t.Fatalf("%d reports, error %v, want %v", len(reps), err, tt.err)
			}
			if !strings.Contains(err.Error(), tt.text) || !strings.HasPrefix(err.Error(), "dmarc: ") {
				t.Errorf("error %q, want it to say %s", err, tt.text)
			}
		})
	}
}

// failCountingReader counts the bytes read from it.
type failCountingReader struct {
	r io.Reader
	n int64
}

func (c *failCountingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// failRepeat is an endless stream of one line, for huge parts that are
// never built in memory.
type failRepeat struct{ line []byte }

func (f failRepeat) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		n += copy(p[n:], f.line)
	}
	return n, nil
}

// TestExtractFailureTooLarge ensures a 10 MB feedback part (plain or
// base64) and over-long header blocks are refused with container.ErrTooLarge after
// reading little more than the 1 MiB limit, and that a mail over
// MaxCompressed is refused.
func TestExtractFailureTooLarge(t *testing.T) {
	const tenMB = 10 << 20
	tail := "\r\n--rr--\r\n"
	head := failHead + "Content-Type: multipart/report; boundary=\"rr\"\r\n\r\n--rr\r\n"
	big := func(partHead, line string) io.Reader {
		return io.MultiReader(strings.NewReader(head+partHead), io.LimitReader(failRepeat{[]byte(line)}, tenMB), strings.NewReader(tail))
	}
	tests := []struct {
		name string
		in   io.Reader
		lim  container.Limits
		max  int64 // bytes the reader may read
	}{
		{"10 MB feedback part", big("Content-Type: message/feedback-report\r\n\r\nFeedback-Type: auth-failure\r\n", "X-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n"), container.Limits{}, 2 << 20},
		{"10 MB base64 feedback part", big("Content-Type: message/feedback-report\r\nContent-Transfer-Encoding: base64\r\n\r\n", "WC1QYWRkaW5nOiBhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFh\r\n"), container.Limits{}, 2 << 20},
		{"10 MB original header", big("Content-Type: message/rfc822\r\n\r\n", "X-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n"), container.Limits{}, 2 << 20},
		{"10 MB text/rfc822-headers", big("Content-Type: text/rfc822-headers\r\n\r\n", "X-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n"), container.Limits{}, 2 << 20},
		{"10 MB mail header", io.LimitReader(failRepeat{[]byte("X-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n")}, tenMB), container.Limits{}, 2 << 20},
		{"mail over MaxCompressed", big("Content-Type: application/octet-stream\r\n\r\n", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\r\n"), container.Limits{MaxCompressed: 1 << 20}, 2 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cr := &failCountingReader{r: tt.in}
			reps, err := Extract(cr, tt.lim)
			if !errors.Is(err, container.ErrTooLarge) || reps != nil {
				t.Fatalf("%d reports, error %v, want container.ErrTooLarge", len(reps), err)
			}
			if cr.n > tt.max {
				t.Errorf("read %d bytes before refusing, want at most %d", cr.n, tt.max)
			}
		})
	}
}

// TestExtractFailureLargeOriginalBody ensures a large original body is
// skipped, not refused, and not kept.
func TestExtractFailureLargeOriginalBody(t *testing.T) {
	in := io.MultiReader(
		strings.NewReader(failReportMail(failFBPart)[:len(failReportMail(failFBPart))-len("--rr--\r\n")]+"--rr\r\nContent-Type: message/rfc822\r\n\r\n"+strings.Split(failOrig, "\r\n\r\n")[0]+"\r\n\r\n"),
		io.LimitReader(failRepeat{[]byte("SECRET BODY LINE\r\n")}, 5<<20),
		strings.NewReader("\r\n--rr--\r\n"))
	reps, err := Extract(in, container.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 1 || reps[0].MessageID != "abc@evil.test" {
		t.Fatalf("reports %+v", reps)
	}
	js, _ := json.Marshal(reps)
	if strings.Contains(string(js), "SECRET") {
		t.Error("the original's body is in the report")
	}
}

// failErrReader fails after its data.
type failErrReader struct {
	data string
	err  error
}

func (f *failErrReader) Read(p []byte) (int, error) {
	if f.data == "" {
		return 0, f.err
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

// TestExtractFailureReaderError ensures an error of the caller's reader
// comes back wrapped, not taken for a malformed mail.
func TestExtractFailureReaderError(t *testing.T) {
	boom := errors.New("disk on fire")
	in := failReportMail(failPlainPart, failFBPart, failOrigPart)
	for _, cut := range []int{10, len(failHead) + 80, len(in) - 200} {
		_, err := Extract(&failErrReader{data: in[:cut], err: boom}, container.Limits{})
		if !errors.Is(err, boom) {
			t.Errorf("cut at %d: error %v, want %v", cut, err, boom)
		}
	}
}

// TestExtractFailurePlainText ensures plain-text notices without a
// feedback part yield a report from their prose: key lines, sentences and
// the subject.
func TestExtractFailurePlainText(t *testing.T) {
	tests := []struct {
		name, in, ip, domain string
		arrival              time.Time
	}{
		{"sentence with date",
			"From: dmarc-report@domain.de\r\nSubject: DMARC Failure Report for domain.de\r\nContent-Type: text/plain\r\n\r\n" +
				"This is an email abuse report for an email message received from IP 10.10.10.10 on Mon, 01 Oct 2018 11:20:27 +0200.\r\n" +
				"The message below did not meet the sending domain's DMARC policy.\r\n",
			"10.10.10.10", "domain.de", time.Date(2018, 10, 1, 9, 20, 27, 0, time.UTC)},
		{"ip in the subject only",
			"From: x@reporter.example\r\nSubject: DMARC Failure Report for example.org (mail-from=a@example.org, ip=2001:db8::5)\r\n\r\nfailed.\r\n",
			"2001:db8::5", "example.org", time.Time{}},
		{"ARF-like fields in the text",
			"From: x@reporter.example\r\nSubject: DMARC forensic\r\n\r\nHello.\r\n\r\nFeedback-Type: auth-failure\r\nSource-IP: 192.0.2.4\r\nReported-Domain: example.net\r\nArrival-Date: 1538385627\r\n",
			"192.0.2.4", "example.net", time.Unix(1538385627, 0).UTC()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reps, err := Extract(strings.NewReader(tt.in), container.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			r := reps[0]
			if len(reps) != 1 || r.SourceIP.String() != tt.ip || r.ReportedDomain != tt.domain || !r.ArrivalDate.Equal(tt.arrival) || r.FeedbackType != "auth-failure" {
				t.Errorf("got %d reports, IP %v, domain %q, arrival %v", len(reps), r.SourceIP, r.ReportedDomain, r.ArrivalDate)
			}
		})
	}
}

// TestFailedChecks ensures the RFC 6591 failure kinds map onto the three
// checks the API filters on.
func TestFailedChecks(t *testing.T) {
	tests := []struct {
		in, want []string
	}{
		{nil, nil},
		{[]string{"dmarc"}, []string{"dmarc"}},
		{[]string{"bodyhash", "spf", "signature"}, []string{"spf", "dkim"}},
		{[]string{"revoked", "adsp", "dmarc", "smg-policy-action"}, []string{"dmarc", "dkim"}},
	}
	for _, tt := range tests {
		if got := (&Report{AuthFailure: tt.in}).FailedChecks(); !slices.Equal(got, tt.want) {
			t.Errorf("FailedChecks(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestAuthenticationResults ensures the dmarc, spf and dkim results are
// read from Authentication-Results values of every shape seen.
func TestAuthenticationResults(t *testing.T) {
	tests := []struct {
		in   string
		want map[string]string
	}{
		{"dmarc=fail (p=none, dis=none) header.from=domain.de", map[string]string{"dmarc": "fail"}},
		{"mx.example; spf=Pass smtp.mailfrom=a@b; dkim=none (message not signed) header.d=none", map[string]string{"spf": "pass", "dkim": "none"}},
		{"mx.example 1; dkim=fail (bad; sig) header.d=a; dkim=pass header.d=b; dkim=fail", map[string]string{"dkim": "pass"}},
		{"mx.example; dkim/1 = neutral; spf=softfail (comment (nested; with semicolon)) smtp.mailfrom=x; DMARC=Fail", map[string]string{"dkim": "neutral", "spf": "softfail", "dmarc": "fail"}},
		{`mx.example; iprev=pass policy.iprev="1.2.3.4;5"; spf="pass"`, map[string]string{"spf": "pass"}},
		{"mx.example; none", map[string]string{}},
		{"", map[string]string{}},
	}
	for _, tt := range tests {
		got := map[string]string{}
		failMergeAR(got, tt.in)
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q: %v, want %v", tt.in, got, tt.want)
		}
	}
}

// TestReportDateWithoutArrivalDate ensures reports without Arrival-Date
// (OpenDMARC's layout, the DMARCbis example's) carry their mail's Date,
// and that the fingerprint of a report tells copies alike and others
// apart.
func TestReportDateWithoutArrivalDate(t *testing.T) {
	for _, c := range []struct {
		file string
		date time.Time
		ip   string
	}{
		{"opendmarc.eml", time.Date(2024, 9, 3, 12, 7, 12, 0, time.UTC), "198.51.100.23"},
		{"dmarcbis.eml", time.Date(2022, 7, 19, 5, 57, 48, 0, time.UTC), "192.0.2.2"},
	} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "failure", c.file))
		if err != nil {
			t.Fatal(err)
		}
		reps, err := Extract(bytes.NewReader(raw), container.Limits{})
		if err != nil || len(reps) != 1 {
			t.Fatalf("%s: %d reports, %v", c.file, len(reps), err)
		}
		r := reps[0]
		if !r.ArrivalDate.IsZero() || !r.ReportDate.Equal(c.date) || r.SourceIP.String() != c.ip {
			t.Errorf("%s: arrival %v report date %v source %v, want none, %v and %s", c.file, r.ArrivalDate, r.ReportDate, r.SourceIP, c.date, c.ip)
		}
		again, _ := Extract(bytes.NewReader(raw), container.Limits{})
		other := *again[0]
		other.MessageID += "x"
		if again[0].Fingerprint() != r.Fingerprint() || other.Fingerprint() == r.Fingerprint() {
			t.Errorf("%s: the fingerprint does not tell copies alike and others apart", c.file)
		}
	}
}
