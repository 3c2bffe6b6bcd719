package store_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

var sealed = []byte("\x01opaque sealed credentials")

func mustMailbox(tb testing.TB, db *store.DB, orgID, user string) *store.Mailbox {
	tb.Helper()
	m := &store.Mailbox{OrgID: orgID, Host: "IMAP.Example.com.", Port: 993, Security: store.SecurityTLS,
		Username: user, Auth: store.AuthPassword, Folder: "INBOX", ArchiveFolder: "Archive/dmarcd"}
	if err := db.CreateMailbox(m, sealed); err != nil {
		tb.Fatalf("create mailbox: %v", err)
	}
	return m
}

// TestMailboxLifecycle ensures a mailbox is created with API.md's JSON
// (no credentials), listed, updated, and deleted with its state.
func TestMailboxLifecycle(t *testing.T) {
	db := storetest.Open(t)
	org := storetest.MustOrganization(t, db, "acme", store.PlanBusiness)
	m := mustMailbox(t, db, org.ID, "dmarc@example.com")
	raw, _ := json.Marshal(m)
	want := fmt.Sprintf(`{"id":%q,"host":"imap.example.com","port":993,"security":"tls","username":"dmarc@example.com",`+
		`"auth":"password","folder":"INBOX","archive_folder":"Archive/dmarcd","is_active":true,"last_poll_at":null,`+
		`"last_error":null,"messages_imported":0,"created_at":"2026-11-22T09:30:00Z","updated_at":"2026-11-22T09:30:00Z"}`, m.ID)
	if string(raw) != want {
		t.Errorf("JSON =\n%s\nwant\n%s", raw, want)
	}
	got, secrets, err := db.FindMailboxSecrets(org.ID, m.ID)
	if err != nil || got.ID != m.ID || !bytes.Equal(secrets, sealed) {
		t.Fatalf("FindMailboxSecrets = %+v, %q, %v", got, secrets, err)
	}
	list, total, err := db.ListMailboxes(org.ID, store.Page{Page: 1, Limit: 10})
	if err != nil || total != 1 || len(list) != 1 || list[0].ID != m.ID {
		t.Fatalf("ListMailboxes = %v, %d, %v", list, total, err)
	}

	if err := db.MarkMailboxDone(m.ID, store.MailboxState{UIDValidity: 7, LastUID: 42}, 0); err != nil {
		t.Fatal(err)
	}
	if st, err := db.MailboxState(m.ID); err != nil || st != (store.MailboxState{UIDValidity: 7, LastUID: 42}) {
		t.Fatalf("MailboxState = %+v, %v", st, err)
	}
	// A new password keeps the state; a new folder forgets it.
	newSecret := []byte("new sealed")
	if _, err := db.UpdateMailbox(org.ID, m.ID, store.MailboxUpdate{Secrets: newSecret}); err != nil {
		t.Fatal(err)
	}
	if _, s, _ := db.FindMailboxSecrets(org.ID, m.ID); !bytes.Equal(s, newSecret) {
		t.Errorf("secrets after update = %q", s)
	}
	if st, _ := db.MailboxState(m.ID); st.LastUID != 42 {
		t.Errorf("state after a new password = %+v, want kept", st)
	}
	folder := "Reports"
	if _, err := db.UpdateMailbox(org.ID, m.ID, store.MailboxUpdate{Folder: &folder}); err != nil {
		t.Fatal(err)
	}
	if st, _ := db.MailboxState(m.ID); st != (store.MailboxState{}) {
		t.Errorf("state after a new folder = %+v, want reset", st)
	}

	if err := db.RecordMailboxPoll(m.ID, store.MailboxPoll{At: storetest.Epoch(), Error: "login failed: AUTHENTICATIONFAILED"}); err != nil {
		t.Fatal(err)
	}
	if err := db.RecordMailboxPoll(m.ID, store.MailboxPoll{At: storetest.Epoch().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	for uid := uint32(43); uid <= 45; uid++ {
		if err := db.MarkMailboxDone(m.ID, store.MailboxState{UIDValidity: 7, LastUID: uid}, 1); err != nil {
			t.Fatal(err)
		}
	}
	got, _ = db.FindMailbox(org.ID, m.ID)
	if got.LastError != nil || got.MessagesImported != 3 || got.LastPollAt == nil || !got.LastPollAt.Equal(storetest.Epoch().Add(time.Minute)) {
		t.Errorf("status after polls = %+v", got)
	}

	if err := db.DeleteMailbox(org.ID, m.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.FindMailbox(org.ID, m.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after delete: %v", err)
	}
	if err := db.MarkMailboxDone(m.ID, store.MailboxState{LastUID: 1}, 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("MarkMailboxDone after delete = %v, want ErrNotFound", err)
	}
	if boxes, _, _ := db.ActiveMailboxes(); len(boxes) != 0 {
		t.Errorf("ActiveMailboxes after delete = %d", len(boxes))
	}
}

// TestMailboxTenantIsolation ensures another organization's mailbox is not
// found, changed or deleted.
func TestMailboxTenantIsolation(t *testing.T) {
	db := storetest.Open(t)
	a := storetest.MustOrganization(t, db, "a", store.PlanBusiness)
	b := storetest.MustOrganization(t, db, "b", store.PlanBusiness)
	m := mustMailbox(t, db, a.ID, "x@a.example")
	if _, err := db.FindMailbox(b.ID, m.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("find: %v", err)
	}
	off := false
	if _, err := db.UpdateMailbox(b.ID, m.ID, store.MailboxUpdate{IsActive: &off}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("update: %v", err)
	}
	if err := db.DeleteMailbox(b.ID, m.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("delete: %v", err)
	}
	if _, total, _ := db.ListMailboxes(b.ID, store.Page{Page: 1, Limit: 10}); total != 0 {
		t.Errorf("org b lists %d mailboxes", total)
	}
	if _, err := db.FindMailbox(a.ID, m.ID); err != nil {
		t.Errorf("owner lost the mailbox: %v", err)
	}
}

// TestMailboxRefusals ensures bad fields are ErrInvalid and nothing is stored.
func TestMailboxRefusals(t *testing.T) {
	db := storetest.Open(t)
	org := storetest.MustOrganization(t, db, "acme", store.PlanBusiness)
	good := store.Mailbox{OrgID: org.ID, Host: "imap.example.com", Port: 993, Security: "tls",
		Username: "u", Auth: "password", Folder: "INBOX"}
	cases := map[string]func(m *store.Mailbox){
		"no host":        func(m *store.Mailbox) { m.Host = " " },
		"host with path": func(m *store.Mailbox) { m.Host = "imap.example.com/x" },
		"port 0":         func(m *store.Mailbox) { m.Port = 0 },
		"port 70000":     func(m *store.Mailbox) { m.Port = 70000 },
		"security":       func(m *store.Mailbox) { m.Security = "ssl" },
		"auth":           func(m *store.Mailbox) { m.Auth = "kerberos" },
		"no user":        func(m *store.Mailbox) { m.Username = "" },
		"no folder":      func(m *store.Mailbox) { m.Folder = "" },
		"control":        func(m *store.Mailbox) { m.Folder = "IN\nBOX" },
		"same archive":   func(m *store.Mailbox) { m.ArchiveFolder = "INBOX" },
	}
	for name, mut := range cases {
		m := good
		mut(&m)
		if err := db.CreateMailbox(&m, sealed); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
	m := good
	if err := db.CreateMailbox(&m, nil); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("no credentials: err = %v", err)
	}
	m = good
	m.OrgID = store.NewID()
	if err := db.CreateMailbox(&m, sealed); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown org: err = %v", err)
	}
	if _, total, _ := db.ListMailboxes(org.ID, store.Page{Page: 1, Limit: 10}); total != 0 {
		t.Errorf("%d mailboxes stored by refused creates", total)
	}
}
