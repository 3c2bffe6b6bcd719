package imap_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/dmarcd/dmarcd/app"
	imapin "github.com/dmarcd/dmarcd/ingest/imap"
	"github.com/dmarcd/dmarcd/ingest/ingesttest"
	"github.com/dmarcd/dmarcd/internal/imaptest"
	"github.com/dmarcd/dmarcd/internal/reportgen"
	"github.com/dmarcd/dmarcd/internal/secret"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

func dovecotEnv(tb testing.TB, d *imaptest.Dovecot) (imapin.Account, imapin.Mailbox, imapin.StoreDirectory, *imapin.Options) {
	tb.Helper()
	db := storetest.Open(tb)
	org := storetest.MustOrganization(tb, db, "acme", store.PlanBusiness)
	return dovecotMailbox(tb, d, db, org.ID)
}

// dovecotMailbox registers the Dovecot test account as a mailbox of
// organization orgID in db.
func dovecotMailbox(tb testing.TB, d *imaptest.Dovecot, db *store.DB, orgID string) (imapin.Account, imapin.Mailbox, imapin.StoreDirectory, *imapin.Options) {
	tb.Helper()
	box, err := secret.LoadOrCreate(secret.KeyPath(tb.TempDir()))
	if err != nil {
		tb.Fatal(err)
	}
	acct := imapin.Account{Host: "127.0.0.1", Port: d.Port, Security: "tls", Username: imaptest.User,
		Credentials: imapin.Credentials{Password: imaptest.Pass}, Folder: "INBOX", ArchiveFolder: "Archive"}
	sealed, _ := imapin.SealCredentials(box, acct.Credentials)
	m := &store.Mailbox{OrgID: orgID, Host: "127.0.0.1", Port: d.Port, Security: "tls", Username: imaptest.User,
		Auth: "password", Folder: "INBOX", ArchiveFolder: "Archive"}
	if err := db.CreateMailbox(m, sealed); err != nil {
		tb.Fatal(err)
	}
	opts := &imapin.Options{AllowPrivate: true, RootCAs: d.Cert.Pool, Timeout: 10 * time.Second}
	return acct, imapin.Mailbox{ID: m.ID, OrgID: orgID}, imapin.StoreDirectory{DB: db, Box: box}, opts
}

