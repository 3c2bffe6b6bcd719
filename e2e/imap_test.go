package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/dmarcd/dmarcd/ingest/ingesttest"
	"github.com/dmarcd/dmarcd/internal/imaptest"
	"github.com/dmarcd/dmarcd/internal/reportgen"
)

// imapArgs are the serve flags that let dmarcd reach the test Dovecot;
// --retention 0 keeps the generated reports, which are dated in the past.
func imapArgs(t *testing.T, d *imaptest.Dovecot) []string {
	certFile, _ := d.Cert.WriteFiles(t, t.TempDir())
	return []string{"--imap-allow-private", "--imap-ca-file", certFile, "--smtp-listen", "", "--rate-limit", "100000", "--retention", "0"}
}

// imapWait polls cond until it holds or 60s pass.
func imapWait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 60s", what)
		}
	}
}

func inboxFlags(t *testing.T, d *imaptest.Dovecot) [][]imap.Flag {
	t.Helper()
	c := d.Client(t)
	defer c.Close()
	if _, err := c.Select("INBOX", &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		t.Fatal(err)
	}
	var all imap.SeqSet
	all.AddRange(1, 0) // 1:*
	msgs, err := c.Fetch(all, &imap.FetchOptions{Flags: true}).Collect()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]imap.Flag
	for _, m := range msgs {
		out = append(out, m.Flags)
	}
	return out
}

func countIn(t *testing.T, d *imaptest.Dovecot, mailbox string) int {
	t.Helper()
	c := d.Client(t)
	defer c.Close()
	return imaptest.CountIn(t, c, mailbox)
}

// TestIMAPIntake adds a mailbox of a real Dovecot through the API: its
// reports are stored and moved, other mail stays with its flags. Then the
// server is killed (SIGKILL) after a report is stored and before its mail
// is moved; after a restart nothing is lost and nothing stored twice.
func TestIMAPIntake(t *testing.T) {
	d := imaptest.StartDovecot(t)
	admin := d.Client(t)
	const from = "noreply-dmarc-support@google.com"
	for i := range 3 {
		msg, _ := ingesttest.ReportMail(from, "dmarc@example.com", int64(500+i), 5, reportgen.Options{Domain: "example.com", Begin: recentDay()})
		imaptest.AppendTo(t, admin, msg)
	}
	imaptest.AppendTo(t, admin, []byte("From: boss@example.com\r\nTo: dmarc@example.com\r\nSubject: lunch\r\n\r\nAt noon?\r\n"), imap.FlagFlagged)

	args := imapArgs(t, d)
	s := StartServer(t, Options{Args: args})
	key := s.Key
	domID, _ := s.CreateDomain("example.com")
	body := map[string]any{"host": "127.0.0.1", "port": d.Port, "security": "tls", "username": imaptest.User,
		"password": "wrong", "folder": "INBOX", "archive_folder": "Archive"}
	if r := s.Do("POST", "/api/v1/mailboxes", key, body); r.Status != http.StatusUnprocessableEntity ||
		r.ErrorCode(t) != "mailbox_unreachable" || !strings.Contains(string(r.Body), "AUTHENTICATIONFAILED") {
		t.Errorf("wrong password: %d %s", r.Status, r.Body)
	}
	body["password"] = imaptest.Pass
	m := s.Must(http.StatusCreated, "POST", "/api/v1/mailboxes", key, body)
	id := m["id"].(string)
	if strings.Contains(s.Stderr(), imaptest.Pass) {
		t.Error("the password is in the log")
	}

	imapWait(t, "3 reports moved to Archive", func() bool { return countIn(t, d, "Archive") == 3 })
	if _, total := s.Reports(domID); total != 3 {
		t.Errorf("%d reports stored, want 3", total)
	}
	if flags := inboxFlags(t, d); len(flags) != 1 || !slices.Equal(flags[0], []imap.Flag{imap.FlagFlagged}) {
		t.Errorf("INBOX after the import: %v, want the ordinary mail with just \\Flagged", flags)
	}
	imapWait(t, "the status", func() bool {
		mb := s.Must(http.StatusOK, "GET", "/api/v1/mailboxes/"+id, key, nil)
		return mb["messages_imported"] == 3.0 && mb["last_error"] == nil
	})
	// New mail arrives while the server IDLEs: stored within seconds.
	msg, _ := ingesttest.ReportMail(from, "dmarc@example.com", 600, 5, reportgen.Options{Domain: "example.com", Begin: recentDay()})
	imaptest.AppendTo(t, admin, msg)
	imapWait(t, "a report delivered during IDLE", func() bool { return countIn(t, d, "Archive") == 4 })
	if _, total := s.Reports(domID); total != 4 {
		t.Errorf("%d reports after IDLE delivery, want 4", total)
	}
	metrics := s.Do("GET", "/metrics", "", nil)
	if !strings.Contains(string(metrics.Body), `dmarcd_imap_messages_total{outcome="report"} 4`) {
		t.Errorf("metrics lack the imported mails")
	}
	s.Stop()

	// The crash: the next server stores a report, then waits before the
	// move (the test-only hook), and is killed there.
	msg, _ = ingesttest.ReportMail(from, "dmarc@example.com", 700, 5, reportgen.Options{Domain: "example.com", Begin: recentDay()})
	imaptest.AppendTo(t, admin, msg)
	s2 := StartServer(t, Options{DataDir: s.DataDir, Args: args, Env: []string{"DMARCD_TEST_IMAP_DELAY_AFTER_STORE=1h"}})
	s2.Key = key
	imapWait(t, "the fifth report stored", func() bool { _, n := s2.Reports(domID); return n == 5 })
	s2.Kill()
	CheckDatabase(t, s.DataDir)
	if n := countIn(t, d, "INBOX"); n != 2 {
		t.Fatalf("INBOX holds %d after the kill, want the ordinary mail and the stored but unmoved report", n)
	}

	s3 := StartServer(t, Options{DataDir: s.DataDir, Args: args})
	s3.Key = key
	imapWait(t, "the fifth report moved", func() bool { return countIn(t, d, "Archive") == 5 })
	if _, total := s3.Reports(domID); total != 5 {
		t.Errorf("%d reports after the restart, want 5 (nothing lost, nothing doubled)", total)
	}
	if flags := inboxFlags(t, d); len(flags) != 1 {
		t.Errorf("INBOX after the restart: %v", flags)
	}
	if _, err := os.Stat(filepath.Join(s.DataDir, "secret.key")); err != nil {
		t.Errorf("secret.key: %v", err)
	}
	out := MustCLI(t, "--data-dir", s.DataDir, "mailbox", "list", "--org", "default")
	if !strings.Contains(out.Stdout, id) || !strings.Contains(out.Stdout, "127.0.0.1:"+strconv.Itoa(d.Port)) {
		t.Errorf("mailbox list over the socket:\n%s", out.Stdout)
	}
	poll := MustCLI(t, "--data-dir", s.DataDir, "mailbox", "poll", "--org", "default", id)
	if !strings.Contains(poll.Stdout, "Read 0 mails") {
		t.Errorf("mailbox poll: %s", poll.Stdout)
	}
	backup := MustCLI(t, "--data-dir", s.DataDir, "backup", filepath.Join(t.TempDir(), "b.db"))
	if !strings.Contains(backup.Stdout, "secret.key") {
		t.Errorf("backup does not mention secret.key: %s", backup.Stdout)
	}
}
