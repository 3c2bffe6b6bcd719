package httpapi

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/ingest"
	imapin "github.com/dmarcd/dmarcd/ingest/imap"
	"github.com/dmarcd/dmarcd/ingest/ingesttest"
	"github.com/dmarcd/dmarcd/internal/imaptest"
	"github.com/dmarcd/dmarcd/internal/reportgen"
	"github.com/dmarcd/dmarcd/internal/secret"
	"github.com/dmarcd/dmarcd/store"
)

// mailboxKeys are the fields of API.md's mailbox object.
var mailboxKeys = []string{"archive_folder", "auth", "created_at", "folder", "host", "id", "is_active",
	"last_error", "last_poll_at", "messages_imported", "port", "security", "updated_at", "username"}

// mailboxEnv adds to env a memory IMAP server, a running pipeline and the
// mailbox service the API uses.
func mailboxEnv(t *testing.T) (*env, *imaptest.Server, *imapin.Intake) {
	t.Helper()
	e := newEnv(t, 1000)
	srv := imaptest.NewServer(t)
	box, err := secret.LoadOrCreate(secret.KeyPath(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	p, err := ingest.New(ingest.Config{Store: e.db})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	svc := &imapin.Intake{DB: e.db, Box: box, Sink: imapin.PipelineSink{Pipeline: p},
		Options: &imapin.Options{AllowPrivate: true, RootCAs: srv.Cert.Pool, Timeout: 5 * time.Second}}
	e.withApp(func(c *app.Config) { c.Mailboxes = svc })
	return e, srv, svc
}

func mailboxBody(srv *imaptest.Server, extra ...any) map[string]any {
	b := map[string]any{"host": "127.0.0.1", "port": srv.Port, "username": imaptest.User, "password": imaptest.Pass,
		"archive_folder": "Archive"}
	for i := 0; i+1 < len(extra); i += 2 {
		if extra[i+1] == nil {
			delete(b, extra[i].(string))
		} else {
			b[extra[i].(string)] = extra[i+1]
		}
	}
	return b
}

func TestMailboxLifecycle(t *testing.T) {
	e, srv, _ := mailboxEnv(t)
	e.createDomain(e.keyA, "example.com")
	report, _ := ingesttest.ReportMail("noreply-dmarc-support@google.com", "dmarc@example.com", 1, 4, reportgen.Options{})
	srv.Append("INBOX", report)
	srv.Append("INBOX", []byte("From: a@b.test\r\nSubject: hello\r\n\r\nnot a report\r\n"))

	r := e.do("POST", "/api/v1/mailboxes", e.keyA, mailboxBody(srv))
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	m := r.json(t)
	if got := sortedKeys(m); !slices.Equal(got, mailboxKeys) {
		t.Errorf("mailbox keys = %v, want %v", got, mailboxKeys)
	}
	if m["security"] != "tls" || m["folder"] != "INBOX" || m["auth"] != "password" || m["is_active"] != true ||
		m["last_poll_at"] != nil || m["messages_imported"] != 0.0 {
		t.Errorf("created = %v", m)
	}
	if strings.Contains(string(r.body), imaptest.Pass) {
		t.Error("the answer holds the password")
	}
	id := m["id"].(string)
	if loc := r.header.Get("Location"); loc != "/api/v1/mailboxes/"+id {
		t.Errorf("Location = %q", loc)
	}

	r = e.do("POST", "/api/v1/mailboxes/"+id+"/poll", e.keyA, nil)
	if r.status != http.StatusOK {
		t.Fatalf("poll: %d %s", r.status, r.body)
	}
	res := r.json(t)
	if res["messages"] != 2.0 || res["aggregate_reports"] != 1.0 || res["not_reports"] != 1.0 ||
		res["failure_reports"] != 0.0 || res["tls_reports"] != 0.0 || len(res["errors"].([]any)) != 0 {
		t.Errorf("poll = %s", r.body)
	}
	if srv.Count("Archive") != 1 || srv.Count("INBOX") != 1 {
		t.Errorf("archive %d, inbox %d", srv.Count("Archive"), srv.Count("INBOX"))
	}
	r = e.do("GET", "/api/v1/mailboxes/"+id, e.readA, nil)
	if m := r.json(t); r.status != 200 || m["messages_imported"] != 1.0 || m["last_poll_at"] == nil || m["last_error"] != nil {
		t.Errorf("after poll: %d %s", r.status, r.body)
	}
	r = e.do("GET", "/api/v1/mailboxes", e.readA, nil)
	if data := r.json(t)["data"].([]any); r.status != 200 || len(data) != 1 {
		t.Errorf("list: %d %s", r.status, r.body)
	}

	// A wrong new password is refused with the server's words and the old
	// one kept; a right one replaces it.
	r = e.do("PUT", "/api/v1/mailboxes/"+id, e.keyA, map[string]any{"password": "wrong"})
	if r.status != http.StatusUnprocessableEntity || r.errorCode(t) != "mailbox_unreachable" ||
		!strings.Contains(string(r.body), "AUTHENTICATIONFAILED") {
		t.Errorf("wrong password: %d %s", r.status, r.body)
	}
	r = e.do("PUT", "/api/v1/mailboxes/"+id, e.keyA, map[string]any{"archive_folder": "", "is_active": false})
	if m := r.json(t); r.status != 200 || m["archive_folder"] != "" || m["is_active"] != false {
		t.Errorf("update: %d %s", r.status, r.body)
	}

	// The server goes away: the poll answers 200 with errors and sets last_error.
	srv.Stop()
	r = e.do("POST", "/api/v1/mailboxes/"+id+"/poll", e.keyA, nil)
	if errs, _ := r.json(t)["errors"].([]any); r.status != 200 || len(errs) == 0 {
		t.Errorf("poll of a stopped server: %d %s", r.status, r.body)
	}
	r = e.do("GET", "/api/v1/mailboxes/"+id, e.keyA, nil)
	if le, _ := r.json(t)["last_error"].(string); !strings.Contains(le, "failed") {
		t.Errorf("last_error = %q", le)
	}

	if r = e.do("DELETE", "/api/v1/mailboxes/"+id, e.keyA, nil); r.status != http.StatusNoContent {
		t.Errorf("delete: %d %s", r.status, r.body)
	}
	if r = e.do("GET", "/api/v1/mailboxes/"+id, e.keyA, nil); r.status != http.StatusNotFound {
		t.Errorf("get after delete: %d", r.status)
	}
}

// mustCreateMailbox adds srv's mailbox to organization A and returns its id.
func mustCreateMailbox(t *testing.T, e *env, srv *imaptest.Server) string {
	t.Helper()
	r := e.do("POST", "/api/v1/mailboxes", e.keyA, mailboxBody(srv))
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	return r.json(t)["id"].(string)
}

func TestMailboxTenantIsolation(t *testing.T) {
	e, srv, _ := mailboxEnv(t)
	id := mustCreateMailbox(t, e, srv)
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/api/v1/mailboxes/" + id, nil},
		{"PUT", "/api/v1/mailboxes/" + id, map[string]any{"folder": "Other"}},
		{"DELETE", "/api/v1/mailboxes/" + id, nil},
		{"POST", "/api/v1/mailboxes/" + id + "/poll", nil},
	} {
		if r := e.do(c.method, c.path, e.keyB, c.body); r.status != http.StatusNotFound || r.errorCode(t) != "not_found" {
			t.Errorf("org B %s %s: %d %s", c.method, c.path, r.status, r.body)
		}
	}
	r := e.do("GET", "/api/v1/mailboxes", e.keyB, nil)
	if data := r.json(t)["data"].([]any); len(data) != 0 {
		t.Errorf("org B lists %d mailboxes", len(data))
	}
	if r := e.do("POST", "/api/v1/mailboxes", e.readA, mailboxBody(srv)); r.status != http.StatusForbidden {
		t.Errorf("read key create: %d", r.status)
	}
	if m, _ := e.db.FindMailbox(e.orgA.ID, id); m == nil || m.Folder != "INBOX" {
		t.Errorf("org A's mailbox changed: %+v", m)
	}
}

func TestMailboxBadInput(t *testing.T) {
	e, srv, svc := mailboxEnv(t)
	cases := []struct {
		name  string
		body  any
		field string
		code  string
	}{
		{"no host", mailboxBody(srv, "host", nil), "host", "validation_failed"},
		{"no username", mailboxBody(srv, "username", nil), "username", "validation_failed"},
		{"no password", mailboxBody(srv, "password", nil), "password", "validation_failed"},
		{"bad security", mailboxBody(srv, "security", "ssl"), "security", "validation_failed"},
		{"plain", mailboxBody(srv, "security", "plain"), "security", "validation_failed"},
		{"bad port", mailboxBody(srv, "port", 70000), "port", "validation_failed"},
		{"bad auth", mailboxBody(srv, "auth", "kerberos"), "auth", "validation_failed"},
		{"same folders", mailboxBody(srv, "archive_folder", "INBOX"), "archive_folder", "validation_failed"},
		{"control char", mailboxBody(srv, "folder", "IN\nBOX"), "folder", "validation_failed"},
		{"oauth2 without", mailboxBody(srv, "auth", "oauth2", "password", nil), "oauth2", "validation_failed"},
		{"oauth2 http", mailboxBody(srv, "password", nil, "oauth2", map[string]any{"token_url": "http://x.test/t", "client_id": "a", "client_secret": "b"}), "oauth2", "validation_failed"},
		{"wrong password", mailboxBody(srv, "password", "nope"), "", "mailbox_unreachable"},
		{"wrong port", mailboxBody(srv, "port", 1), "", "mailbox_unreachable"},
	}
	for _, c := range cases {
		r := e.do("POST", "/api/v1/mailboxes", e.keyA, c.body)
		if r.status != http.StatusUnprocessableEntity || r.errorCode(t) != c.code {
			t.Errorf("%s: %d %s", c.name, r.status, r.body)
			continue
		}
		if c.field != "" && !strings.Contains(string(r.body), `"field":"`+c.field+`"`) {
			t.Errorf("%s: field %s not named: %s", c.name, c.field, r.body)
		}
	}
	for _, raw := range []string{`{`, `{"host": 5}`, `{"unknown": 1}`, `[]`} {
		if r := e.do("POST", "/api/v1/mailboxes", e.keyA, raw); r.status != http.StatusBadRequest {
			t.Errorf("%s: %d %s", raw, r.status, r.body)
		}
	}
	// The address policy, checked on the address dialled.
	svc.Options.AllowPrivate = false
	r := e.do("POST", "/api/v1/mailboxes", e.keyA, mailboxBody(srv))
	if r.status != http.StatusUnprocessableEntity || r.errorCode(t) != "validation_failed" || !strings.Contains(string(r.body), "imap-allow-private") {
		t.Errorf("loopback without --imap-allow-private: %d %s", r.status, r.body)
	}
	svc.Options.AllowPrivate = true
	if n := countMailboxes(t, e); n != 0 {
		t.Errorf("%d mailboxes saved from bad input", n)
	}
	for _, id := range []string{"nope", "00000000-0000-0000-0000-000000000000"} {
		if r := e.do("GET", "/api/v1/mailboxes/"+id, e.keyA, nil); r.status != http.StatusNotFound {
			t.Errorf("GET %s: %d", id, r.status)
		}
	}
}

// Secrets are kept sealed: the database file does not hold the password.
func TestMailboxSecretSealed(t *testing.T) {
	e, srv, _ := mailboxEnv(t)
	if r := e.do("POST", "/api/v1/mailboxes", e.keyA, mailboxBody(srv)); r.status != http.StatusCreated {
		t.Fatalf("%d %s", r.status, r.body)
	}
	var file bytes.Buffer
	if _, err := e.db.Backup(&file); err != nil {
		t.Fatal(err)
	}
	raw := file.Bytes()
	if strings.Contains(string(raw), imaptest.Pass) {
		t.Error("the database file holds the password in clear")
	}
	if !strings.Contains(string(raw), imaptest.User) {
		t.Error("the database file does not hold the mailbox: the check above proves nothing")
	}
}

func countMailboxes(t *testing.T, e *env) int {
	t.Helper()
	_, n, err := e.db.ListMailboxes(e.orgA.ID, store.Page{Page: 1, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestMailboxSecretNotSentToANewServer ensures a change of host, port,
// security or username needs the secret again: without it the answer is
// 422 on password (oauth2 for an OAuth2 mailbox) and nothing is dialled, so
// the stored password never reaches a server it was not given for (issue
// 24: PUT {"port": 27144} logged in there with the stored password).
func TestMailboxSecretNotSentToANewServer(t *testing.T) {
	e, srv, _ := mailboxEnv(t)
	id := mustCreateMailbox(t, e, srv)
	// Another "server", which records whoever connects.
	ln := imaptest.NewListener(t)
	other := ln.Port
	for _, change := range []map[string]any{
		{"port": other},
		{"host": "localhost"},
		{"security": "starttls"},
		{"username": "someone@example.com"},
		{"port": other, "folder": "INBOX"},
	} {
		r := e.do("PUT", "/api/v1/mailboxes/"+id, e.keyA, change)
		if r.status != http.StatusUnprocessableEntity || r.errorCode(t) != "validation_failed" || !strings.Contains(string(r.body), `"password"`) {
			t.Errorf("PUT %v without the password: %d %s, want 422 on password", change, r.status, r.body)
		}
	}
	if n := ln.Connections(); n != 0 {
		t.Errorf("the new server was dialled %d times with the stored password", n)
	}
	r := e.do("GET", "/api/v1/mailboxes/"+id, e.keyA, nil)
	if m := r.json(t); m["port"] != float64(srv.Port) || m["host"] != "127.0.0.1" {
		t.Errorf("the refused changes were stored: %s", r.body)
	}
	// What does not take the secret elsewhere needs no password; the new
	// server with the password sent again is tried.
	if r := e.do("PUT", "/api/v1/mailboxes/"+id, e.keyA, map[string]any{"folder": "INBOX", "is_active": true}); r.status != http.StatusOK {
		t.Errorf("folder change: %d %s", r.status, r.body)
	}
	r = e.do("PUT", "/api/v1/mailboxes/"+id, e.keyA, map[string]any{"port": other, "password": imaptest.Pass})
	if r.status != http.StatusUnprocessableEntity || r.errorCode(t) != "mailbox_unreachable" || ln.Connections() == 0 {
		t.Errorf("new port with the password: %d %s (dialled %d), want it tried", r.status, r.body, ln.Connections())
	}
}
