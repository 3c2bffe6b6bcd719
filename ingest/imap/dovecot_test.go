package imap_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	imapin "github.com/dmarcd/dmarcd/ingest/imap"
	"github.com/dmarcd/dmarcd/internal/secret"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// dovecot is a real Dovecot serving implicit TLS on a loopback port, run
// from a temporary directory as an unprivileged process (as nobody when
// the tests run as root).
type dovecot struct {
	port int
	cert *testCert
}

func startDovecot(tb testing.TB) *dovecot {
	tb.Helper()
	bin, err := exec.LookPath("dovecot")
	if err != nil {
		for _, p := range []string{"/usr/sbin/dovecot", "/sbin/dovecot"} {
			if _, serr := os.Stat(p); serr == nil {
				bin, err = p, nil
			}
		}
	}
	if err != nil {
		tb.Skip("dovecot not installed (apt-get install dovecot-imapd); skipping the real-server test")
	}
	dir, err := os.MkdirTemp("", "dmarcd-dovecot-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	u, err := user.Current()
	if err != nil {
		tb.Fatal(err)
	}
	var cred *syscall.Credential
	runUser, runGroup := u.Username, ""
	if os.Geteuid() == 0 {
		nobody, err := user.Lookup("nobody")
		if err != nil {
			tb.Skip("running as root and there is no user nobody to run dovecot as")
		}
		uid, _ := strconv.Atoi(nobody.Uid)
		gid, _ := strconv.Atoi(nobody.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		runUser = "nobody"
		if err := os.Chmod(dir, 0o777); err != nil {
			tb.Fatal(err)
		}
	}
	if g, err := user.LookupGroupId(strconv.Itoa(os.Getegid())); err == nil && cred == nil {
		runGroup = g.Name
	} else if cred != nil {
		if g, err := user.LookupGroupId(strconv.Itoa(int(cred.Gid))); err == nil {
			runGroup = g.Name
		}
	}
	cert := newCert(tb)
	certFile, keyFile := cert.writeFiles(tb, dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	for _, d := range []string{"run", "mail"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o777); err != nil {
			tb.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, d), 0o777); err != nil { // past the umask
			tb.Fatal(err)
		}
	}
	conf := fmt.Sprintf(`base_dir = %[1]s/run
state_dir = %[1]s/run
log_path = %[1]s/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = required
ssl_cert = <%[2]s
ssl_key = <%[3]s
default_internal_user = %[4]s
default_internal_group = %[5]s
default_login_user = %[4]s
auth_mechanisms = plain
passdb {
  driver = passwd-file
  args = scheme=PLAIN username_format=%%u %[1]s/passwd
}
userdb {
  driver = static
  args = uid=%[4]s gid=%[5]s home=%[1]s/mail/%%u
}
mail_location = maildir:%[1]s/mail/%%u/Maildir
service imap-login {
  chroot =
  inet_listener imap {
    port = 0
  }
  inet_listener imaps {
    port = %[6]d
    ssl = yes
  }
}
service anvil {
  chroot =
}
`, dir, certFile, keyFile, runUser, runGroup, port)
	files := map[string]string{"dovecot.conf": conf, "passwd": testUser + ":{PLAIN}" + testPass + "\n"}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	for _, f := range []string{certFile, keyFile} {
		_ = os.Chmod(f, 0o644)
	}
	cmd := exec.Command(bin, "-F", "-c", filepath.Join(dir, "dovecot.conf"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start dovecot: %v", err)
	}
	tb.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		_ = cmd.Wait()
	})
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			c.Close()
			break
		}
		if i > 200 {
			log, _ := os.ReadFile(filepath.Join(dir, "dovecot.log"))
			tb.Fatalf("dovecot did not start listening: %s\n%s", out.String(), log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return &dovecot{port: port, cert: cert}
}

// client signs in with go-imap directly, to fill and inspect the mailbox.
func (d *dovecot) client(tb testing.TB) *imapclient.Client {
	tb.Helper()
	c, err := imapclient.DialTLS(net.JoinHostPort("127.0.0.1", strconv.Itoa(d.port)),
		&imapclient.Options{TLSConfig: &tls.Config{RootCAs: d.cert.pool, ServerName: "127.0.0.1"}})
	if err != nil {
		tb.Fatal(err)
	}
	if err := c.Login(testUser, testPass).Wait(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

func appendTo(tb testing.TB, c *imapclient.Client, raw []byte, flags ...imap.Flag) {
	tb.Helper()
	cmd := c.Append("INBOX", int64(len(raw)), &imap.AppendOptions{Flags: flags})
	if _, err := cmd.Write(raw); err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Close(); err != nil {
		tb.Fatal(err)
	}
	if _, err := cmd.Wait(); err != nil {
		tb.Fatal(err)
	}
}

func countIn(tb testing.TB, c *imapclient.Client, mailbox string) int {
	tb.Helper()
	st, err := c.Status(mailbox, &imap.StatusOptions{NumMessages: true}).Wait()
	if err != nil {
		if strings.Contains(err.Error(), "NONEXISTENT") {
			return 0
		}
		tb.Fatal(err)
	}
	return int(*st.NumMessages)
}

func dovecotEnv(tb testing.TB, d *dovecot) (imapin.Account, imapin.Mailbox, imapin.StoreDirectory, *imapin.Options) {
	tb.Helper()
	db := storetest.Open(tb)
	org := storetest.MustOrganization(tb, db, "acme", store.PlanBusiness)
	box, err := secret.LoadOrCreate(secret.KeyPath(tb.TempDir()))
	if err != nil {
		tb.Fatal(err)
	}
	acct := imapin.Account{Host: "127.0.0.1", Port: d.port, Security: "tls", Username: testUser,
		Credentials: imapin.Credentials{Password: testPass}, Folder: "INBOX", ArchiveFolder: "Archive"}
	sealed, _ := imapin.SealCredentials(box, acct.Credentials)
	m := &store.Mailbox{OrgID: org.ID, Host: "127.0.0.1", Port: d.port, Security: "tls", Username: testUser,
		Auth: "password", Folder: "INBOX", ArchiveFolder: "Archive"}
	if err := db.CreateMailbox(m, sealed); err != nil {
		tb.Fatal(err)
	}
	opts := &imapin.Options{AllowPrivate: true, RootCAs: d.cert.pool, Timeout: 10 * time.Second}
	return acct, imapin.Mailbox{ID: m.ID, OrgID: org.ID}, imapin.StoreDirectory{DB: db, Box: box}, opts
}

// TestDovecot runs the safe-fetching rules against a real Dovecot.
func TestDovecot(t *testing.T) {
	d := startDovecot(t)
	admin := d.client(t)
	for i, kind := range []string{"xml", "other", "gz", "zip", "failure"} {
		if kind == "other" {
			appendTo(t, admin, reportMail(kind, i), imap.FlagFlagged)
		} else {
			appendTo(t, admin, reportMail(kind, i))
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
	if n := countIn(t, admin, "Archive"); n != 4 {
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
	d := startDovecot(b)
	admin := d.client(b)
	acct, mb, dir, opts := dovecotEnv(b, d)
	const n = 1000
	total := 0
	for b.Loop() {
		b.StopTimer()
		for i := range n {
			appendTo(b, admin, reportMail("gz", i))
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
