package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// arfSpec describes a generated failure report mail.
type arfSpec struct {
	from, to       string // of the report mail
	feedbackType   string // "" means auth-failure
	sourceIP       string // "" leaves Source-IP out
	reportedDomain string
	arrival        string // Arrival-Date as sent; "" leaves it out
	authFailure    string
	messageID      string
	extraPart      string // another part, raw (headers, blank line, body)
}

// arfMail renders a as an RFC 6591 report mail with the original message
// (headers and a body that must never be stored).
func arfMail(a arfSpec) []byte {
	if a.feedbackType == "" {
		a.feedbackType = "auth-failure"
	}
	if a.from == "" {
		a.from = "dmarc@reporter.example.org"
	}
	if a.messageID == "" {
		a.messageID = "msg-1@evil.test"
	}
	var fb strings.Builder
	fmt.Fprintf(&fb, "Feedback-Type: %s\r\nUser-Agent: Test/1.0\r\nVersion: 1\r\n", a.feedbackType)
	fb.WriteString("Original-Mail-From: <bounce@evil.test>\r\nOriginal-Rcpt-To: <user@" + a.reportedDomain + ">\r\n")
	if a.arrival != "" {
		fb.WriteString("Arrival-Date: " + a.arrival + "\r\n")
	}
	fb.WriteString("Reporting-MTA: dns; mx.reporter.example.org\r\n")
	if a.sourceIP != "" {
		fb.WriteString("Source-IP: " + a.sourceIP + "\r\n")
	}
	fb.WriteString("Reported-Domain: " + a.reportedDomain + "\r\n")
	if a.authFailure != "" {
		fb.WriteString("Auth-Failure: " + a.authFailure + "\r\n")
	}
	fb.WriteString("Delivery-Result: reject\r\n")
	orig := "Authentication-Results: mx.reporter.example.org; dkim=fail header.d=" + a.reportedDomain +
		"; spf=fail smtp.mailfrom=evil.test; dmarc=fail header.from=" + a.reportedDomain + "\r\n" +
		"From: <ceo@" + a.reportedDomain + ">\r\nTo: user@" + a.reportedDomain + "\r\nSubject: Invoice 42\r\n" +
		"Message-ID: <" + a.messageID + ">\r\n\r\nSECRET BODY TEXT\r\n"
	var m bytes.Buffer
	fmt.Fprintf(&m, "From: %s\r\nTo: %s\r\nSubject: DMARC failure report\r\nMIME-Version: 1.0\r\n", a.from, a.to)
	m.WriteString("Content-Type: multipart/report; report-type=feedback-report; boundary=\"rr\"\r\n\r\n")
	m.WriteString("--rr\r\nContent-Type: text/plain\r\n\r\nAn authentication failure report.\r\n")
	m.WriteString("--rr\r\nContent-Type: message/feedback-report\r\n\r\n" + fb.String() + "\r\n")
	m.WriteString("--rr\r\nContent-Type: message/rfc822\r\n\r\n" + orig + "\r\n")
	if a.extraPart != "" {
		m.WriteString("--rr\r\n" + a.extraPart + "\r\n")
	}
	m.WriteString("--rr--\r\n")
	return m.Bytes()
}

// failuresOf returns every failure report of the organization, newest first.
func failuresOf(t *testing.T, db *store.DB, orgID string) []*store.FailureReport {
	t.Helper()
	reps, _, err := db.ListFailureReports(orgID, store.FailureFilter{Page: store.Page{Page: 1, Limit: 100}})
	if err != nil {
		t.Fatal(err)
	}
	return reps
}

