package ingest

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/internal/reportgen"
	"github.com/dmarcd/dmarcd/store"
)

func tlsTestdata(t testing.TB, name string) []byte {
	t.Helper()
	return mustReadFile(t, "../dmarc/tlsrpt/testdata/"+name)
}

func gzipOf(t testing.TB, b []byte) []byte {
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

// tlsMail is a report mail as RFC 8460 section 5.3.2 describes it: a
// text part and the report as application/tlsrpt+gzip (or +json), plus
// any extra parts given (Content-Type line, body).
func tlsMail(rcpt string, report []byte, ctype string, extra ...[2]string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "From: tlsrpt@google.com\r\nTo: %s\r\nSubject: Report Domain: example.com Submitter: google.com Report-ID: <x>\r\n", rcpt)
	b.WriteString("TLS-Report-Domain: example.com\r\nTLS-Report-Submitter: google.com\r\nMIME-Version: 1.0\r\n")
	b.WriteString("Content-Type: multipart/report; report-type=\"tlsrpt\"; boundary=\"b1\"\r\n\r\n")
	b.WriteString("--b1\r\nContent-Type: text/plain\r\n\r\nThis is an aggregate TLS report from google.com\r\n")
	fmt.Fprintf(&b, "--b1\r\nContent-Type: %s\r\nContent-Disposition: attachment; filename=\"google.com!example.com!1.json.gz\"\r\nContent-Transfer-Encoding: base64\r\n\r\n", ctype)
	b.WriteString(b64(report))
	for _, x := range extra {
		fmt.Fprintf(&b, "--b1\r\nContent-Type: %s\r\nContent-Transfer-Encoding: base64\r\n\r\n%s", x[0], b64([]byte(x[1])))
	}
	b.WriteString("--b1--\r\n")
	return b.Bytes()
}

func b64(p []byte) string {
	var out strings.Builder
	enc := []byte(base64.StdEncoding.EncodeToString(p))
	for len(enc) > 76 {
		out.Write(enc[:76])
		out.WriteString("\r\n")
		enc = enc[76:]
	}
	out.Write(enc)
	out.WriteString("\r\n")
	return out.String()
}

// tlsReports lists the TLS reports of a domain.
func tlsReports(t testing.TB, db *store.DB, dom *store.Domain) []*store.TLSReport {
	t.Helper()
	l, err := db.ListTLSReports(dom.OrgID, store.TLSFilter{DomainID: dom.ID, Page: store.Page{Page: 1, Limit: 100}})
	if err != nil {
		t.Fatal(err)
	}
	return l.Reports
}

func countTLS(t testing.TB, db *store.DB) int { return countKeys(t, db, "tls_reports") }

// TestTLSImport ensures Google- and Microsoft-style reports, plain and
// gzip, imported as bare files, are stored for their policy-domain with
// every policy, and a second import of each is a duplicate of the first.
func TestTLSImport(t *testing.T) {
	e := newEnv(t, nil)
	dom := e.domain(t, "example.com")
	for _, name := range []string{"google.json", "microsoft.json"} {
		raw := tlsTestdata(t, name)
		res := e.ingest(t, raw, importOf(name))
		if len(res.Reports) != 1 || res.Reports[0].Kind != KindTLS || res.Reports[0].Duplicate || res.Reports[0].Domain != "example.com" {
			t.Fatalf("%s: %+v", name, res)
		}
		got, err := e.db.FindTLSReport(e.org.ID, res.Reports[0].ReportID)
		if err != nil || got.DomainID != dom.ID || len(got.Policies) == 0 {
			t.Fatalf("%s: stored %+v, %v", name, got, err)
		}
		again := e.ingest(t, gzipOf(t, raw), importOf(name+".gz"))
		if len(again.Reports) != 1 || !again.Reports[0].Duplicate || again.Reports[0].ReportID != res.Reports[0].ReportID || again.Reports[0].Kind != KindTLS {
			t.Fatalf("%s gzip again: %+v", name, again)
		}
	}
	if n := len(tlsReports(t, e.db, dom)); n != 2 {
		t.Fatalf("%d TLS reports stored, want 2", n)
	}
	if n := countKeys(t, e.db, "quarantine"); n != 0 {
		t.Fatalf("%d quarantined", n)
	}
}

