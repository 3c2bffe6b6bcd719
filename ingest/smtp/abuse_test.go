package smtp

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/smtp"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/ingest/ingesttest"
	"github.com/dmarcd/dmarcd/internal/reportgen"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// oneLineReportMail is a report mail whose XML attachment is sent as is,
// 8bit, on one line, as some reporters do.
func oneLineReportMail(t *testing.T, minSize int) ([]byte, reportgen.Stats) {
	t.Helper()
	var xml bytes.Buffer
	stats, _ := reportgen.WriteReport(&xml, 11, minSize/150, reportgen.Options{Domain: "example.com"})
	line := bytes.ReplaceAll(xml.Bytes(), []byte("\n"), nil)
	if len(line) < minSize {
		t.Fatalf("report line is %d bytes, want %d", len(line), minSize)
	}
	var b bytes.Buffer
	b.WriteString("From: r@sender.test\r\nTo: abc@reports.test\r\nSubject: Report domain: example.com\r\nMIME-Version: 1.0\r\n")
	b.WriteString("Content-Type: text/xml; name=\"report.xml\"\r\nContent-Transfer-Encoding: 8bit\r\n\r\n")
	b.Write(line)
	b.WriteString("\r\n")
	return b.Bytes(), stats
}

// rawConn is a client speaking SMTP by hand.
type rawConn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, local, addr string) *rawConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, br: bufio.NewReader(c)}
}

// reply reads one (possibly multi-line) reply and returns its last line.
func (r *rawConn) reply() string {
	r.t.Helper()
	_ = r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		line, err := r.br.ReadString('\n')
		if err != nil {
			return "error: " + err.Error()
		}
		if len(line) < 4 || line[3] != '-' {
			return strings.TrimRight(line, "\r\n")
		}
	}
}

func (r *rawConn) cmd(s string) string {
	r.t.Helper()
	fmt.Fprintf(r.c, "%s\r\n", s)
	return r.reply()
}

// TestSMTPStoresOneLineReport ensures a report whose XML is one 300 KB
// line (over the former 64 KiB line limit, which answered 451 forever) is
// stored, and the reply says what was stored.
func TestSMTPStoresOneLineReport(t *testing.T) {
	env := ingesttest.New(t, "acme/example.com/abc")
	addr, _ := startSMTP(t, env, Config{})
	msg, stats := oneLineReportMail(t, 300<<10)
	c := dialRaw(t, "127.0.0.1", addr)
	if l := c.reply(); !strings.HasPrefix(l, "220 ") {
		t.Fatalf("greeting %q", l)
	}
	for _, cmd := range []string{"EHLO sender.test", "MAIL FROM:<r@sender.test>", "RCPT TO:<abc@reports.test>"} {
		if l := c.cmd(cmd); !strings.HasPrefix(l, "250 ") {
			t.Fatalf("%s: %q", cmd, l)
		}
	}
	if l := c.cmd("DATA"); !strings.HasPrefix(l, "354 ") {
		t.Fatalf("DATA: %q", l)
	}
	c.c.Write(msg)
	if l := c.cmd("."); l != "250 2.0.0 stored: 1 aggregate report" {
		t.Errorf("reply %q, want 250 2.0.0 stored: 1 aggregate report", l)
	}
	reps := env.Reports(t, "abc@reports.test")
	if len(reps) != 1 || reps[0].RecordCount != stats.Records {
		t.Fatalf("%d reports stored, want 1 of %d records", len(reps), stats.Records)
	}
	// The same again is a duplicate, and says so.
	send2 := dial(t, addr)
	if err := send(send2, "r@sender.test", []string{"abc@reports.test"}, msg); err != nil {
		t.Fatal(err)
	}
	if len(env.Reports(t, "abc@reports.test")) != 1 {
		t.Error("duplicate stored twice")
	}
}

