package imap_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/dmarcd/dmarcd/ingest"
	imapin "github.com/dmarcd/dmarcd/ingest/imap"
	"github.com/dmarcd/dmarcd/ingest/ingesttest"
	"github.com/dmarcd/dmarcd/internal/imaptest"
	"github.com/dmarcd/dmarcd/internal/mailtest"
	"github.com/dmarcd/dmarcd/internal/reportgen"
	"github.com/dmarcd/dmarcd/internal/secret"
	"github.com/dmarcd/dmarcd/metrics"
	"github.com/dmarcd/dmarcd/store"
)

// failureMail is an RFC 6591 failure report about domain.
func failureMail(domain, msgID string) []byte {
	fb := "Feedback-Type: auth-failure\r\nVersion: 1\r\nSource-IP: 192.0.2.7\r\nReported-Domain: " + domain +
		"\r\nAuth-Failure: dmarc\r\nArrival-Date: Thu, 13 Jun 2024 10:00:00 +0000\r\n"
	orig := "From: <ceo@" + domain + ">\r\nSubject: Invoice\r\nMessage-ID: <" + msgID + ">\r\n\r\nbody\r\n"
	return []byte("From: dmarc@reporter.test\r\nTo: ruf@" + domain + "\r\nSubject: failure report\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/report; report-type=feedback-report; boundary=\"rr\"\r\n\r\n" +
		mailtest.Multipart("rr", "Content-Type: text/plain\r\n\r\nA failure report.",
			"Content-Type: message/feedback-report\r\n\r\n"+fb, "Content-Type: message/rfc822\r\n\r\n"+orig))
}

// brokenReportMail looks like a report mail but its gzip is corrupt.
func brokenReportMail() []byte {
	return []byte("From: noreply-dmarc-support@google.com\r\nSubject: Report domain: example.com\r\nMessage-ID: <broken@test>\r\n" +
		"MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b\"\r\n\r\n" +
		mailtest.Multipart("b", "Content-Type: text/plain\r\n\r\nreport",
			"Content-Type: application/gzip; name=r.xml.gz\r\nContent-Transfer-Encoding: base64\r\n\r\n"+
				mailtest.Base64([]byte("\x1f\x8b\x08\x00 not deflate at all"))))
}