func str(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

// TestFailureCorpusThroughPipeline ensures every failure sample of the
// corpus, imported, is stored with its source IP, auth failure, reported
// domain and arrival date, under the domain its reported domain (or its
// organizational domain) names, and that the same report twice is stored
// once.
func TestFailureCorpusThroughPipeline(t *testing.T) {
	e := newEnv(t, nil)
	doms := map[string]*store.Domain{}
	for _, name := range []string{"domain.de", "cardinal.com", "example.com"} {
		doms[name] = e.domain(t, name)
	}
	dir := filepath.Join("..", "testdata", "corpus", "failure")
	files, err := filepath.Glob(filepath.Join(dir, "*.eml")) // no '[' in the directory name
	if err != nil || len(files) != 5 {
		t.Fatalf("%d samples in %s (%v), the table has 5", len(files), dir, err)
	}
	for _, c := range []struct {
		file, ip, domain, reported string
		auth                       []string
		arrival                    time.Time
		dup                        bool
	}{
		{"DMARC Failure Report for domain.de (mail-from=sharepoint@domain.de, ip=10.10.10.10).eml", "10.10.10.10", "domain.de", "domain.de",
			[]string{"dmarc"}, time.Date(2018, 10, 1, 9, 20, 27, 0, time.UTC), false},
		{"[Netease DMARC Failure Report] Rent Reminder.eml", "167.89.69.24", "cardinal.com", "cardinal.com",
			[]string{"dmarc"}, time.Date(2018, 9, 28, 8, 48, 42, 0, time.UTC), false},
		{"dmarc_ruf_report_linkedin.eml", "10.10.10.10", "example.com", "example.com",
			[]string{"dmarc"}, time.Date(2019, 4, 30, 2, 9, 0, 0, time.UTC), false},
		{"dmarc_ruf_report_linkedin.crlf.eml", "10.10.10.10", "example.com", "example.com",
			[]string{"dmarc"}, time.Date(2019, 4, 30, 2, 9, 0, 0, time.UTC), true},
		{"exim_plain_text_only_no_arf_part.eml", "203.0.113.68", "example.com", "example.com",
			[]string{"dmarc", "spf", "dkim"}, time.Date(2025, 4, 7, 21, 16, 9, 0, time.UTC), false},
	} {
		t.Run(c.file, func(t *testing.T) {
			f, err := os.Open(filepath.Join(dir, c.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			res, err := e.p.Ingest(context.Background(), f, importOf(c.file))
			if err != nil {
				t.Fatal(err)
			}
			if res.Quarantined != "" || len(res.Reports) != 1 || res.Reports[0].Duplicate != c.dup {
				t.Fatalf("result %+v, want one report (duplicate %v)", res, c.dup)
			}
			got, err := e.db.FindFailureReport(e.org.ID, res.Reports[0].ReportID)
			if err != nil {
				t.Fatal(err)
			}
			if str(got.SourceIP) != c.ip || got.DomainID != doms[c.domain].ID || str(got.ReportedDomain) != c.reported ||
				!reflect.DeepEqual(got.AuthFailure, c.auth) || !got.ArrivalDate.Equal(c.arrival) || got.FeedbackType != "auth-failure" {
				t.Errorf("stored ip %s domain %s reported %s auth %v arrival %v",
					str(got.SourceIP), got.Domain, str(got.ReportedDomain), got.AuthFailure, got.ArrivalDate)
			}
			if !got.ReceivedAt.Equal(storetest.Epoch()) {
				t.Errorf("received_at %v", got.ReceivedAt)
			}
		})
	}
	if n := len(failuresOf(t, e.db, e.org.ID)); n != 4 {
		t.Errorf("%d failure reports stored, want 4", n)
	}
}

// TestFailureRouting ensures an SMTP report belongs to the recipient's
// domain whatever it names, an imported one to its reported domain or its
// organizational domain, that every report of a mail is stored, and that
// the original's body is nowhere in what is stored.
func TestFailureRouting(t *testing.T) {
	g := openGeo(t)
	e := newEnv(t, func(c *Config) { c.Geo = g })
	a := e.domain(t, "alpha.example")
	b := e.domain(t, "beta.example")

	res := e.ingest(t, arfMail(arfSpec{to: a.ReportingEmail, reportedDomain: "unrelated.example", sourceIP: "81.2.69.142",
		arrival: "Mon, 16 Nov 2026 10:00:00 +0100", authFailure: "spf"}), smtpTo(a.ReportingEmail))
	if len(res.Reports) != 1 || res.Reports[0].Domain != a.Name {
		t.Fatalf("SMTP: %+v", res)
	}
	got, err := e.db.FindFailureReport(e.org.ID, res.Reports[0].ReportID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Geo == nil || str(got.Geo.CountryCode) != "GB" || str(got.Subject) != "Invoice 42" || str(got.MessageID) != "msg-1@evil.test" ||
		!got.ArrivalDate.Equal(time.Date(2026, 11, 16, 9, 0, 0, 0, time.UTC)) || str(got.OriginalRcptTo) != "user@unrelated.example" {
		t.Errorf("stored %+v geo %+v", got.FailureReport, got.Geo)
	}
	if len(got.Headers) != 5 || got.Headers[3].Name != "Subject" {
		t.Errorf("headers %+v", got.Headers)
	}

	res = e.ingest(t, arfMail(arfSpec{reportedDomain: "mail.beta.example", sourceIP: "192.0.2.1", authFailure: "dkim",
		extraPart: "Content-Type: message/feedback-report\r\n\r\nFeedback-Type: auth-failure\r\nSource-IP: 192.0.2.2\r\n" +
			"Reported-Domain: beta.example\r\nAuth-Failure: dmarc\r\n"}), importOf("two.eml"))
	if len(res.Reports) != 2 || res.Reports[0].Domain != b.Name || res.Reports[1].Domain != b.Name {
		t.Fatalf("import of two reports: %+v", res)
	}

	res = e.ingest(t, arfMail(arfSpec{reportedDomain: "nobody.example", sourceIP: "192.0.2.1"}), importOf("nobody.eml"))
	if res.Quarantined == "" || !strings.Contains(res.Reason, "no registered domain for nobody.example") {
		t.Errorf("unroutable import: %+v", res)
	}
	for _, r := range failuresOf(t, e.db, e.org.ID) {
		det, err := e.db.FindFailureReport(e.org.ID, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(fmt.Sprintf("%+v %+v", *det.FailureReport, det.Headers), "SECRET BODY") {
			t.Errorf("the original's body is stored: %+v", det.Headers)
		}
	}
}

// TestFailureAmbiguousImport ensures an imported failure report whose
// domain two organizations registered needs the organization named.
func TestFailureAmbiguousImport(t *testing.T) {
	e := newEnv(t, nil)
	e.domain(t, "shared.example")
	other := storetest.MustOrganization(t, e.db, "other", store.PlanBusiness)
	storetest.MustDomain(t, e.db, other.ID, "shared.example")
	mail := arfMail(arfSpec{reportedDomain: "shared.example", sourceIP: "192.0.2.1"})
	if _, err := e.p.Ingest(context.Background(), bytes.NewReader(mail), importOf("x.eml")); !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("err = %v, want ErrAmbiguous", err)
	}
	d := importOf("x.eml")
	d.OrgID = other.ID
	if res := e.ingest(t, mail, d); len(res.Reports) != 1 || len(failuresOf(t, e.db, other.ID)) != 1 {
		t.Errorf("with the organization named: %+v", res)
	}
}

// noSeek hides a reader's Seek, as a spooled SMTP message over the memory
// threshold or a pipe would.
type noSeek struct{ io.Reader }

// TestFailureBadInput ensures each unusable or odd failure report mail has
// a clear outcome and that nothing of an unusable one is lost: it is
// quarantined whole with the reason.
func TestFailureBadInput(t *testing.T) {
	e := newEnv(t, nil)
	dom := e.domain(t, "example.com")
	deep := "Content-Type: multipart/mixed; boundary=\"b0\"\r\n\r\n"
	for i := range 40 {
		deep += fmt.Sprintf("--b%d\r\nContent-Type: multipart/mixed; boundary=\"b%d\"\r\n\r\n", i, i+1)
	}
	deepMail := []byte("From: x@reporter.example\r\nSubject: deep\r\nMIME-Version: 1.0\r\n" + deep + "--b40\r\nContent-Type: message/feedback-report\r\n\r\n" +
		"Feedback-Type: auth-failure\r\nSource-IP: 192.0.2.1\r\nReported-Domain: example.com\r\n\r\n--b40--\r\n")
	huge := "Content-Type: message/feedback-report\r\n\r\nFeedback-Type: auth-failure\r\nSource-IP: 192.0.2.9\r\nReported-Domain: example.com\r\n" +
		strings.Repeat("X-Padding: "+strings.Repeat("p", 1000)+"\r\n", 10<<10)
	hugeMail := []byte("From: x@reporter.example\r\nSubject: huge\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/report; report-type=feedback-report; boundary=\"rr\"\r\n\r\n--rr\r\n" + huge + "\r\n--rr--\r\n")
	for _, c := range []struct {
		name     string
		mail     []byte
		seekable bool
		reason   string // quarantined with this in the reason; "" means stored
		check    func(t *testing.T, r *store.FailureReport)
	}{
		{"abuse report", arfMail(arfSpec{feedbackType: "abuse", reportedDomain: "example.com", sourceIP: "192.0.2.1"}), true,
			`feedback type "abuse": not a DMARC failure report`, nil},
		{"abuse report, not seekable", arfMail(arfSpec{feedbackType: "abuse", reportedDomain: "example.com", sourceIP: "192.0.2.1"}), false,
			`feedback type "abuse"`, nil},
		{"feedback part of 10 MB", hugeMail, true, "exceeds size limits", nil},
		{"feedback part of 10 MB, not seekable", hugeMail, false, "exceeds size limits", nil},
		{"MIME nested 40 deep", deepMail, true, "exceeds size limits", nil},
		{"no auth report at all", []byte("From: a@b.example\r\nSubject: hello\r\n\r\nJust a mail.\r\n"), true, "no", nil},
		{"no Source-IP", arfMail(arfSpec{reportedDomain: "example.com", arrival: "Sun, 22 Nov 2026 08:00:00 +0000", messageID: "no-ip@x"}), true, "",
			func(t *testing.T, r *store.FailureReport) {
				if r.SourceIP != nil || r.Geo != nil || !reflect.DeepEqual(r.AuthFailure, []string{"dmarc", "spf", "dkim"}) {
					t.Errorf("source %v geo %v auth %v, want null, null, and all three (derived from the results)", r.SourceIP, r.Geo, r.AuthFailure)
				}
			}},
		{"no Arrival-Date, not seekable", arfMail(arfSpec{reportedDomain: "example.com", sourceIP: "192.0.2.5", messageID: "no-date@x"}), false, "",
			func(t *testing.T, r *store.FailureReport) {
				if !r.ArrivalDate.Equal(storetest.Epoch()) || str(r.SourceIP) != "192.0.2.5" {
					t.Errorf("arrival %v source %s, want the receive time", r.ArrivalDate, str(r.SourceIP))
				}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var r io.Reader = bytes.NewReader(c.mail)
			if !c.seekable {
				r = noSeek{r}
			}
			res, err := e.p.Ingest(context.Background(), r, smtpTo(dom.ReportingEmail))
			if err != nil {
				t.Fatal(err)
			}
			if c.reason == "" {
				if res.Quarantined != "" || len(res.Reports) != 1 || res.Reports[0].Duplicate {
					t.Fatalf("result %+v, want one report stored", res)
				}
				got, err := e.db.FindFailureReport(e.org.ID, res.Reports[0].ReportID)
				if err != nil {
					t.Fatal(err)
				}
				c.check(t, got.FailureReport)
				return
			}
			if res.Quarantined == "" || !strings.Contains(res.Reason, c.reason) {
				t.Fatalf("result %+v, want quarantined for %q", res, c.reason)
			}
			_, raw, err := e.db.FindQuarantine(res.Quarantined)
			if err != nil || !bytes.Equal(raw, c.mail) {
				t.Errorf("quarantine keeps %d bytes (%v), want the %d of the mail", len(raw), err, len(c.mail))
			}
		})
	}
}

// TestFailureTooLargeToReread ensures an input that cannot be read again
// (not seekable, larger than what is kept) is quarantined with that reason
// instead of parsed from a truncated copy.
func TestFailureTooLargeToReread(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.QuarantineMaxBytes = 512 })
	dom := e.domain(t, "example.com")
	mail := arfMail(arfSpec{reportedDomain: "example.com", sourceIP: "192.0.2.1"})
	res, err := e.p.Ingest(context.Background(), noSeek{bytes.NewReader(mail)}, smtpTo(dom.ReportingEmail))
	if err != nil {
		t.Fatal(err)
	}
	if res.Quarantined == "" || !strings.Contains(res.Reason, "too large to be read again") {
		t.Errorf("result %+v", res)
	}
	// A seekable copy of the same mail is read again whatever its size.
	if res := e.ingest(t, mail, smtpTo(dom.ReportingEmail)); len(res.Reports) != 1 {
		t.Errorf("seekable: %+v", res)
	}
}

// failReader fails after its data, as a broken connection would.
type failReader struct {
	r    io.Reader
	fail bool
}

func (f *failReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF && f.fail {
		return n, errors.New("connection reset")
	}
	return n, err
}

// TestFailureReaderError ensures a reader that fails makes the input fail
// (SMTP answers 451 and the sender retries) rather than be quarantined.
func TestFailureReaderError(t *testing.T) {
	e := newEnv(t, nil)
	dom := e.domain(t, "example.com")
	mail := arfMail(arfSpec{reportedDomain: "example.com", sourceIP: "192.0.2.1"})
	if _, err := e.p.Ingest(context.Background(), &failReader{r: bytes.NewReader(mail), fail: true}, smtpTo(dom.ReportingEmail)); err == nil {
		t.Fatal("no error for a failing reader")
	}
	if n := countKeys(t, e.db, "quarantine"); n != 0 || len(failuresOf(t, e.db, e.org.ID)) != 0 {
		t.Errorf("%d quarantined, some stored, after a reader error", n)
	}
}

// TestFailureRetryQuarantine ensures a failure report quarantined because
// its domain was not registered yet is stored by a retry once it is.
func TestFailureRetryQuarantine(t *testing.T) {
	e := newEnv(t, nil)
	res := e.ingest(t, arfMail(arfSpec{reportedDomain: "late.example", sourceIP: "192.0.2.1"}), importOf("late.eml"))
	if res.Quarantined == "" {
		t.Fatalf("%+v", res)
	}
	e.domain(t, "late.example")
	res, err := e.p.RetryQuarantine(context.Background(), res.Quarantined)
	if err != nil || len(res.Reports) != 1 || res.Quarantined != "" {
		t.Fatalf("retry: %+v %v", res, err)
	}
	if n := countKeys(t, e.db, "quarantine"); n != 0 {
		t.Errorf("%d quarantine entries left", n)
	}
}

// TestFailureWithoutArrivalDateStoredOnce ensures a failure report without
// Arrival-Date (OpenDMARC's, the DMARCbis example's) is stored once however
// often and by whichever way it comes: imported twice seconds apart, then
// delivered by mail an hour later (issue 24). Its identity is the report
// mail's Date, which also stands in for the arrival date; a copy without
// Date is told by its content, once too, and a report of the same message
// sent at another time is another report.
func TestFailureWithoutArrivalDateStoredOnce(t *testing.T) {
	for _, c := range []struct {
		file    string
		date    time.Time // of the report mail
		ip, dom string
	}{
		{"opendmarc.eml", time.Date(2024, 9, 3, 12, 7, 12, 0, time.UTC), "198.51.100.23", "example.com"},
		{"dmarcbis.eml", time.Date(2022, 7, 19, 5, 57, 48, 0, time.UTC), "192.0.2.2", "example.com"},
	} {
		t.Run(c.file, func(t *testing.T) {
			e := newEnv(t, nil)
			dom := e.domain(t, c.dom)
			raw := mustReadFile(t, filepath.Join("..", "testdata", "failure", c.file))
			at := storetest.Epoch()
			first := e.ingest(t, raw, Arrival{Source: SourceImport, Name: c.file, ReceivedAt: at})
			if len(first.Reports) != 1 || first.Reports[0].Duplicate {
				t.Fatalf("first import: %+v", first)
			}
			for i, d := range []Arrival{
				{Source: SourceImport, Name: c.file, ReceivedAt: at.Add(7 * time.Second)},
				{Source: SourceSMTP, Recipient: dom.ReportingEmail, Name: "smtp", ReceivedAt: at.Add(time.Hour)},
			} {
				res := e.ingest(t, raw, d)
				if len(res.Reports) != 1 || !res.Reports[0].Duplicate || res.Reports[0].ReportID != first.Reports[0].ReportID {
					t.Errorf("again (%d, %s): %+v, want a duplicate of %s", i, d.Source, res, first.Reports[0].ReportID)
				}
			}
			got, err := e.db.FindFailureReport(e.org.ID, first.Reports[0].ReportID)
			if err != nil {
				t.Fatal(err)
			}
			if !got.ArrivalDate.Equal(c.date) || str(got.SourceIP) != c.ip {
				t.Errorf("arrival %v source %s, want the report's Date %v and %s", got.ArrivalDate, str(got.SourceIP), c.date, c.ip)
			}

			// Without a Date: the content tells it apart, the same each time.
			noDate := dropHeader(t, raw, "Date")
			a := e.ingest(t, noDate, Arrival{Source: SourceImport, Name: "nodate", ReceivedAt: at.Add(time.Minute)})
			b := e.ingest(t, noDate, Arrival{Source: SourceImport, Name: "nodate", ReceivedAt: at.Add(2 * time.Minute)})
			if len(a.Reports) != 1 || a.Reports[0].Duplicate || len(b.Reports) != 1 || !b.Reports[0].Duplicate {
				t.Errorf("without Date: %+v then %+v, want stored then a duplicate", a, b)
			}
			// The reporter reporting the same message again, later: another report.
			later := bytes.Replace(raw, []byte("Date: "), []byte("Date: Wed, 20 Jul 2022 10:00:00 +0000\nX-Old-Date: "), 1)
			if res := e.ingest(t, later, Arrival{Source: SourceImport, Name: "later"}); len(res.Reports) != 1 || res.Reports[0].Duplicate {
				t.Errorf("a later report of the same message: %+v, want stored", res)
			}
			if n := len(failuresOf(t, e.db, e.org.ID)); n != 3 {
				t.Errorf("%d failure reports stored, want 3", n)
			}
		})
	}
}

// dropHeader removes the top-level header field name (the first one) from
// a mail.
func dropHeader(t *testing.T, raw []byte, name string) []byte {
	t.Helper()
	lines := strings.SplitAfter(string(raw), "\n")
	for i, l := range lines {
		if l == "\n" || l == "\r\n" {
			break
		}
		if strings.HasPrefix(strings.ToLower(l), strings.ToLower(name)+":") {
			return []byte(strings.Join(append(lines[:i:i], lines[i+1:]...), ""))
		}
	}
	t.Fatalf("no %s field", name)
	return nil
}

// TestFailureAuthFailureKinds ensures the DKIM failure kinds of RFC 6591
// (bodyhash, revoked, signature, adsp) are kept as the report gave them,
// beside their family (dkim), which the filters and counts go by.
func TestFailureAuthFailureKinds(t *testing.T) {
	e := newEnv(t, nil)
	e.domain(t, "example.com")
	for i, c := range []struct {
		sent           string
		family, detail []string
	}{
		{"bodyhash", []string{"dkim"}, []string{"bodyhash"}},
		{"revoked, spf", []string{"spf", "dkim"}, []string{"revoked", "spf"}},
		{"dmarc", []string{"dmarc"}, []string{"dmarc"}},
	} {
		res := e.ingest(t, arfMail(arfSpec{reportedDomain: "example.com", sourceIP: "192.0.2.9", authFailure: c.sent,
			messageID: fmt.Sprintf("kind-%d@evil.test", i), arrival: "Mon, 16 Nov 2026 10:00:00 +0100"}), importOf(c.sent))
		if len(res.Reports) != 1 {
			t.Fatalf("%s: %+v", c.sent, res)
		}
		got, err := e.db.FindFailureReport(e.org.ID, res.Reports[0].ReportID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.AuthFailure, c.family) || !reflect.DeepEqual(got.AuthFailureReported, c.detail) {
			t.Errorf("Auth-Failure %s: stored %v reported %v, want %v and %v", c.sent, got.AuthFailure, got.AuthFailureReported, c.family, c.detail)
		}
	}
	dkim, _, err := e.db.ListFailureReports(e.org.ID, store.FailureFilter{AuthFailure: "dkim", Page: store.Page{Page: 1, Limit: 10}})
	if err != nil || len(dkim) != 2 {
		t.Errorf("filter dkim: %d reports (%v), want bodyhash and revoked", len(dkim), err)
	}
}
