package imap_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

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