// TestPipelineSink reads a mailbox through the real pipeline: reports are
// stored in the mailbox's organization and moved, a broken report is
// quarantined and moved, ordinary mail stays with its flags, and a second
// poll after a lost mark stores nothing twice.
func TestPipelineSink(t *testing.T) {
	env := ingesttest.New(t, "acme/example.com/dmarc", "other/other.test/rua")
	acme := env.Orgs["acme"]
	srv := imaptest.NewServer(t)
	report, _ := ingesttest.ReportMail("noreply-dmarc-support@google.com", "dmarc@example.com", 1, 5, reportgen.Options{})
	foreign, _ := ingesttest.ReportMail("noreply-dmarc-support@google.com", "dmarc@example.com", 2, 5, reportgen.Options{Domain: "other.test"})
	srv.Append("INBOX", report)
	srv.Append("INBOX", []byte("From: boss@example.com\r\nSubject: lunch\r\nMessage-ID: <l@test>\r\n\r\nAt noon?\r\n"), imap.FlagFlagged)
	srv.Append("INBOX", failureMail("example.com", "f1@test"))
	srv.Append("INBOX", brokenReportMail())
	srv.Append("INBOX", foreign)

	reg := metrics.NewRegistry()
	met := imapin.NewMetrics(reg)
	sink := imapin.PipelineSink{Pipeline: env.Pipeline, Metrics: met}
	box, err := secret.LoadOrCreate(secret.KeyPath(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	m := &store.Mailbox{OrgID: acme.ID, Host: "127.0.0.1", Port: srv.Port, Security: "tls", Username: imaptest.User,
		Auth: "password", Folder: "INBOX", ArchiveFolder: "Archive"}
	creds := imapin.Credentials{Password: imaptest.Pass}
	sealed, _ := imapin.SealCredentials(box, creds)
	if err := env.DB.CreateMailbox(m, sealed); err != nil {
		t.Fatal(err)
	}
	dir := imapin.StoreDirectory{DB: env.DB, Box: box, Metrics: met}
	opts := &imapin.Options{AllowPrivate: true, RootCAs: srv.Cert.Pool, Timeout: 10 * time.Second}
	entry := imapin.Entry{Mailbox: imapin.Mailbox{ID: m.ID, OrgID: acme.ID}, Account: imapin.Account{
		Host: "127.0.0.1", Port: srv.Port, Security: "tls", Username: imaptest.User, Credentials: creds,
		Folder: "INBOX", ArchiveFolder: "Archive"}}

	res, err := imapin.PollOnce(context.Background(), entry, sink, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := dir.RecordPoll(m.ID, time.Now(), res, err); err != nil {
		t.Fatal(err)
	}
	want := imapin.PollResult{Messages: 5, Aggregate: 1, Failure: 1, Quarantined: 2, NotReports: 1, Imported: 4, Errors: []string{}}
	if fmt.Sprint(res) != fmt.Sprint(want) {
		t.Errorf("poll = %+v, want %+v", res, want)
	}
	if n := srv.Count("INBOX"); n != 1 {
		t.Errorf("INBOX holds %d, want the one ordinary mail", n)
	}
	if n := srv.Count("Archive"); n != 4 {
		t.Errorf("Archive holds %d, want 4", n)
	}
	if reps := env.Reports(t, "dmarc@reports.test"); len(reps) != 1 {
		t.Errorf("acme has %d reports, want 1", len(reps))
	}
	if reps := env.Reports(t, "rua@reports.test"); len(reps) != 0 {
		t.Errorf("the other organization got %d reports from acme's mailbox", len(reps))
	}
	fails, _, err := env.DB.ListFailureReports(acme.ID, store.FailureFilter{Page: store.Page{Page: 1, Limit: 10}})
	if err != nil || len(fails) != 1 {
		t.Errorf("failure reports: %d, %v", len(fails), err)
	}
	q := env.Quarantine(t)
	if len(q) != 2 {
		t.Fatalf("quarantine holds %d, want 2", len(q))
	}
	for _, e := range q {
		if e.Source != "imap" || e.OrgID != acme.ID || !strings.HasPrefix(e.Name, "imap ") {
			t.Errorf("quarantine entry %+v", e)
		}
	}
	got, _ := env.DB.FindMailbox(acme.ID, m.ID)
	if got.MessagesImported != 4 || got.LastError != nil || got.LastPollAt == nil {
		t.Errorf("status: imported %d, error %v, polled %v", got.MessagesImported, got.LastError, got.LastPollAt)
	}
	var text strings.Builder
	_ = reg.WriteText(&text)
	for _, line := range []string{`dmarcd_imap_messages_total{outcome="report"} 2`, `dmarcd_imap_messages_total{outcome="quarantined"} 2`,
		`dmarcd_imap_messages_total{outcome="not_report"} 1`, `dmarcd_imap_polls_total{result="ok"} 1`} {
		if !strings.Contains(text.String(), line) {
			t.Errorf("metrics lack %s:\n%s", line, text.String())
		}
	}

	// A crash between store and move: the reports are back in the folder
	// and the mark is lost. Reading them again stores nothing twice.
	srv.Append("INBOX", report)
	srv.Append("INBOX", failureMail("example.com", "f1@test"))
	if err := env.DB.MarkMailboxDone(m.ID, store.MailboxState{}, 0); err != nil {
		t.Fatal(err)
	}
	res, err = imapin.PollOnce(context.Background(), entry, sink, dir, opts)
	if err != nil || res.Aggregate != 1 || res.Failure != 1 || res.NotReports != 1 {
		t.Errorf("second poll = %+v, %v", res, err)
	}
	if reps := env.Reports(t, "dmarc@reports.test"); len(reps) != 1 {
		t.Errorf("after a re-read acme has %d reports, want 1", len(reps))
	}
	if fails, _, _ := env.DB.ListFailureReports(acme.ID, store.FailureFilter{Page: store.Page{Page: 1, Limit: 10}}); len(fails) != 1 {
		t.Errorf("after a re-read %d failure reports, want 1", len(fails))
	}
	if n := srv.Count("INBOX"); n != 1 {
		t.Errorf("INBOX holds %d after the re-read, want 1", n)
	}
}

// A stopped pipeline is an error: the message stays, nothing is counted
// as done.
func TestPipelineSinkStopped(t *testing.T) {
	env := ingesttest.New(t, "acme/example.com/dmarc")
	env.Stop()
	report, _ := ingesttest.ReportMail("a@b", "dmarc@example.com", 1, 2, reportgen.Options{})
	_, err := imapin.PipelineSink{Pipeline: env.Pipeline}.Ingest(context.Background(), env.Orgs["acme"].ID, report)
	if err == nil || !strings.Contains(err.Error(), ingest.ErrStopped.Error()) {
		t.Errorf("err = %v, want ErrStopped", err)
	}
}
