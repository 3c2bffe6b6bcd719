package imap_test

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

	imapin "github.com/dmarcd/dmarcd/ingest/imap"
	"github.com/dmarcd/dmarcd/internal/imaptest"
	"github.com/dmarcd/dmarcd/internal/secret"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

const reportXML = `<?xml version="1.0"?><feedback><report_metadata><org_name>google.com</org_name>` +
	`<report_id>%d</report_id></report_metadata></feedback>`

// reportMail is a report mail with the XML as kind: "xml", "gz" or "zip";
// "failure" is an ARF failure report and "other" a mail with no report.
func reportMail(kind string, n int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "From: noreply-dmarc-support@google.com\r\nTo: dmarc@example.com\r\nSubject: Report %d\r\n"+
		"Message-ID: <%s-%d@test>\r\nX-Test-Kind: %s\r\nMIME-Version: 1.0\r\n", n, kind, n, kind)
	xml := fmt.Sprintf(reportXML, n)
	var att []byte
	ctype, name := "text/xml", "report.xml"
	switch kind {
	case "xml":
		att = []byte(xml)
	case "gz":
		var z bytes.Buffer
		w := gzip.NewWriter(&z)
		w.Write([]byte(xml))
		w.Close()
		att, ctype, name = z.Bytes(), "application/gzip", "report.xml.gz"
	case "zip":
		var z bytes.Buffer
		w := zip.NewWriter(&z)
		f, _ := w.Create("report.xml")
		f.Write([]byte(xml))
		w.Close()
		att, ctype, name = z.Bytes(), "application/zip", "report.zip"
	case "failure":
		fmt.Fprintf(&b, "Content-Type: multipart/report; report-type=feedback-report; boundary=B\r\n\r\n"+
			"--B\r\nContent-Type: text/plain\r\n\r\nfailure\r\n--B\r\nContent-Type: message/feedback-report\r\n\r\n"+
			"Feedback-Type: auth-failure\r\n\r\n--B--\r\n")
		return b.Bytes()
	default:
		b.WriteString("Content-Type: text/plain\r\n\r\nHello, not a report.\r\n")
		return b.Bytes()
	}
	fmt.Fprintf(&b, "Content-Type: multipart/mixed; boundary=B\r\n\r\n--B\r\nContent-Type: text/plain\r\n\r\nreport\r\n"+
		"--B\r\nContent-Type: %s; name=%s\r\nContent-Transfer-Encoding: base64\r\n\r\n%s\r\n--B--\r\n",
		ctype, name, base64.StdEncoding.EncodeToString(att))
	return b.Bytes()
}

// recordingSink keeps every message it is given and classifies it by its
// X-Test-Kind header, as the pipeline would by its content.
type recordingSink struct {
	mu   sync.Mutex
	got  [][]byte
	org  []string
	fail func(n int) error // called with the 1-based message count
	seen chan struct{}
}

func newSink() *recordingSink { return &recordingSink{seen: make(chan struct{}, 1000)} }

func (s *recordingSink) Ingest(_ context.Context, orgID string, raw []byte) (imapin.Outcome, error) {
	s.mu.Lock()
	s.got = append(s.got, bytes.Clone(raw))
	s.org = append(s.org, orgID)
	n := len(s.got)
	s.mu.Unlock()
	s.seen <- struct{}{}
	if s.fail != nil {
		if err := s.fail(n); err != nil {
			return imapin.Outcome{}, err
		}
	}
	switch {
	case bytes.Contains(raw, []byte("X-Test-Kind: failure")):
		return imapin.Outcome{Failure: 1}, nil
	case bytes.Contains(raw, []byte("X-Test-Kind: other")):
		return imapin.Outcome{NotReport: 1}, nil
	}
	return imapin.Outcome{Aggregate: 1}, nil
}

func (s *recordingSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got)
}

// env is a store with one organization and mailbox, and a memory server.
type env struct {
	db   *store.DB
	srv  *imaptest.Server
	mb   imapin.Mailbox
	acct imapin.Account
	opts *imapin.Options
	dir  imapin.StoreDirectory
}