// TestDovecot runs the safe-fetching rules against a real Dovecot.
func TestDovecot(t *testing.T) {
	d := imaptest.StartDovecot(t)
	admin := d.Client(t)
	for i, kind := range []string{"xml", "other", "gz", "zip", "failure"} {
		if kind == "other" {
			imaptest.AppendTo(t, admin, reportMail(kind, i), imap.FlagFlagged)
		} else {
			imaptest.AppendTo(t, admin, reportMail(kind, i))
		}
	}
	acct, mb, dir, opts := dovecotEnv(t, d)
	sink := newSink()
	poll := func() imapin.PollResult {
		c, err := imapin.Dial(context.Background(), acct, opts, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		res, err := c.Poll(context.Background(), mb, sink, dir)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := poll(); res.Messages != 5 || res.Imported != 4 || res.NotReports != 1 {
		t.Errorf("poll = %+v", res)
	}
	if n := imaptest.CountIn(t, admin, "Archive"); n != 4 {
		t.Errorf("archive holds %d, want 4", n)
	}
	if _, err := admin.Select("INBOX", &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		t.Fatal(err)
	}
	msgs, err := admin.Fetch(imap.SeqSetNum(1), &imap.FetchOptions{Flags: true}).Collect()
	if err != nil || len(msgs) != 1 || len(msgs[0].Flags) != 1 || msgs[0].Flags[0] != imap.FlagFlagged {
		t.Errorf("non-report left with flags %v (%v), want just \\Flagged", msgs, err)
	}
	if res := poll(); res.Messages != 0 {
		t.Errorf("second poll read %d", res.Messages)
	}
	acct.Credentials.Password = "wrong"
	err = imapin.Check(context.Background(), acct, opts)
	if !imapin.IsAuthFailure(err) || !strings.Contains(err.Error(), "AUTHENTICATIONFAILED") {
		t.Errorf("wrong password: %v", err)
	}
}

// BenchmarkDovecotImport fetches, hands over and moves 1,000 report mails
// from a real Dovecot, each mark persisted in bbolt before the next.
func BenchmarkDovecotImport(b *testing.B) {
	d := imaptest.StartDovecot(b)
	admin := d.Client(b)
	acct, mb, dir, opts := dovecotEnv(b, d)
	const n = 1000
	total := 0
	for b.Loop() {
		b.StopTimer()
		for i := range n {
			imaptest.AppendTo(b, admin, reportMail("gz", i))
		}
		b.StartTimer()
		c, err := imapin.Dial(context.Background(), acct, opts, nil)
		if err != nil {
			b.Fatal(err)
		}
		res, err := c.Poll(context.Background(), mb, newSink(), dir)
		c.Close()
		if err != nil || res.Imported != n {
			b.Fatalf("poll = %+v, %v", res, err)
		}
		total += n
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "mails/s")
}

// BenchmarkDovecotImportPipeline is issue 15's figure end to end: 1,000
// gzip report mails in a real Dovecot mailbox, each stored durably through
// the ingest pipeline (fsync'd group commit) before it is moved to the
// archive folder and its UID mark saved.
func BenchmarkDovecotImportPipeline(b *testing.B) {
	d := imaptest.StartDovecot(b)
	admin := d.Client(b)
	env := ingesttest.New(b, "acme/example.com/dmarc")
	acct, mb, dir, opts := dovecotMailbox(b, d, env.DB, env.Orgs["acme"].ID)
	sink := imapin.PipelineSink{Pipeline: env.Pipeline}
	const n = 1000
	total := 0
	for b.Loop() {
		b.StopTimer()
		for i := range n {
			mail, _ := ingesttest.ReportMail("noreply-dmarc-support@google.com", "dmarc@example.com", int64(total+i), 5, reportgen.Options{})
			imaptest.AppendTo(b, admin, mail)
		}
		b.StartTimer()
		c, err := imapin.Dial(context.Background(), acct, opts, nil)
		if err != nil {
			b.Fatal(err)
		}
		res, err := c.Poll(context.Background(), mb, sink, dir)
		c.Close()
		if err != nil || res.Imported != n || res.Aggregate != n {
			b.Fatalf("poll = %+v, %v", res, err)
		}
		total += n
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "mails/s")
}

// TestDovecotArchiveFolderMaildir runs the archive folder against Dovecot's
// default Maildir++ layout, whose hierarchy separator is "." and which
// refuses names with "/" (issue 24: the default Archive/dmarcd failed every
// move, each poll re-read the same mail and the rest was never read).
// Adding the mailbox creates Archive.dmarcd; a poll moves every report
// there, counted once each; an archive folder the server refuses is 422 on
// archive_folder with the server's words when the mailbox is changed; and
// when the server refuses a move all the same, the mail stays with its
// reports stored and the poll goes on to the others, never reading it
// again.
func TestDovecotArchiveFolderMaildir(t *testing.T) {
	d := imaptest.StartDovecot(t)
	admin := d.Client(t)
	db := storetest.Open(t)
	org := storetest.MustOrganization(t, db, "acme", store.PlanBusiness)
	box, err := secret.LoadOrCreate(secret.KeyPath(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	sink := newSink()
	in := &imapin.Intake{DB: db, Box: box, Sink: sink,
		Options: &imapin.Options{AllowPrivate: true, RootCAs: d.Cert.Pool, Timeout: 10 * time.Second}}
	svc := app.New(app.Config{Store: db, Mailboxes: in})
	op := app.Operator(org)
	ctx := context.Background()
	host, port, user, pass := "127.0.0.1", d.Port, imaptest.User, imaptest.Pass
	m, err := svc.CreateMailbox(ctx, op, app.MailboxSpec{Host: &host, Port: &port, Username: &user, Password: &pass})
	if err != nil {
		t.Fatalf("adding a mailbox with the default archive folder: %v", err)
	}
	if m.ArchiveFolder != "Archive/dmarcd" {
		t.Fatalf("archive folder %q, want the default", m.ArchiveFolder)
	}
	if l, err := admin.List("", "Archive.dmarcd", nil).Collect(); err != nil || len(l) != 1 {
		t.Errorf("Archive.dmarcd after adding the mailbox: %v, %v; want it created", l, err)
	}
	imported := func() int64 {
		got, err := db.FindMailbox(org.ID, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.MessagesImported
	}
	for i := range 3 {
		imaptest.AppendTo(t, admin, reportMail("xml", i))
	}
	res, err := svc.PollMailbox(ctx, op, m.ID)
	if err != nil || res.Messages != 3 || res.Aggregate != 3 || len(res.Errors) != 0 {
		t.Fatalf("poll = %+v, %v", res, err)
	}
	if n := imaptest.CountIn(t, admin, "Archive.dmarcd"); n != 3 || imaptest.CountIn(t, admin, "INBOX") != 0 || imported() != 3 {
		t.Errorf("Archive.dmarcd holds %d, INBOX %d, messages_imported %d; want 3, 0, 3", n, imaptest.CountIn(t, admin, "INBOX"), imported())
	}

	// A folder the server will not take is said when the mailbox changes.
	bad := "~dmarcd"
	_, err = svc.UpdateMailbox(ctx, op, m.ID, app.MailboxSpec{ArchiveFolder: &bad})
	var ae *app.Error
	if !errors.As(err, &ae) || ae.Kind != app.Invalid || len(ae.Fields) != 1 || ae.Fields[0].Field != "archive_folder" ||
		!strings.Contains(ae.Fields[0].Message, "Begins with '~'") {
		t.Errorf("archive folder %q: %v, want Invalid on archive_folder with the server's words", bad, err)
	}

	// The server refuses the move all the same (the folder set behind
	// the service's back): the mails are done, the poll goes on.
	if _, err := db.UpdateMailbox(org.ID, m.ID, store.MailboxUpdate{ArchiveFolder: &bad}); err != nil {
		t.Fatal(err)
	}
	for i := 3; i < 5; i++ {
		imaptest.AppendTo(t, admin, reportMail("xml", i))
	}
	res, err = svc.PollMailbox(ctx, op, m.ID)
	if err != nil || res.Messages != 2 || res.Aggregate != 2 || len(res.Errors) < 2 || !strings.Contains(strings.Join(res.Errors, " "), "left in the folder") {
		t.Fatalf("poll with a refused move = %+v, %v; want both mails read and the refusals listed", res, err)
	}
	if got, _ := db.FindMailbox(org.ID, m.ID); got.LastError == nil || !strings.Contains(*got.LastError, "~dmarcd") {
		t.Errorf("last_error %v, want the refused move named", got.LastError)
	}
	res, err = svc.PollMailbox(ctx, op, m.ID)
	if err != nil || res.Messages != 0 || len(res.Errors) != 0 {
		t.Errorf("the next poll = %+v, %v; want nothing read again", res, err)
	}
	if n, got := imaptest.CountIn(t, admin, "INBOX"), imported(); n != 2 || got != 5 || sink.count() != 5 {
		t.Errorf("INBOX holds %d, messages_imported %d, %d mails handed over; want 2, 5, 5", n, got, sink.count())
	}
}
