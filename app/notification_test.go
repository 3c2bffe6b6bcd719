package app_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/store"
)

// TestNotificationFor: a person's own entry is the entry of their address
// (any case); an entry that mails nothing is removed; another
// organization's list is untouched; a malformed address is Invalid.
func TestNotificationFor(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	r, err := e.app.NotificationFor(ctx, e.readA, "Amy@Example.org")
	if err != nil || r.Email != "amy@example.org" || r.Digest != store.DigestOff || len(r.Severities) != 0 {
		t.Fatalf("unlisted: %+v (%v)", r, err)
	}
	if _, err := e.app.SetNotificationFor(ctx, e.fullA, "AMY@example.org",
		store.NotificationRecipient{Email: "ignored@example.org", Severities: []string{"critical"}, Digest: "weekly"}); err != nil {
		t.Fatal(err)
	}
	r, err = e.app.NotificationFor(ctx, e.readA, "amy@example.org")
	if err != nil || r.Digest != "weekly" || len(r.Severities) != 1 {
		t.Fatalf("after set: %+v (%v)", r, err)
	}
	if s, _ := e.app.Notifications(ctx, e.fullB); len(s.Recipients) != 0 {
		t.Errorf("beta sees %+v", s.Recipients)
	}
	if _, err := e.app.SetNotificationFor(ctx, e.fullA, "amy@example.org", store.NotificationRecipient{}); err != nil {
		t.Fatal(err)
	}
	if s, _ := e.app.Notifications(ctx, e.fullA); len(s.Recipients) != 0 {
		t.Errorf("an entry mailing nothing is kept: %+v", s.Recipients)
	}
	_, err = e.app.SetNotificationFor(ctx, e.fullA, "amy", store.NotificationRecipient{Digest: "daily"})
	wantKind(t, "bad address", err, app.Invalid)
	_, err = e.app.SetNotifications(ctx, e.fullA, []store.NotificationRecipient{{Email: "a@example.org", Digest: "hourly"}})
	wantKind(t, "bad digest", err, app.Invalid)
	if ae := app.AsError(err); len(ae.Fields) != 1 || ae.Fields[0].Field != "recipients" {
		t.Errorf("fields %+v", ae.Fields)
	}
}

// TestQueueMail: the operator queues a built mail as the organization's;
// a bad mail is Invalid and queues nothing; test mail without a relay
// says none is configured.
func TestQueueMail(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	op := app.Operator(e.alpha)
	st, err := e.app.QueueMail(ctx, op, &store.OutgoingMail{OrgID: e.beta.ID, Kind: store.MailKindDigest, To: "ops@example.org",
		Subject: "Weekly digest", Text: "t", HTML: "<p>h</p>"})
	if err != nil || st.Status != store.MailQueued {
		t.Fatalf("%+v (%v)", st, err)
	}
	if log, _ := e.db.MailLog(e.alpha.ID, 10); len(log) != 1 {
		t.Errorf("alpha's log %+v: the mail is not alpha's", log)
	}
	_, err = e.app.QueueMail(ctx, op, &store.OutgoingMail{Kind: store.MailKindDigest, To: "ops@example.org", Subject: "a\r\nBcc: x@y.z", Text: "t"})
	wantKind(t, "header injection", err, app.Invalid)
	if n, _ := e.db.MailOutboxDepth(); n != 1 {
		t.Errorf("%d queued", n)
	}
	_, err = e.app.SendTestMail(ctx, app.Operator(nil), "ops@example.org")
	wantKind(t, "no relay", err, app.Invalid)
}

// effective returns the organization's effective recipients as
// "email:severities:digest" strings.
func effective(t *testing.T, db *store.DB, orgID string) []string {
	t.Helper()
	list, err := db.EffectiveRecipients(orgID)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range list {
		out = append(out, r.Email+":"+strings.Join(r.Severities, ",")+":"+r.Digest)
	}
	return out
}

