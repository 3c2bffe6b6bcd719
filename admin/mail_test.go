package admin

import (
	"context"
	"errors"
	"testing"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// TestMailOverSocket queues a built mail (a digest sent now) over the
// socket, reads the mail log back, and gets a bad mail and a server
// without a relay refused with the store's kinds.
func TestMailOverSocket(t *testing.T) {
	db, c, _ := serveSocket(t)
	org := storetest.MustOrganization(t, db, "acme", store.PlanUnlimited)
	ctx := context.Background()
	st, err := c.QueueMail(ctx, "acme", &store.OutgoingMail{Kind: store.MailKindDigest, To: "ops@example.org",
		Subject: "Weekly digest of acme", Text: "pass rate 99.1 %", HTML: "<p>pass rate 99.1 %</p>",
		ListUnsubscribe: "https://dmarc.example.net/settings/notifications?email=ops%40example.org"})
	if err != nil || st.Status != store.MailQueued || st.ID == "" {
		t.Fatalf("%+v (%v)", st, err)
	}
	log, err := c.MailLog(ctx, "acme", 0)
	if err != nil || len(log) != 1 || log[0].ID != st.ID {
		t.Fatalf("log %+v (%v)", log, err)
	}
	if all, _ := db.MailLog(org.ID, 10); len(all) != 1 {
		t.Errorf("the mail is not acme's: %+v", all)
	}
	if _, err := c.QueueMail(ctx, "acme", &store.OutgoingMail{Kind: store.MailKindDigest, To: "ops@example.org", Subject: "x\nBcc: y@z.z", Text: "t"}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("header injection: %v", err)
	}
	if _, err := c.QueueMail(ctx, "nope", &store.OutgoingMail{Kind: store.MailKindDigest, To: "ops@example.org", Subject: "s", Text: "t"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown organization: %v", err)
	}
	if _, err := c.SendTestMail(ctx, "ops@example.org"); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("test mail without a relay: %v", err)
	}
}