// TestTLSMail ensures a TLS report mail over SMTP (application/tlsrpt+gzip
// or +json, or gzip sent as application/octet-stream) is stored for the
// recipient's domain, and a mail holding an aggregate report and a TLS
// report stores both, in mail order.
func TestTLSMail(t *testing.T) {
	e := newEnv(t, nil)
	dom := e.domain(t, "example.com")
	g, m := tlsTestdata(t, "google.json"), tlsTestdata(t, "microsoft.json")
	res := e.ingest(t, tlsMail(dom.ReportingEmail, gzipOf(t, g), "application/tlsrpt+gzip"), smtpTo(dom.ReportingEmail))
	if len(res.Reports) != 1 || res.Reports[0].Kind != KindTLS || res.Reports[0].Duplicate {
		t.Fatalf("gzip mail: %+v", res)
	}
	res = e.ingest(t, tlsMail(dom.ReportingEmail, m, "application/tlsrpt+json"), smtpTo(dom.ReportingEmail))
	if len(res.Reports) != 1 || res.Reports[0].Kind != KindTLS || res.Reports[0].Duplicate {
		t.Fatalf("json mail: %+v", res)
	}
	res = e.ingest(t, tlsMail(dom.ReportingEmail, gzipOf(t, m), "application/octet-stream"), smtpTo(dom.ReportingEmail))
	if len(res.Reports) != 1 || !res.Reports[0].Duplicate {
		t.Fatalf("octet-stream mail again: %+v", res)
	}

	agg := reportgen.Generate(7, 3, reportgen.Options{})
	g2 := bytes.Replace(g, []byte(`"2026-11-20T00:00:00Z_example.com"`), []byte(`"both"`), 1)
	both := tlsMail(dom.ReportingEmail, gzipOf(t, g2), "application/tlsrpt+gzip", [2]string{"application/xml", string(agg)})
	res = e.ingest(t, both, smtpTo(dom.ReportingEmail))
	if len(res.Reports) != 2 || res.Reports[0].Kind != KindTLS || res.Reports[1].Kind != KindAggregate ||
		res.Reports[0].Duplicate || res.Reports[1].Duplicate || res.Reports[1].Records != 3 {
		t.Fatalf("mail with both: %+v", res)
	}
	if n := len(tlsReports(t, e.db, dom)); n != 3 {
		t.Fatalf("%d TLS reports, want 3", n)
	}
}

// TestTLSRouting ensures a TLS report to a reporting address goes to that
// domain when its policy-domain is the domain or a subdomain, else to the
// policy-domain among the organization's domains, and never to another
// organization's domain; on import, to the policy-domain, with an
// organization named when two register it.
func TestTLSRouting(t *testing.T) {
	e := newEnv(t, nil)
	main := e.domain(t, "example.com")
	second := e.domain(t, "example.org")
	other, err := e.db.CreateOrganization("other", store.PlanUnlimited)
	if err != nil {
		t.Fatal(err)
	}
	foreign := &store.Domain{OrgID: other.ID, Name: "example.net", ReportingEmail: "foreign@reports.test", DMARCRecord: "v=DMARC1; p=none"}
	if err := e.db.CreateDomain(foreign); err != nil {
		t.Fatal(err)
	}
	g := tlsTestdata(t, "google.json")
	for _, tt := range []struct {
		policyDomain string
		want         *store.Domain
	}{
		{"example.com", main}, {"mail.example.com", main}, {"example.org", second}, {"sub.example.org", second}, {"example.net", nil},
	} {
		raw := bytes.ReplaceAll(g, []byte(`"policy-domain":"example.com"`), []byte(`"policy-domain":"`+tt.policyDomain+`"`))
		raw = bytes.Replace(raw, []byte(`_example.com"`), []byte(`_`+tt.policyDomain+`"`), 1)
		res := e.ingest(t, tlsMail(main.ReportingEmail, raw, "application/tlsrpt+json"), smtpTo(main.ReportingEmail))
		if tt.want == nil {
			if len(res.Reports) != 0 || res.Quarantined == "" || !strings.Contains(res.Reason, "belongs to no domain of the organization") {
				t.Errorf("%s: %+v", tt.policyDomain, res)
			}
			continue
		}
		if len(res.Reports) != 1 || res.Reports[0].Domain != tt.want.Name {
			t.Errorf("%s: %+v, want %s", tt.policyDomain, res, tt.want.Name)
		}
	}
	res := e.ingest(t, tlsMail("nobody@reports.test", g, "application/tlsrpt+json"), smtpTo("nobody@reports.test"))
	if res.Quarantined == "" || !strings.Contains(res.Reason, "no domain has the reporting address") {
		t.Errorf("unknown recipient: %+v", res)
	}
	// Import: example.net is the other organization's only.
	raw := bytes.ReplaceAll(g, []byte(`"example.com"`), []byte(`"example.net"`))
	res = e.ingest(t, raw, importOf("net.json"))
	if len(res.Reports) != 1 || res.Reports[0].Domain != "example.net" {
		t.Errorf("import: %+v", res)
	}
	if l := tlsReports(t, e.db, foreign); len(l) != 1 {
		t.Errorf("foreign domain has %d reports", len(l))
	}
}