// TestSMTPCommandLineLimit ensures a command line over 64 KiB is refused
// with a permanent 500 and the connection closed, also after DATA was
// refused for want of a recipient, while message lines are not limited by it.
func TestSMTPCommandLineLimit(t *testing.T) {
	env := ingesttest.New(t, "acme/example.com/abc")
	addr, _ := startSMTP(t, env, Config{})
	long := "NOOP " + strings.Repeat("x", 70<<10)
	for _, prelude := range [][]string{{"EHLO sender.test"}, {"EHLO sender.test", "MAIL FROM:<a@b.test>", "DATA"}} {
		c := dialRaw(t, "127.0.0.1", addr)
		c.reply()
		for _, p := range prelude {
			c.cmd(p)
		}
		if l := c.cmd(long); !strings.HasPrefix(l, "500 ") {
			t.Errorf("after %v: long command got %q, want 500", prelude, l)
		}
		if l, err := c.br.ReadString('\n'); err == nil {
			t.Errorf("connection not closed after the long line: read %q", l)
		}
	}
}

// TestSMTPPerIPLimit ensures 20 idle connections from one address take
// at most MaxConnsPerIP slots (the rest get 421 4.7.0, a temporary
// refusal) while a second address is still served.
func TestSMTPPerIPLimit(t *testing.T) {
	if c, err := net.Listen("tcp", "127.0.0.2:0"); err != nil {
		t.Skipf("127.0.0.2 is not a loopback address here: %v", err)
	} else {
		c.Close()
	}
	env := ingesttest.New(t, "acme/example.com/abc")
	addr, _ := startSMTP(t, env, Config{})
	var idle []*rawConn
	refused := 0
	for range 20 {
		c := dialRaw(t, "127.0.0.1", addr)
		switch l := c.reply(); {
		case strings.HasPrefix(l, "220 "):
			idle = append(idle, c)
		case strings.HasPrefix(l, "421 4.7.0"):
			refused++
		default:
			t.Fatalf("connection got %q", l)
		}
	}
	if len(idle) != DefaultMaxConnsPerIP || refused != 20-DefaultMaxConnsPerIP {
		t.Errorf("%d served, %d refused; want %d served", len(idle), refused, DefaultMaxConnsPerIP)
	}
	msg, _ := ingesttest.ReportMail("r@sender.test", "abc@reports.test", 3, 5, reportgen.Options{Domain: "example.com"})
	other := dialRaw(t, "127.0.0.2", addr)
	if l := other.reply(); !strings.HasPrefix(l, "220 ") {
		t.Fatalf("second address got %q", l)
	}
	other.c.Close()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := smtp.NewClient(nc, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := send(c, "r@sender.test", []string{"abc@reports.test"}, msg); err != nil {
		t.Fatalf("second address not served: %v", err)
	}
	if len(env.Reports(t, "abc@reports.test")) != 1 {
		t.Error("report from the second address not stored")
	}
	// The refusal is temporary: a freed slot serves the first address again.
	idle[0].cmd("QUIT")
	io.Copy(io.Discard, idle[0].br)
	again := dialRaw(t, "127.0.0.1", addr)
	if l := again.reply(); !strings.HasPrefix(l, "220 ") {
		t.Errorf("after a slot was freed: %q", l)
	}
}

// TestSMTPCommandTimeout ensures a client silent before its first command
// is told 421 after CommandTimeout, while a message body may pause longer
// than that (the long ReadTimeout applies) and is stored.
func TestSMTPCommandTimeout(t *testing.T) {
	env := ingesttest.New(t, "acme/example.com/abc")
	addr, _ := startSMTP(t, env, Config{CommandTimeout: 100 * time.Millisecond, ReadTimeout: time.Minute})
	idle := dialRaw(t, "127.0.0.1", addr)
	idle.reply()
	if l := idle.reply(); !strings.HasPrefix(l, "421 ") {
		t.Errorf("silent client got %q, want 421", l)
	}

	msg, _ := ingesttest.ReportMail("r@sender.test", "abc@reports.test", 5, 5, reportgen.Options{Domain: "example.com"})
	c := dialRaw(t, "127.0.0.1", addr)
	c.reply()
	for _, cmd := range []string{"HELO sender.test", "MAIL FROM:<r@sender.test>", "RCPT TO:<abc@reports.test>", "DATA"} {
		c.cmd(cmd)
	}
	half := len(msg) / 2
	c.c.Write(msg[:half])
	time.Sleep(400 * time.Millisecond) // well past CommandTimeout, inside a message
	c.c.Write(msg[half:])
	if l := c.cmd("."); !strings.HasPrefix(l, "250 2.0.0 stored: 1 aggregate report") {
		t.Errorf("message with a pause got %q", l)
	}
}

// TestSMTPReplyTexts ensures the 250 says what happened to the message.
func TestSMTPReplyTexts(t *testing.T) {
	env := ingesttest.New(t, "acme/example.com/abc")
	addr, _ := startSMTP(t, env, Config{})
	msg, _ := ingesttest.ReportMail("r@sender.test", "abc@reports.test", 6, 5, reportgen.Options{Domain: "example.com"})
	junk := []byte("From: x@y.test\r\nSubject: hello\r\n\r\nnot a report\r\n")
	for _, tc := range []struct {
		msg  []byte
		want string
	}{
		{msg, "250 2.0.0 stored: 1 aggregate report"},
		{msg, "250 2.0.0 already stored: 1 aggregate report"},
		{junk, "250 2.0.0 kept for review: "},
	} {
		c := dialRaw(t, "127.0.0.1", addr)
		c.reply()
		for _, cmd := range []string{"HELO sender.test", "MAIL FROM:<r@sender.test>", "RCPT TO:<abc@reports.test>", "DATA"} {
			c.cmd(cmd)
		}
		c.c.Write(tc.msg)
		if l := c.cmd("."); !strings.HasPrefix(l, tc.want) {
			t.Errorf("reply %q, want %q...", l, tc.want)
		}
	}
}

// TestSMTPQuarantineCap ensures ten 10 MB junk mails cannot fill the disk:
// with a 25 MB cap the quarantine keeps two whole, then headers only
// (still 250), and stays under the cap; once even a header does not fit
// the answer is 552, never a 4xx. (Under -race: 1 MB mails, 2.5 MB cap.)
func TestSMTPQuarantineCap(t *testing.T) {
	const capBytes = junkMB * 5 << 20 / 2
	env := ingesttest.NewWith(t, func(c *ingest.Config) { c.QuarantineTotalBytes = capBytes }, "acme/example.com/abc")
	addr, _ := startSMTP(t, env, Config{})
	body := bytes.Repeat([]byte("spam spam spam spam spam spam spam spam spam spam spam spam spam spam\r\n"), junkMB<<20/72)
	for i := range 10 {
		msg := append([]byte(fmt.Sprintf("From: x@junk.test\r\nSubject: offer %d\r\n\r\n", i)), body...)
		c := dial(t, addr)
		if err := send(c, "x@junk.test", []string{"abc@reports.test"}, msg); err != nil {
			t.Fatalf("junk %d: %v", i, err)
		}
		c.Quit()
	}
	if total := storetest.QuarantineBytes(t, env.DB); total > capBytes {
		t.Fatalf("quarantine holds %d bytes, cap %d", total, capBytes)
	}
	q := env.Quarantine(t)
	truncated := 0
	for _, e := range q {
		if e.Truncated {
			truncated++
		}
	}
	if len(q) != 10 || truncated != 8 {
		t.Errorf("%d entries, %d truncated; want 10 and 8", len(q), truncated)
	}
	// Full: nothing more fits, not even a header.
	env2 := ingesttest.NewWith(t, func(c *ingest.Config) { c.QuarantineTotalBytes = 10 }, "acme/example.com/abc")
	addr2, _ := startSMTP(t, env2, Config{})
	code, text := smtpCode(send(dial(t, addr2), "x@junk.test", []string{"abc@reports.test"}, []byte("Subject: hi\r\n\r\nhello\r\n")))
	if code != 552 || !strings.Contains(text, "quarantine") {
		t.Errorf("full quarantine: %d %q, want 552", code, text)
	}
}