// TestMyNotifications: every member reads and changes their own entry
// (a viewer too) and nothing else; members who chose nothing get their
// role's default; "nothing" chosen is kept over the default; keys and
// the operator have no entry of their own; removing a member stops
// their mail; another organization is untouched.
func TestMyNotifications(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	_, _, owner := e.person(e.alpha, "owner@example.org", "owner")
	_, _, admin := e.person(e.alpha, "admin@example.org", "admin")
	vm, _, viewer := e.person(e.alpha, "viewer@example.org", "viewer")
	_, _, betaOwner := e.person(e.beta, "bo@example.org", "owner")

	me, err := e.app.MyNotifications(ctx, owner)
	if err != nil || me.Saved || me.Role != "owner" || me.Digest != store.DigestWeekly || !slices.Equal(me.Severities, []string{"critical"}) {
		t.Fatalf("owner default: %+v (%v)", me, err)
	}
	me, err = e.app.MyNotifications(ctx, viewer)
	if err != nil || me.Saved || me.Digest != store.DigestOff || len(me.Severities) != 0 {
		t.Fatalf("viewer default: %+v (%v)", me, err)
	}
	want := []string{"admin@example.org:critical:weekly", "owner@example.org:critical:weekly"}
	if got := effective(t, e.db, e.alpha.ID); !slices.Equal(got, want) {
		t.Errorf("defaults: %v, want %v", got, want)
	}

	// The viewer changes his own entry, and nothing else.
	me, err = e.app.SetMyNotifications(ctx, viewer, store.NotificationRecipient{Email: "other@example.org", Severities: []string{"critical", "warning"}, Digest: "daily"})
	if err != nil || !me.Saved || me.Email != "viewer@example.org" || me.Digest != "daily" || !slices.Equal(me.Severities, []string{"warning", "critical"}) {
		t.Fatalf("viewer set: %+v (%v)", me, err)
	}
	_, err = e.app.SetNotifications(ctx, viewer, []store.NotificationRecipient{{Email: "x@example.org", Digest: "daily"}})
	wantKind(t, "viewer writes the list", err, app.Forbidden)
	_, err = e.app.SetNotificationFor(ctx, viewer, "owner@example.org", store.NotificationRecipient{})
	wantKind(t, "viewer writes another's entry", err, app.Forbidden)
	s, _ := e.app.Notifications(ctx, viewer)
	if len(s.Recipients) != 1 || s.Recipients[0].Email != "viewer@example.org" {
		t.Errorf("list after the viewer: %+v", s.Recipients)
	}
	_, err = e.app.SetMyNotifications(ctx, viewer, store.NotificationRecipient{Digest: "hourly"})
	wantKind(t, "bad digest", err, app.Invalid)
	if ae := app.AsError(err); len(ae.Fields) != 1 || ae.Fields[0].Field != "digest" {
		t.Errorf("fields %+v", ae.Fields)
	}
	_, err = e.app.SetMyNotifications(ctx, viewer, store.NotificationRecipient{Severities: []string{"loud"}})
	wantKind(t, "bad severity", err, app.Invalid)

	// The admin edits the list: keeps the viewer's entry, adds an
	// address, and chooses nothing for himself (kept over his default).
	if _, err := e.app.SetNotifications(ctx, admin, append(s.Recipients,
		store.NotificationRecipient{Email: "ops@example.org", Severities: []string{"info"}, Digest: "weekly"},
		store.NotificationRecipient{Email: "owner@example.org", Severities: []string{"critical"}, Digest: "weekly"})); err != nil {
		t.Fatal(err)
	}
	if me, err := e.app.SetMyNotifications(ctx, admin, store.NotificationRecipient{}); err != nil || !me.Saved || me.Digest != "off" {
		t.Fatalf("admin off: %+v (%v)", me, err)
	}
	want = []string{"ops@example.org:info:weekly", "owner@example.org:critical:weekly", "viewer@example.org:warning,critical:daily"}
	if got := effective(t, e.db, e.alpha.ID); !slices.Equal(got, want) {
		t.Errorf("effective: %v, want %v", got, want)
	}

	// Keys and the operator are no person.
	_, err = e.app.MyNotifications(ctx, e.fullA)
	wantKind(t, "key reads own", err, app.Forbidden)
	_, err = e.app.SetMyNotifications(ctx, e.fullA, store.NotificationRecipient{Digest: "daily"})
	wantKind(t, "key writes own", err, app.Forbidden)
	_, err = e.app.MyNotifications(ctx, app.Operator(e.alpha))
	wantKind(t, "operator reads own", err, app.Forbidden)

	// Removing the viewer stops his mail (his entry goes).
	if _, err := e.app.RemoveMember(owner, vm.ID); err != nil {
		t.Fatal(err)
	}
	want = []string{"ops@example.org:info:weekly", "owner@example.org:critical:weekly"}
	if got := effective(t, e.db, e.alpha.ID); !slices.Equal(got, want) {
		t.Errorf("after removal: %v, want %v", got, want)
	}
	if s, _ := e.db.NotificationSettings(e.alpha.ID); s.Recipient("viewer@example.org") != nil {
		t.Errorf("the removed viewer's entry stays: %+v", s.Recipients)
	}

	// Beta: its owner's default only, untouched by alpha's changes.
	if got := effective(t, e.db, e.beta.ID); !slices.Equal(got, []string{"bo@example.org:critical:weekly"}) {
		t.Errorf("beta: %v", got)
	}
	if me, err := e.app.MyNotifications(ctx, betaOwner); err != nil || me.Saved {
		t.Errorf("beta owner: %+v (%v)", me, err)
	}
}