// TestTLSHostile ensures hostile TLS reports (each looking like one in
// its first bytes) are quarantined with the parser's reason on import and
// by mail, and refused over HTTPS without a quarantine entry; nothing is
// stored, and the pipeline still stores a good report afterwards.
func TestTLSHostile(t *testing.T) {
	e := newEnv(t, nil)
	dom := e.domain(t, "example.com")
	head := `{"report-id":"r","policies":[],"x":`
	var bomb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&bomb, gzip.BestCompression)
	zw.Write([]byte(`{"report-id":"bomb","policies":[{"x":"`))
	zw.Write(bytes.Repeat([]byte("A"), 64<<20))
	zw.Close()
	cases := []struct{ name, in, reason string }{
		{"invalid JSON", head + `{"organization-name": "x",`, "tlsrpt"},
		{"deep nesting", head + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + "}", "nesting deeper than"},
		{"huge array", head + "[" + strings.TrimSuffix(strings.Repeat("1,", 20000), ",") + "]}", "more than 10000 elements"},
		{"negative count", strings.Replace(string(tlsTestdata(t, "google.json")), "1200", "-1200", 1), "is negative"},
		{"gzip bomb", bomb.String(), "gzip"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := e.ingest(t, []byte(c.in), importOf(c.name))
			if len(res.Reports) != 0 || res.Quarantined == "" || !strings.Contains(res.Reason, c.reason) {
				t.Fatalf("import: %+v, want quarantined for %q", res, c.reason)
			}
			if len(c.in) < 1<<20 {
				res = e.ingest(t, tlsMail(dom.ReportingEmail, []byte(c.in), "application/tlsrpt+json"), smtpTo(dom.ReportingEmail))
				if len(res.Reports) != 0 || res.Quarantined == "" || !strings.Contains(res.Reason, c.reason) {
					t.Fatalf("mail: %+v", res)
				}
			}
			before := countKeys(t, e.db, "quarantine")
			res = e.ingest(t, []byte(c.in), Arrival{Source: SourceHTTPS, Recipient: dom.ReportingEmail, Name: "https"})
			if len(res.Reports) != 0 || res.Quarantined != "" || !strings.Contains(res.Reason, c.reason) {
				t.Fatalf("https: %+v", res)
			}
			if n := countKeys(t, e.db, "quarantine"); n != before {
				t.Fatalf("https refusal quarantined: %d -> %d", before, n)
			}
		})
	}
	if n := countTLS(t, e.db); n != 0 {
		t.Fatalf("%d TLS reports stored", n)
	}
	res := e.ingest(t, tlsTestdata(t, "google.json"), importOf("good"))
	if len(res.Reports) != 1 || res.Reports[0].Duplicate {
		t.Fatalf("good report after hostile ones: %+v", res)
	}
}

// TestTLSOverHTTPS ensures the HTTPS way in stores TLS reports (plain or
// gzip) for the recipient's domain, takes no aggregate report (refused:
// that way in is for TLS reports) and quarantines nothing.
func TestTLSOverHTTPS(t *testing.T) {
	e := newEnv(t, nil)
	dom := e.domain(t, "example.com")
	https := Arrival{Source: SourceHTTPS, Recipient: dom.ReportingEmail, Name: "POST /tlsrpt/x"}
	res := e.ingest(t, gzipOf(t, tlsTestdata(t, "microsoft.json")), https)
	if len(res.Reports) != 1 || res.Reports[0].Kind != KindTLS || res.Reports[0].Domain != "example.com" {
		t.Fatalf("gzip: %+v", res)
	}
	res = e.ingest(t, tlsTestdata(t, "microsoft.json"), https)
	if len(res.Reports) != 1 || !res.Reports[0].Duplicate {
		t.Fatalf("again: %+v", res)
	}
	res = e.ingest(t, reportgen.Generate(1, 2, reportgen.Options{}), https)
	if len(res.Reports) != 0 || res.Quarantined != "" || !strings.Contains(res.Reason, "no TLS report") {
		t.Fatalf("aggregate over HTTPS: %+v", res)
	}
	if n := countKeys(t, e.db, "quarantine"); n != 0 {
		t.Fatalf("%d quarantined", n)
	}
	if _, err := e.p.Ingest(context.Background(), bytes.NewReader(nil), Arrival{Source: "carrier pigeon"}); err == nil {
		t.Fatal("unknown source accepted")
	}
}
