package app_test

import (
	"context"
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
