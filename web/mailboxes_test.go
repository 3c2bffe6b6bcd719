package web_test

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/app"
	imapin "github.com/dmarcd/dmarcd/ingest/imap"
	"github.com/dmarcd/dmarcd/ingest/ingesttest"
	"github.com/dmarcd/dmarcd/internal/egress"
	"github.com/dmarcd/dmarcd/internal/imaptest"
	"github.com/dmarcd/dmarcd/internal/reportgen"
	"github.com/dmarcd/dmarcd/internal/secret"
	"github.com/dmarcd/dmarcd/store"
)

// mailboxEnv is env with the mailbox service the API uses (a real secret
// key, a running ingest pipeline) and go-imap's in-memory IMAP server.
func mailboxEnv(t *testing.T) (*env, *imaptest.Server, *app.App) {
	t.Helper()
	srv := imaptest.NewServer(t)
	box, err := secret.LoadOrCreate(secret.KeyPath(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	svc := &imapin.Intake{Box: box, Options: &imapin.Options{AllowPrivate: true, AllowPlaintext: true,
		RootCAs: srv.Cert.Pool, Timeout: 5 * time.Second}}
	e := newEnvWith(t, egress.Policy{}, func(c *app.Config) { c.Mailboxes = svc })
	svc.DB = e.db
	svc.Sink = imapin.PipelineSink{Pipeline: startPipeline(t, e.db, nil)}
	return e, srv, e.app
}

// mailboxForm is the add form for srv; extra are name, value pairs that
// replace fields.
func mailboxForm(token string, srv *imaptest.Server, extra ...string) url.Values {
	f := url.Values{"csrf_token": {token}, "host": {"127.0.0.1"}, "port": {strconv.Itoa(srv.Port)}, "security": {"tls"},
		"username": {imaptest.User}, "auth": {"password"}, "password": {imaptest.Pass}, "folder": {"INBOX"},
		"archive_folder": {"Archive"}}
	for i := 0; i+1 < len(extra); i += 2 {
		f.Set(extra[i], extra[i+1])
	}
	return f
}

var mailboxLink = regexp.MustCompile(`/settings/mailboxes/([0-9a-f-]{36})\?done=created`)

// TestMailboxPages adds a mailbox (refused first with the API's words),
// polls it with the result shown, edits, deactivates, activates and
// deletes it, with no secret ever on a page.
func TestMailboxPages(t *testing.T) {
	e, srv, _ := mailboxEnv(t)
	report, _ := ingesttest.ReportMail("noreply-dmarc-support@google.com", "dmarc@alpha.example", 1, 4,
		reportgen.Options{Domain: "alpha.example"})
	srv.Append("INBOX", report)
	srv.Append("INBOX", []byte("From: a@b.test\r\nSubject: hello\r\n\r\nnot a report\r\n"))
	cookie := e.signIn(e.fullA)
	token := e.csrf(cookie)

	if p := e.send("GET", "/settings/mailboxes", cookie, nil); p.status != 200 || !strings.Contains(p.body, "No mailboxes yet") ||
		!strings.Contains(p.body, `action="/settings/mailboxes"`) {
		t.Fatalf("empty list: %d", p.status)
	}
	for _, c := range []struct {
		name   string
		form   url.Values
		status int
		msg    string
	}{
		{"wrong password", mailboxForm(token, srv, "password", "not-the-password-123"), 422, "AUTHENTICATIONFAILED"},
		{"no host", mailboxForm(token, srv, "host", ""), 422, "invalid host: is required"},
		{"no password", mailboxForm(token, srv, "password", ""), 422, "invalid password: is required"},
		{"bad port", mailboxForm(token, srv, "port", "99999"), 422, "invalid port"},
		{"port not a number", mailboxForm(token, srv, "port", "x"), 422, "invalid port"},
		{"same folders", mailboxForm(token, srv, "archive_folder", "INBOX"), 422, "invalid archive_folder"},
		{"bad security", mailboxForm(token, srv, "security", "ssl3"), 422, "invalid security"},
		{"oauth2 without fields", mailboxForm(token, srv, "auth", "oauth2", "client_secret", "sekrit-client-456"), 422, "invalid oauth2"},
		{"nothing listens", mailboxForm(token, srv, "port", "1"), 422, "connect"},
	} {
		p := e.send("POST", "/settings/mailboxes", cookie, c.form)
		if p.status != c.status || !strings.Contains(p.body, c.msg) || !strings.Contains(p.body, `role="alert"`) {
			t.Errorf("%s: %d, want %d with %q:\n%s", c.name, p.status, c.status, c.msg, alertText(p.body))
		}
		for _, secret := range []string{"not-the-password-123", "sekrit-client-456", imaptest.Pass} {
			if strings.Contains(p.body, secret) {
				t.Errorf("%s: the page shows a secret", c.name)
			}
		}
		if c.name == "wrong password" && !strings.Contains(p.body, `value="127.0.0.1"`) {
			t.Error("the refused form lost its host")
		}
	}
	if _, n, _ := e.db.ListMailboxes(e.orgA.ID, store.Page{Page: 1, Limit: 10}); n != 0 {
		t.Fatalf("refused forms stored %d mailboxes", n)
	}

	p := e.send("POST", "/settings/mailboxes", cookie, mailboxForm(token, srv))
	m := mailboxLink.FindStringSubmatch(p.header.Get("Location"))
	if p.status != http.StatusSeeOther || m == nil {
		t.Fatalf("create: %d %q %s", p.status, p.header.Get("Location"), alertText(p.body))
	}
	id := m[1]
	p = e.send("GET", m[0], cookie, nil)
	if p.status != 200 || !strings.Contains(p.body, "The mailbox is added") || !strings.Contains(p.body, "waiting for its first poll") ||
		strings.Contains(p.body, imaptest.Pass) {
		t.Errorf("new mailbox page: %d", p.status)
	}
	if p := e.send("GET", "/settings/mailboxes", cookie, nil); !strings.Contains(p.body, `href="/settings/mailboxes/`+id+`"`) ||
		strings.Contains(p.body, imaptest.Pass) {
		t.Error("the list does not link the mailbox, or shows its password")
	}

	// Poll now: the result on the page, the status recorded.
	p = e.send("POST", "/settings/mailboxes/"+id+"/poll", cookie, url.Values{"csrf_token": {token}})
	if p.status != 200 || !strings.Contains(p.body, "Polled just now") || !strings.Contains(p.body, "2 new mails read: 1 aggregate") ||
		!strings.Contains(p.body, "No errors.") || !strings.Contains(p.body, "working") {
		t.Errorf("poll: %d %s", p.status, between(p.body, "Polled just now", "</section>"))
	}
	if got, _ := e.db.FindMailbox(e.orgA.ID, id); got.MessagesImported != 1 || got.LastPollAt == nil || srv.Count("Archive") != 1 {
		t.Errorf("after the poll: %+v, archive %d", got, srv.Count("Archive"))
	}

	// Edit: a wrong new password is refused with the server's words and
	// changes nothing; blank keeps the stored one.
	edit := mailboxForm(token, srv, "password", "still-wrong-789", "archive_folder", "Done")
	p = e.send("POST", "/settings/mailboxes/"+id, cookie, edit)
	if p.status != 422 || !strings.Contains(p.body, "AUTHENTICATIONFAILED") || strings.Contains(p.body, "still-wrong-789") {
		t.Errorf("edit with a wrong password: %d %s", p.status, alertText(p.body))
	}
	if got, _ := e.db.FindMailbox(e.orgA.ID, id); got.ArchiveFolder != "Archive" {
		t.Errorf("a refused edit changed the archive folder to %q", got.ArchiveFolder)
	}
	edit.Set("password", "")
	if p := e.send("POST", "/settings/mailboxes/"+id, cookie, edit); p.status != http.StatusSeeOther {
		t.Fatalf("edit: %d %s", p.status, alertText(p.body))
	}
	if got, _ := e.db.FindMailbox(e.orgA.ID, id); got.ArchiveFolder != "Done" {
		t.Errorf("archive folder %q after the edit", got.ArchiveFolder)
	}

	// Deactivate, then activate (the login is tried again).
	e.send("POST", "/settings/mailboxes/"+id, cookie, url.Values{"csrf_token": {token}, "action": {"deactivate"}})
	if got, _ := e.db.FindMailbox(e.orgA.ID, id); got.IsActive {
		t.Error("still active")
	}
	if p := e.send("GET", "/settings/mailboxes/"+id, cookie, nil); !strings.Contains(p.body, "inactive") || !strings.Contains(p.body, `value="activate"`) {
		t.Error("the page of an inactive mailbox")
	}
	srv.Stop()
	p = e.send("POST", "/settings/mailboxes/"+id, cookie, url.Values{"csrf_token": {token}, "action": {"activate"}})
	if p.status != 422 || !strings.Contains(between(p.body, "<dl", "Edit</h2>"), `role="alert"`) {
		t.Errorf("activate with the server down: %d %s", p.status, alertText(p.body))
	}
	srv.Start(srv.Port)
	if p := e.send("POST", "/settings/mailboxes/"+id, cookie, url.Values{"csrf_token": {token}, "action": {"activate"}}); p.status != http.StatusSeeOther {
		t.Errorf("activate: %d %s", p.status, alertText(p.body))
	}
	if got, _ := e.db.FindMailbox(e.orgA.ID, id); !got.IsActive {
		t.Error("not active again")
	}

	// Delete.
	if p := e.send("POST", "/settings/mailboxes/"+id+"/delete", cookie, url.Values{"csrf_token": {token}}); p.status != http.StatusSeeOther {
		t.Fatalf("delete: %d", p.status)
	}
	if _, err := e.db.FindMailbox(e.orgA.ID, id); err == nil {
		t.Error("the mailbox survived deletion")
	}
	if p := e.send("GET", "/settings/mailboxes?done=deleted", cookie, nil); !strings.Contains(p.body, "The mailbox is deleted") {
		t.Error("no notice after the deletion")
	}
}

// TestMailboxPagesIsolationAndScope ensures another organization's
// mailbox is a 404 page for every route, a read-only key sees no write
// button and its POSTs are refused, and a POST without the CSRF token
// changes nothing.
func TestMailboxPagesIsolationAndScope(t *testing.T) {
	e, srv, svc := mailboxEnv(t)
	host, port, user, pass := "127.0.0.1", srv.Port, imaptest.User, imaptest.Pass
	theirs, err := svc.CreateMailbox(context.Background(), app.Operator(e.orgB), app.MailboxSpec{Host: &host, Port: &port, Username: &user, Password: &pass})
	if err != nil {
		t.Fatal(err)
	}
	mine, err := svc.CreateMailbox(context.Background(), app.Operator(e.orgA), app.MailboxSpec{Host: &host, Port: &port, Username: &user, Password: &pass})
	if err != nil {
		t.Fatal(err)
	}
	cookie := e.signIn(e.fullA)
	token := e.csrf(cookie)
	if p := e.send("GET", "/settings/mailboxes", cookie, nil); strings.Contains(p.body, theirs.ID) || !strings.Contains(p.body, mine.ID) {
		t.Error("the list shows B's mailbox or not A's")
	}
	for _, c := range []struct{ method, path string }{
		{"GET", "/settings/mailboxes/" + theirs.ID},
		{"POST", "/settings/mailboxes/" + theirs.ID},
		{"POST", "/settings/mailboxes/" + theirs.ID + "/poll"},
		{"POST", "/settings/mailboxes/" + theirs.ID + "/delete"},
		{"GET", "/settings/mailboxes/" + strings.ToUpper(theirs.ID)},
		{"GET", "/settings/mailboxes/not-an-id"},
	} {
		var form url.Values
		if c.method == "POST" {
			form = url.Values{"csrf_token": {token}, "action": {"deactivate"}}
		}
		if p := e.send(c.method, c.path, cookie, form); p.status != 404 || !strings.Contains(p.body, "Not found") {
			t.Errorf("%s %s: %d", c.method, c.path, p.status)
		}
	}
	if got, err := e.db.FindMailbox(e.orgB.ID, theirs.ID); err != nil || !got.IsActive || got.LastPollAt != nil {
		t.Errorf("B's mailbox after A's attempts: %+v %v", got, err)
	}
	// Upper-case ids of one's own mailbox work, as in the API.
	if p := e.send("GET", "/settings/mailboxes/"+strings.ToUpper(mine.ID), cookie, nil); p.status != 200 {
		t.Errorf("upper-case id: %d", p.status)
	}

	// Without the CSRF token: 403, nothing changed.
	if p := e.send("POST", "/settings/mailboxes/"+mine.ID+"/delete", cookie, url.Values{}); p.status != 403 {
		t.Errorf("delete without CSRF: %d", p.status)
	}
	if p := e.send("POST", "/settings/mailboxes", cookie, mailboxForm("", srv)); p.status != 403 {
		t.Errorf("create without CSRF: %d", p.status)
	}
	if _, n, _ := e.db.ListMailboxes(e.orgA.ID, store.Page{Page: 1, Limit: 10}); n != 1 {
		t.Errorf("%d mailboxes after refused POSTs", n)
	}

	// A read-only key: the pages, no write buttons, POSTs refused.
	ro := e.signIn(e.readA)
	rtoken := e.csrf(ro)
	for _, path := range []string{"/settings/mailboxes", "/settings/mailboxes/" + mine.ID} {
		p := e.send("GET", path, ro, nil)
		if p.status != 200 || !strings.Contains(p.body, imaptest.User) {
			t.Errorf("read-only %s: %d", path, p.status)
		}
		if strings.Contains(p.body, `method="post" action="/settings/mailboxes`) || strings.Contains(p.body, "Poll now") {
			t.Errorf("read-only %s shows a write form", path)
		}
	}
	for _, path := range []string{"/settings/mailboxes", "/settings/mailboxes/" + mine.ID, "/settings/mailboxes/" + mine.ID + "/poll",
		"/settings/mailboxes/" + mine.ID + "/delete"} {
		if p := e.send("POST", path, ro, mailboxForm(rtoken, srv)); p.status != 403 {
			t.Errorf("read-only POST %s: %d", path, p.status)
		}
	}
	if got, _ := e.db.FindMailbox(e.orgA.ID, mine.ID); got.LastPollAt != nil || !got.IsActive {
		t.Errorf("read-only POSTs changed the mailbox: %+v", got)
	}
}

// hostileIMAP is a plaintext IMAP server whose every answer is hostile
// text: the error of a refused login reaches the page as the server
// worded it, escaped.
func hostileIMAP(t *testing.T, text string) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				w := bufio.NewWriter(c)
				w.WriteString("* OK [CAPABILITY IMAP4rev1] " + text + "\r\n")
				w.Flush()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					tag, rest, _ := strings.Cut(sc.Text(), " ")
					cmd, _, _ := strings.Cut(rest, " ")
					switch strings.ToUpper(cmd) {
					case "CAPABILITY":
						w.WriteString("* CAPABILITY IMAP4rev1\r\n" + tag + " OK done\r\n")
					case "LOGIN":
						w.WriteString(tag + " NO [AUTHENTICATIONFAILED] " + text + "\r\n")
					case "LOGOUT":
						w.WriteString("* BYE " + text + "\r\n" + tag + " OK bye\r\n")
						w.Flush()
						return
					default:
						w.WriteString(tag + " BAD " + text + "\r\n")
					}
					w.Flush()
				}
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestMailboxHostileServerText ensures what an IMAP server says (in a
// refused login, in a mailbox's last_error) is shown as text, never markup.
func TestMailboxHostileServerText(t *testing.T) {
	e, srv, svc := mailboxEnv(t)
	h := strings.Join(hostile, " ")
	port := hostileIMAP(t, h)
	cookie := e.signIn(e.fullA)
	token := e.csrf(cookie)
	p := e.send("POST", "/settings/mailboxes", cookie, mailboxForm(token, srv, "port", strconv.Itoa(port), "security", "plain"))
	if p.status != 422 || !strings.Contains(p.body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Errorf("hostile login error: %d %s", p.status, alertText(p.body))
	}
	if strings.Contains(p.body, "<script>alert") || handlerAttr.MatchString(p.body) {
		t.Error("the server's words were rendered as markup")
	}

	host, sport, user, pass := "127.0.0.1", srv.Port, imaptest.User, imaptest.Pass
	m, err := svc.CreateMailbox(context.Background(), app.Operator(e.orgA), app.MailboxSpec{Host: &host, Port: &sport, Username: &user, Password: &pass})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.db.RecordMailboxPoll(m.ID, store.MailboxPoll{At: e.clock.Now(), Error: "login failed: " + h}); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/settings/mailboxes", "/settings/mailboxes/" + m.ID} {
		p := e.send("GET", path, cookie, nil)
		if p.status != 200 || !strings.Contains(p.body, "login failed: &lt;script&gt;") || !strings.Contains(p.body, "failing") {
			t.Errorf("GET %s: %d", path, p.status)
		}
		if strings.Contains(p.body, "<script>alert") || handlerAttr.MatchString(p.body) {
			t.Errorf("GET %s renders the last error as markup", path)
		}
	}
	if p := e.send("GET", "/settings/mailboxes/"+m.ID, cookie, nil); !strings.Contains(p.body, "Failing since") {
		t.Error("the page of a failing mailbox does not say since when")
	}
}

// TestMailboxPagesWithoutService ensures a server without the mailbox
// service lists mailboxes and refuses changes with a page that says why.
func TestMailboxPagesWithoutService(t *testing.T) {
	e := newEnv(t)
	cookie := e.signIn(e.fullA)
	token := e.csrf(cookie)
	if p := e.send("GET", "/settings/mailboxes", cookie, nil); p.status != 200 {
		t.Errorf("list: %d", p.status)
	}
	if p := e.send("POST", "/settings/mailboxes", cookie, url.Values{"csrf_token": {token}, "host": {"imap.example.com"}}); p.status != 503 ||
		!strings.Contains(p.body, "Mailboxes unavailable") {
		t.Errorf("create without a service: %d", p.status)
	}
}

var alertRE = regexp.MustCompile(`role="alert">[^<]*(<li>[^<]*)?`)

// alertText is the page's error messages, for failure output.
func alertText(body string) string { return strings.Join(alertRE.FindAllString(body, -1), " | ") }

// between is body from the first from to the next to after it.
func between(body, from, to string) string {
	i := strings.Index(body, from)
	if i < 0 {
		return ""
	}
	j := strings.Index(body[i:], to)
	if j < 0 {
		return body[i:]
	}
	return body[i : i+j]
}

// TestMailboxEditNeedsPasswordForNewServer ensures the edit form with the
// password left blank does not take the stored password to another port
// or host: 422 saying it is needed again, nothing stored, nothing dialled
// (issue 24).
func TestMailboxEditNeedsPasswordForNewServer(t *testing.T) {
	e, srv, svc := mailboxEnv(t)
	host, port, user, pass := "127.0.0.1", srv.Port, imaptest.User, imaptest.Pass
	m, err := svc.CreateMailbox(context.Background(), app.Operator(e.orgA), app.MailboxSpec{Host: &host, Port: &port, Username: &user, Password: &pass})
	if err != nil {
		t.Fatal(err)
	}
	ln := imaptest.NewListener(t)
	cookie := e.signIn(e.fullA)
	token := e.csrf(cookie)
	for _, change := range [][]string{{"port", strconv.Itoa(ln.Port)}, {"host", "localhost"}} {
		form := mailboxForm(token, srv, append([]string{"password", "", "archive_folder", "Archive/dmarcd"}, change...)...)
		p := e.send("POST", "/settings/mailboxes/"+m.ID, cookie, form)
		if p.status != 422 || !strings.Contains(p.body, "password: is required again") {
			t.Errorf("edit of %s with a blank password: %d %s", change[0], p.status, alertText(p.body))
		}
	}
	if got, _ := e.db.FindMailbox(e.orgA.ID, m.ID); got.Port != srv.Port || got.Host != "127.0.0.1" || ln.Connections() != 0 {
		t.Errorf("after refused edits: %s:%d stored, the other server dialled %d times", got.Host, got.Port, ln.Connections())
	}
}
