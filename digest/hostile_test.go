package digest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/digest"
	"github.com/dmarcd/dmarcd/dmarc/tlsrpt"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// hostile is report text that tries to be markup in the HTML part and a
// header or a line of its own in the text part.
const hostile = "<script>alert(1)</script><img src=x onerror=alert(2)>\r\nBcc: victim@example.net\r\n\r\nDMARC pass 100.0 %\u202e"

// tlsReport is a TLS report for example.com on day with failed sessions of
// result type result from MX mx.
func tlsReport(id string, day time.Time, result, mx string, failed int64) *tlsrpt.Report {
	return &tlsrpt.Report{OrganizationName: "tls.example", ReportID: id, DateBegin: day, DateEnd: day.Add(24*time.Hour - time.Second),
		Policies: []tlsrpt.Policy{{Type: "sts", Domain: "example.com", SuccessfulSessions: 900, FailedSessions: failed,
			Failures: []tlsrpt.FailureDetail{{ResultType: result, ReceivingMXHostname: mx, SendingMTAIP: "192.0.2.1", FailedSessions: failed}}}}}
}

// TestHostileReportTextEscaped puts hostile text where reports put
// strings (a reverse DNS name that names a sender, a TLS result type)
// and checks the HTML part shows it as text and the text part keeps it
// on its line.
func TestHostileReportTextEscaped(t *testing.T) {
	e := newTestEnv(t)
	day := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	e.ingest(t, e.acme, handReport("h1", "example.com", "203.0.113.7", day, 50, "fail", "fail"))
	if err := e.DB.PutRDNS([]store.RDNSEntry{{IP: "203.0.113.7", Status: store.RDNSConfirmed, Hostname: "mx." + strings.ReplaceAll(hostile, ".", "") + ".evil.example", CheckedAt: now}}); err != nil {
		t.Fatal(err)
	}
	storetest.MustTLSReport(t, e.DB, e.com, tlsReport("t1", day, hostile, "mx.example.com", 40), now)
	d, err := (&digest.Builder{DB: e.DB}).Build(context.Background(), e.acme.ID, digest.Day, now)
	if err != nil {
		t.Fatal(err)
	}
	m, err := digest.Render(d, digest.RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The hostile text made it in (else this test proves nothing).
	if !strings.Contains(m.Text, "<script>alert(1)</script>") {
		t.Fatalf("the text part lacks the hostile text:\n%s", m.Text)
	}
	if strings.Count(m.HTML, "&lt;script&gt;alert(1)&lt;/script&gt;") < 1 {
		t.Fatalf("the HTML part lacks the escaped hostile text:\n%s", m.HTML)
	}
	for _, bad := range []string{"<script", "<img", "\u202e"} {
		if strings.Contains(strings.ToLower(m.HTML), bad) {
			t.Errorf("HTML part holds %q", bad)
		}
	}
	for _, part := range []string{m.Subject, m.Text} {
		if strings.ContainsAny(part, "\r\u202e\u2028") {
			t.Errorf("a CR or a Unicode control character in %q", part)
		}
	}
	for i, l := range lines(m.Text) {
		if strings.HasPrefix(l, "Bcc:") || strings.HasPrefix(l, "DMARC pass 100.0 %") {
			t.Errorf("text line %d is the report's: %q", i+1, l)
		}
	}
	if strings.ContainsAny(m.Subject, "\r\n") {
		t.Errorf("subject %q spans lines", m.Subject)
	}
}

// TestHostileOrganizationName: the subject names the organization, whose
// name an owner chose; it stays one line.
func TestSubjectOneLine(t *testing.T) {
	d := &digest.Digest{Organization: "acme\r\nBcc: victim@example.net", Period: digest.Week,
		From: time.Date(2026, 11, 16, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)}
	s := d.Subject()
	if strings.ContainsAny(s, "\r\n") || !strings.Contains(s, "acme") || !strings.Contains(s, "16–22 Nov 2026") {
		t.Errorf("subject %q", s)
	}
}
