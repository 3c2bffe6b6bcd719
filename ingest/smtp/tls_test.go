package smtp

import (
	"net"
	"net/smtp"
	"net/textproto"
	"os"
	"path/filepath"
	"testing"

	"github.com/dmarcd/dmarcd/ingest/ingesttest"
	"github.com/dmarcd/dmarcd/internal/reportgen"
	"github.com/dmarcd/dmarcd/store"
)

// TestSMTPStoresTLSReports ensures TLS report mails (Google style as
// application/tlsrpt+gzip, Microsoft style as application/tlsrpt+json)
// sent over SMTP to a reporting address are accepted and stored once each,
// and a hostile one (negative counts) is accepted into the quarantine
// with its reason, storing nothing.
func TestSMTPStoresTLSReports(t *testing.T) {
	env := ingesttest.New(t, "acme/example.com/abc")
	addr, _ := startSMTP(t, env, Config{})
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "..", "dmarc", "tlsrpt", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	google := ingesttest.MailWith("noreply-smtp-tls-reporting@google.com", "abc@reports.test", reportgen.Gzip(read("google.json")), "application/tlsrpt+gzip", "google.com!example.com!1.json.gz")
	ms := ingesttest.MailWith("tlsrpt-noreply@microsoft.com", "abc@reports.test", read("microsoft.json"), "application/tlsrpt+json", "microsoft.json")
	for i := range 2 {
		for _, msg := range [][]byte{google, ms} {
			if err := smtp.SendMail(addr, nil, "tlsrpt@sender.test", []string{"abc@reports.test"}, msg); err != nil {
				t.Fatalf("send %d: %v", i+1, err)
			}
		}
	}
	d := env.Domains["abc@reports.test"]
	l, err := env.DB.ListTLSReports(d.OrgID, store.TLSFilter{DomainID: d.ID, Page: store.Page{Page: 1, Limit: 10}})
	if err != nil || len(l.Reports) != 2 {
		t.Fatalf("%d TLS reports stored (%v), want 2", len(l.Reports), err)
	}
	if q := env.Quarantine(t); len(q) != 0 {
		t.Fatalf("quarantine holds %d entries", len(q))
	}
	bad := ingesttest.MailWith("x@sender.test", "abc@reports.test", []byte(`{"organization-name":"x","report-id":"neg","date-range":{"start-datetime":"2026-11-20T00:00:00Z","end-datetime":"2026-11-21T00:00:00Z"},"policies":[{"policy":{"policy-type":"sts","policy-domain":"example.com"},"summary":{"total-successful-session-count":-1}}]}`), "application/tlsrpt+json", "neg.json")
	if err := smtp.SendMail(addr, nil, "x@sender.test", []string{"abc@reports.test"}, bad); err != nil {
		t.Fatalf("hostile report: %v", err)
	}
	q := env.Quarantine(t)
	if len(q) != 1 || q[0].Reason == "" {
		t.Fatalf("quarantine %+v", q)
	}
	if l, _ := env.DB.ListTLSReports(d.OrgID, store.TLSFilter{DomainID: d.ID, Page: store.Page{Page: 1, Limit: 10}}); len(l.Reports) != 2 {
		t.Fatalf("%d TLS reports after the hostile one", len(l.Reports))
	}
}

// TestSMTPReplyCountsReports ensures the 250 reply says what was stored,
// by kind: a mail with an aggregate and a TLS report, then the same mail
// again (already stored).
func TestSMTPReplyCountsReports(t *testing.T) {
	env := ingesttest.New(t, "acme/example.com/abc")
	addr, _ := startSMTP(t, env, Config{})
	tlsReport, err := os.ReadFile(filepath.Join("..", "..", "dmarc", "tlsrpt", "testdata", "google.json"))
	if err != nil {
		t.Fatal(err)
	}
	agg := reportgen.Generate(3, 2, reportgen.Options{Domain: "example.com"})
	msg := "From: r@sender.test\r\nTo: abc@reports.test\r\nSubject: reports\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/mixed; boundary=\"b\"\r\n\r\n" +
		"--b\r\nContent-Type: application/xml\r\n\r\n" + string(agg) + "\r\n" +
		"--b\r\nContent-Type: application/tlsrpt+json\r\n\r\n" + string(tlsReport) + "\r\n--b--\r\n"
	for _, want := range []string{
		"2.0.0 stored: 1 aggregate report, 1 TLS report",
		"2.0.0 already stored: 1 aggregate report, 1 TLS report",
	} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		tc := textproto.NewConn(conn)
		step := func(code int, cmd string) string {
			t.Helper()
			if cmd != "" {
				if err := tc.PrintfLine("%s", cmd); err != nil {
					t.Fatal(err)
				}
			}
			_, text, err := tc.ReadResponse(code)
			if err != nil {
				t.Fatalf("%q: %v", cmd, err)
			}
			return text
		}
		step(220, "")
		step(250, "EHLO sender.test")
		step(250, "MAIL FROM:<r@sender.test>")
		step(250, "RCPT TO:<abc@reports.test>")
		step(354, "DATA")
		w := tc.DotWriter()
		if _, err := w.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		w.Close()
		if got := step(250, ""); got != want {
			t.Errorf("reply %q, want %q", got, want)
		}
		tc.Close()
	}
}
