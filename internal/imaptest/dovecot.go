package imaptest

import (
	"bytes"
	"crypto/tls"
	"errors"
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
)

// Dovecot is a real Dovecot serving implicit TLS on a loopback port, run
// from a temporary directory as an unprivileged process (as nobody when
// the tests run as root), with its default Maildir++ layout: the
// hierarchy separator is ".".
type Dovecot struct {
	Port int
	Cert *Cert // trusted through Cert.Pool
	Dir  string
}

// StartDovecot starts Dovecot with the user User (password Pass) and stops
// it when the test ends; the test is skipped when dovecot is not installed.
func StartDovecot(tb testing.TB) *Dovecot {
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
	cert := NewCert(tb)
	certFile, keyFile := cert.WriteFiles(tb, dir)
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
# Dovecot's default Maildir++ layout, said out loud: folders are levels
# separated by "." (Archive.dmarcd), and a name with "/" is refused.
namespace inbox {
  inbox = yes
  separator = .
}
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
	files := map[string]string{"dovecot.conf": conf, "passwd": User + ":{PLAIN}" + Pass + "\n"}
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
	return &Dovecot{Port: port, Cert: cert, Dir: dir}
}

// Client signs in with go-imap directly, to fill and inspect the mailbox;
// it is closed when the test ends.
func (d *Dovecot) Client(tb testing.TB) *imapclient.Client {
	tb.Helper()
	c, err := imapclient.DialTLS(net.JoinHostPort("127.0.0.1", strconv.Itoa(d.Port)),
		&imapclient.Options{TLSConfig: &tls.Config{RootCAs: d.Cert.Pool, ServerName: "127.0.0.1"}})
	if err != nil {
		tb.Fatal(err)
	}
	if err := c.Login(User, Pass).Wait(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// AppendTo appends raw to INBOX with flags.
func AppendTo(tb testing.TB, c *imapclient.Client, raw []byte, flags ...imap.Flag) {
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

// CountIn is the number of messages in mailbox (0 when it does not exist).
func CountIn(tb testing.TB, c *imapclient.Client, mailbox string) int {
	tb.Helper()
	st, err := c.Status(mailbox, &imap.StatusOptions{NumMessages: true}).Wait()
	if err != nil {
		var ie *imap.Error
		if errors.As(err, &ie) && ie.Code == imap.ResponseCodeNonExistent || strings.Contains(err.Error(), "NONEXISTENT") || strings.Contains(err.Error(), "doesn't exist") {
			return 0
		}
		tb.Fatal(err)
	}
	return int(*st.NumMessages)
}