func newEnv(t *testing.T, sopts ...imaptest.Option) *env {
	t.Helper()
	e := &env{db: storetest.Open(t), srv: imaptest.NewServer(t, sopts...)}
	org := storetest.MustOrganization(t, e.db, "acme", store.PlanBusiness)
	box, err := secret.LoadOrCreate(secret.KeyPath(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	e.acct = imapin.Account{Host: "127.0.0.1", Port: e.srv.Port, Security: e.srv.Mode, Username: imaptest.User,
		Credentials: imapin.Credentials{Password: imaptest.Pass}, Folder: "INBOX", ArchiveFolder: "Archive/dmarcd"}
	sealed, err := imapin.SealCredentials(box, e.acct.Credentials)
	if err != nil {
		t.Fatal(err)
	}
	m := &store.Mailbox{OrgID: org.ID, Host: "127.0.0.1", Port: e.srv.Port, Security: e.srv.Mode, Username: imaptest.User,
		Auth: store.AuthPassword, Folder: "INBOX", ArchiveFolder: "Archive/dmarcd"}
	if err := e.db.CreateMailbox(m, sealed); err != nil {
		t.Fatal(err)
	}
	e.mb = imapin.Mailbox{ID: m.ID, OrgID: org.ID}
	e.opts = &imapin.Options{AllowPrivate: true, RootCAs: e.srv.Cert.Pool, AllowPlaintext: true, Timeout: 10 * time.Second}
	e.dir = imapin.StoreDirectory{DB: e.db, Box: box}
	return e
}

func (e *env) poll(t *testing.T, sink imapin.Sink) (imapin.PollResult, error) {
	t.Helper()
	c, err := imapin.Dial(context.Background(), e.acct, e.opts, nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	return c.Poll(context.Background(), e.mb, sink, e.dir)
}

// TestPollImportsReportsAndLeavesOtherMail ensures xml, gz, zip and failure
// reports are handed over byte for byte and moved, that other mail stays
// with its flags, and that a second poll reads nothing.
func TestPollImportsReportsAndLeavesOtherMail(t *testing.T) {
	e := newEnv(t)
	var sent [][]byte
	for i, kind := range []string{"xml", "other", "gz", "zip", "failure"} {
		raw := reportMail(kind, i)
		sent = append(sent, raw)
		if kind == "other" {
			e.srv.Append("INBOX", raw, imap.FlagFlagged)
		} else {
			e.srv.Append("INBOX", raw)
		}
	}
	sink := newSink()
	res, err := e.poll(t, sink)
	if err != nil {
		t.Fatal(err)
	}
	if res.Messages != 5 || res.Aggregate != 3 || res.Failure != 1 || res.NotReports != 1 || res.Imported != 4 || len(res.Errors) != 0 {
		t.Errorf("poll = %+v", res)
	}
	for i := range sent {
		if !bytes.Equal(sink.got[i], sent[i]) {
			t.Errorf("message %d differs from the one appended", i)
		}
		if sink.org[i] != e.mb.OrgID {
			t.Errorf("message %d routed to org %q", i, sink.org[i])
		}
	}
	if n := e.srv.Count("Archive/dmarcd"); n != 4 {
		t.Errorf("archive holds %d messages, want 4", n)
	}
	if n := e.srv.Count("INBOX"); n != 1 {
		t.Errorf("INBOX holds %d messages, want the non-report only", n)
	}
	flags := inboxFlags(t, e)
	if len(flags) != 1 || len(flags[0]) != 1 || flags[0][0] != imap.FlagFlagged {
		t.Errorf("non-report flags = %v, want just \\Flagged (no \\Seen)", flags)
	}

	res, err = e.poll(t, sink)
	if err != nil || res.Messages != 0 || sink.count() != 5 {
		t.Errorf("second poll = %+v, %v; sink has %d", res, err, sink.count())
	}
}

// inboxFlags reads the flags of every INBOX message with a separate client.
func inboxFlags(t *testing.T, e *env) [][]imap.Flag {
	t.Helper()
	c, err := imapin.Dial(context.Background(), e.acct, e.opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return imapin.FlagsForTest(c, "INBOX")
}

// TestUIDValidityChange ensures a folder re-created with a new UIDVALIDITY
// is read from its start.
func TestUIDValidityChange(t *testing.T) {
	e := newEnv(t)
	e.srv.Append("INBOX", reportMail("other", 1))
	e.srv.Append("INBOX", reportMail("other", 2))
	sink := newSink()
	if res, err := e.poll(t, sink); err != nil || res.Messages != 2 {
		t.Fatalf("first poll = %+v, %v", res, err)
	}
	if res, _ := e.poll(t, sink); res.Messages != 0 {
		t.Fatalf("second poll read %d", res.Messages)
	}
	if err := e.srv.User.Delete("INBOX"); err != nil {
		t.Fatal(err)
	}
	if err := e.srv.User.Create("INBOX", nil); err != nil {
		t.Fatal(err)
	}
	e.srv.Append("INBOX", reportMail("xml", 3))
	res, err := e.poll(t, sink)
	if err != nil || res.Messages != 1 || res.Aggregate != 1 {
		t.Fatalf("poll after UIDVALIDITY change = %+v, %v", res, err)
	}
}

// TestWrongPassword ensures a refused login is a readable error with the
// server's words.
func TestWrongPassword(t *testing.T) {
	e := newEnv(t)
	e.acct.Credentials.Password = "wrong"
	err := imapin.Check(context.Background(), e.acct, e.opts)
	if !imapin.IsAuthFailure(err) || !strings.HasPrefix(err.Error(), "login failed: AUTHENTICATIONFAILED") {
		t.Fatalf("err = %v, want login failed: AUTHENTICATIONFAILED", err)
	}
	if strings.Contains(err.Error(), "wrong") {
		t.Errorf("error shows the password: %v", err)
	}
	e.acct.Credentials.Password = imaptest.Pass
	if err := imapin.Check(context.Background(), e.acct, e.opts); err != nil {
		t.Fatalf("right password: %v", err)
	}
}

// TestServerStoppedMidFetch ensures a server that goes away during a poll
// loses nothing: the message being handled is read again after the
// restart, and every report ends in the archive.
func TestServerStoppedMidFetch(t *testing.T) {
	e := newEnv(t)
	for i := range 4 {
		e.srv.Append("INBOX", reportMail("xml", i))
	}
	sink := newSink()
	sink.fail = func(n int) error {
		if n == 2 {
			e.srv.Stop() // the report is stored; the move cannot happen
		}
		return nil
	}
	res, err := e.poll(t, sink)
	if err == nil {
		t.Fatalf("poll with the server gone = %+v, want an error", res)
	}
	if _, last, _ := e.dir.Load(e.mb.ID); last != 1 {
		t.Errorf("UID mark = %d, want 1 (only the first message is done)", last)
	}
	sink.fail = nil
	e.srv.Start(e.srv.Port)
	res, err = e.poll(t, sink)
	if err != nil || res.Messages != 3 {
		t.Fatalf("poll after restart = %+v, %v", res, err)
	}
	// Message 2 was offered twice: the pipeline's dedup stores it once.
	if sink.count() != 5 || !bytes.Equal(sink.got[1], sink.got[2]) {
		t.Errorf("sink got %d messages, want 5 with the second repeated", sink.count())
	}
	if e.srv.Count("INBOX") != 0 || e.srv.Count("Archive/dmarcd") != 4 {
		t.Errorf("INBOX %d, archive %d; want 0 and 4", e.srv.Count("INBOX"), e.srv.Count("Archive/dmarcd"))
	}
}

// TestSinkErrorStopsBeforeTheMessage ensures a pipeline failure leaves the
// message in place and the mark before it.
func TestSinkErrorStopsBeforeTheMessage(t *testing.T) {
	e := newEnv(t)
	e.srv.Append("INBOX", reportMail("xml", 1))
	e.srv.Append("INBOX", reportMail("xml", 2))
	sink := newSink()
	sink.fail = func(n int) error {
		if n == 1 {
			return errors.New("disk full")
		}
		return nil
	}
	res, err := e.poll(t, sink)
	if err == nil || !strings.Contains(err.Error(), "disk full") || len(res.Errors) != 1 {
		t.Fatalf("poll = %+v, %v", res, err)
	}
	if e.srv.Count("INBOX") != 2 {
		t.Errorf("INBOX holds %d, want both", e.srv.Count("INBOX"))
	}
	sink.fail = nil
	if res, err := e.poll(t, sink); err != nil || res.Messages != 2 || e.srv.Count("Archive/dmarcd") != 2 {
		t.Fatalf("retry = %+v, %v", res, err)
	}
}

// TestMoveFallbackExpungesOnlyThatMessage ensures a server without MOVE
// gets COPY, \Deleted and UID EXPUNGE of the report only: another message
// a user flagged \Deleted stays.
func TestMoveFallbackExpungesOnlyThatMessage(t *testing.T) {
	e := newEnv(t, imaptest.WithCaps(imap.CapUIDPlus))
	e.srv.Append("INBOX", reportMail("other", 1), imap.FlagDeleted)
	e.srv.Append("INBOX", reportMail("xml", 2))
	if res, err := e.poll(t, newSink()); err != nil || res.Imported != 1 {
		t.Fatalf("poll = %+v, %v", res, err)
	}
	if e.srv.Count("INBOX") != 1 || e.srv.Count("Archive/dmarcd") != 1 {
		t.Errorf("INBOX %d, archive %d; want 1 and 1", e.srv.Count("INBOX"), e.srv.Count("Archive/dmarcd"))
	}
}

// TestArchiveEmptyLeavesInPlace ensures archive_folder "" moves nothing.
func TestArchiveEmptyLeavesInPlace(t *testing.T) {
	e := newEnv(t)
	e.acct.ArchiveFolder = ""
	e.srv.Append("INBOX", reportMail("xml", 1))
	if res, err := e.poll(t, newSink()); err != nil || res.Imported != 1 {
		t.Fatalf("poll = %+v, %v", res, err)
	}
	if res, _ := e.poll(t, newSink()); res.Messages != 0 {
		t.Errorf("second poll read %d", res.Messages)
	}
	if e.srv.Count("INBOX") != 1 {
		t.Errorf("INBOX holds %d", e.srv.Count("INBOX"))
	}
}

// TestIdleDelivery ensures the manager picks up a new report through IDLE,
// with the poll interval far away.
func TestIdleDelivery(t *testing.T) {
	e := newEnv(t)
	sink := newSink()
	e.opts.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	m := imapin.NewManager(e.dir, sink, e.dir, e.opts)
	m.Interval = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = m.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	// The first poll (empty folder) is recorded; then the worker idles.
	waitFor(t, func() bool { mb, _ := e.db.FindMailbox(e.mb.OrgID, e.mb.ID); return mb.LastPollAt != nil })
	e.srv.Append("INBOX", reportMail("xml", 1))
	select {
	case <-sink.seen:
	case <-time.After(30 * time.Second):
		t.Fatal("the report was not fetched: IDLE did not deliver it")
	}
	waitFor(t, func() bool { return e.srv.Count("Archive/dmarcd") == 1 })
	waitFor(t, func() bool {
		mb, _ := e.db.FindMailbox(e.mb.OrgID, e.mb.ID)
		return mb.MessagesImported == 1 && mb.LastError == nil
	})
	// PollNow wakes the idling worker and answers with that poll.
	res, err := m.PollNow(context.Background(), e.mb.ID)
	if err != nil || res.Messages != 0 {
		t.Errorf("PollNow = %+v, %v", res, err)
	}
}

// TestManagerRecordsLoginFailure ensures last_error is readable.
func TestManagerRecordsLoginFailure(t *testing.T) {
	e := newEnv(t)
	e.srv.User = nil
	bad, err := imapin.SealCredentials(mustBox(t, e), imapin.Credentials{Password: "nope"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.UpdateMailbox(e.mb.OrgID, e.mb.ID, store.MailboxUpdate{Secrets: bad}); err != nil {
		t.Fatal(err)
	}
	m := imapin.NewManager(e.dir, newSink(), e.dir, e.opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = m.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitFor(t, func() bool { mb, _ := e.db.FindMailbox(e.mb.OrgID, e.mb.ID); return mb.LastError != nil })
	mb, _ := e.db.FindMailbox(e.mb.OrgID, e.mb.ID)
	if !strings.HasPrefix(*mb.LastError, "login failed: AUTHENTICATIONFAILED") {
		t.Errorf("last_error = %q", *mb.LastError)
	}
}

func mustBox(t *testing.T, e *env) *secret.Box { return e.dir.Box }

// TestMissingKeyIsLastError ensures credentials that cannot be decrypted
// give a clear status, not a login with garbage.
func TestMissingKeyIsLastError(t *testing.T) {
	e := newEnv(t)
	other, err := secret.LoadOrCreate(secret.KeyPath(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := imapin.StoreDirectory{DB: e.db, Box: other}.Mailboxes(context.Background())
	if err != nil || len(entries) != 1 || !errors.Is(entries[0].Err, secret.ErrWrongKey) {
		t.Fatalf("entries = %+v, %v; want ErrWrongKey", entries, err)
	}
	entries, _ = imapin.StoreDirectory{DB: e.db}.Mailboxes(context.Background())
	if entries[0].Err == nil || !strings.Contains(entries[0].Err.Error(), secret.FileName) {
		t.Fatalf("no key: err = %v", entries[0].Err)
	}
}

// TestConnectionPolicy covers the ways a connection is refused.
func TestConnectionPolicy(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	check := func(name string, acct imapin.Account, opts imapin.Options, want string) {
		t.Helper()
		start := time.Now()
		err := imapin.Check(ctx, acct, &opts)
		t.Logf("%s: %v", name, time.Since(start))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", name, err, want)
		}
	}
	check("loopback refused", e.acct, imapin.Options{RootCAs: e.srv.Cert.Pool}, "connection refused by policy: 127.0.0.1 is a loopback address")
	check("untrusted certificate", e.acct, imapin.Options{AllowPrivate: true}, "TLS certificate not trusted")
	plain := e.acct
	plain.Security = "plain"
	check("plain not allowed", plain, imapin.Options{AllowPrivate: true}, "--imap-allow-plaintext")
	check("plain against TLS", plain, imapin.Options{AllowPrivate: true, AllowPlaintext: true, Timeout: 2 * time.Second}, "failed")
	st := e.acct
	st.Security = "starttls" // the TLS port does not speak plaintext first
	check("starttls against TLS", st, imapin.Options{AllowPrivate: true, RootCAs: e.srv.Cert.Pool, Timeout: 2 * time.Second}, "failed")
	closed := e.acct
	e.srv.Stop()
	check("nothing listening", closed, *e.opts, "connection refused")
}

// TestSTARTTLS ensures STARTTLS works, and that a server without it is an
// error, never a plaintext login.
func TestSTARTTLS(t *testing.T) {
	e := newEnv(t, imaptest.WithMode("starttls"))
	if err := imapin.Check(context.Background(), e.acct, e.opts); err != nil {
		t.Fatalf("starttls: %v", err)
	}
	p := newEnv(t, imaptest.WithMode("plain"))
	acct := p.acct
	acct.Security = "starttls"
	err := imapin.Check(context.Background(), acct, p.opts)
	if err == nil || !strings.HasPrefix(err.Error(), "STARTTLS failed") {
		t.Fatalf("server without STARTTLS: err = %v", err)
	}
	if err := imapin.Check(context.Background(), p.acct, p.opts); err != nil {
		t.Fatalf("plain with --imap-allow-plaintext: %v", err)
	}
}

// TestXOAUTH2 ensures client credentials are exchanged at the token URL
// over TLS, the token is cached, and the server's refusal is readable.
func TestXOAUTH2(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	var forms []string
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		mu.Lock()
		calls++
		forms = append(forms, r.PostForm.Encode())
		mu.Unlock()
		if r.PostForm.Get("client_secret") != "s3cret" && r.PostForm.Get("refresh_token") != "rt-1" {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"invalid_client","error_description":"AADSTS7000215: Invalid client secret provided."}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"access_token":"tok-1","token_type":"Bearer","expires_in":3599}`)
	}))
	defer ts.Close()
	e := newEnv(t, imaptest.WithToken("tok-1"))
	e.opts.RootCAs.AddCert(ts.Certificate())
	cfg := imapin.OAuth2Config{TokenURL: ts.URL + "/token", ClientID: "app", ClientSecret: "s3cret",
		Scope: "https://outlook.office365.com/.default"}
	e.acct.Credentials = imapin.Credentials{OAuth2: &cfg}
	tokens := imapin.NewTokenSource(cfg, e.opts)
	for range 2 {
		c, err := imapin.Dial(context.Background(), e.acct, e.opts, tokens)
		if err != nil {
			t.Fatalf("XOAUTH2 login: %v", err)
		}
		c.Close()
	}
	mu.Lock()
	if calls != 1 || !strings.Contains(forms[0], "grant_type=client_credentials") || !strings.Contains(forms[0], "scope=https") {
		t.Errorf("token endpoint: %d calls, forms %v; want one client_credentials call", calls, forms)
	}
	mu.Unlock()

	refresh := imapin.OAuth2Config{TokenURL: ts.URL + "/token", ClientID: "app", RefreshToken: "rt-1"}
	if tok, err := imapin.NewTokenSource(refresh, e.opts).Token(context.Background()); err != nil || tok != "tok-1" {
		t.Errorf("refresh grant = %q, %v", tok, err)
	}
	mu.Lock()
	if !strings.Contains(forms[len(forms)-1], "grant_type=refresh_token") {
		t.Errorf("refresh form = %s", forms[len(forms)-1])
	}
	mu.Unlock()

	bad := cfg
	bad.ClientSecret = "wrong-secret"
	e.acct.Credentials = imapin.Credentials{OAuth2: &bad}
	err := imapin.Check(context.Background(), e.acct, e.opts)
	if err == nil || !strings.Contains(err.Error(), "invalid_client") || strings.Contains(err.Error(), "wrong-secret") {
		t.Errorf("bad secret: err = %v", err)
	}

	e.srv.SetToken("tok-2") // the server no longer accepts tok-1
	e.acct.Credentials = imapin.Credentials{OAuth2: &cfg}
	err = imapin.Check(context.Background(), e.acct, e.opts)
	if !imapin.IsAuthFailure(err) || strings.Contains(err.Error(), "tok-1") {
		t.Errorf("refused token: err = %v", err)
	}

	http := cfg
	http.TokenURL = "http://127.0.0.1/token"
	if _, err := imapin.NewTokenSource(http, e.opts).Token(context.Background()); err == nil || !strings.Contains(err.Error(), "https") {
		t.Errorf("http token URL: err = %v", err)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestMessagesImportedCountedWithTheMark ensures messages_imported counts
// each mail that held a report once, in the transaction that records it
// done: a poll cut off after some mails keeps their count (no poll status
// needed), and a mail whose move failed is counted only once it is moved,
// however many polls read it (issue 24: 13 counted for 7 report mails, 2,367
// for 4,000).
func TestMessagesImportedCountedWithTheMark(t *testing.T) {
	e := newEnv(t)
	for i := 1; i <= 3; i++ {
		e.srv.Append("INBOX", reportMail("xml", i))
	}
	e.srv.Append("INBOX", reportMail("other", 4))
	imported := func() int64 {
		t.Helper()
		mb, err := e.db.FindMailbox(e.mb.OrgID, e.mb.ID)
		if err != nil {
			t.Fatal(err)
		}
		return mb.MessagesImported
	}
	// The poll is cut off while the second mail is handed over: its move
	// fails, the first is done.
	ctx, cancel := context.WithCancel(context.Background())
	sink := newSink()
	sink.fail = func(n int) error {
		if n == 2 {
			cancel()
			// The connection closes (context.AfterFunc) before the move.
			time.Sleep(200 * time.Millisecond)
		}
		return nil
	}
	c, err := imapin.Dial(context.Background(), e.acct, e.opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Poll(ctx, e.mb, sink, e.dir)
	c.Close()
	if err == nil {
		t.Fatalf("the cut-off poll: %+v, want an error", res)
	}
	if n := imported(); n != 1 {
		t.Errorf("after a poll cut off after one mail was moved: messages_imported %d, want 1", n)
	}
	// A worker records a failed poll's status: it must not count again.
	if err := e.dir.RecordPoll(e.mb.ID, time.Now(), res, err); err != nil {
		t.Fatal(err)
	}
	if n := imported(); n != 1 {
		t.Errorf("after recording the failed poll: messages_imported %d, want 1", n)
	}
	res, err = e.poll(t, newSink())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.dir.RecordPoll(e.mb.ID, time.Now(), res, err); err != nil {
		t.Fatal(err)
	}
	if n := imported(); n != 3 || e.srv.Count("Archive/dmarcd") != 3 {
		t.Errorf("after the next poll: messages_imported %d, archive %d; want 3 and 3", n, e.srv.Count("Archive/dmarcd"))
	}
}
