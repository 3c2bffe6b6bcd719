package store_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

func TestNotificationSettings(t *testing.T) {
	db := storetest.Open(t)
	org := storetest.MustOrganization(t, db, "acme", store.PlanUnlimited)
	other := storetest.MustOrganization(t, db, "other", store.PlanUnlimited)

	s, err := db.NotificationSettings(org.ID)
	if err != nil || len(s.Recipients) != 0 || s.UpdatedAt != nil {
		t.Fatalf("fresh settings %+v (%v)", s, err)
	}
	s, err = db.PutNotificationSettings(org.ID, []store.NotificationRecipient{
		{Email: " Zed@Example.org ", Severities: []string{"critical", "info", "critical"}, Digest: "weekly"},
		{Email: "amy@example.org"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Recipients) != 2 || s.Recipients[0].Email != "amy@example.org" || s.Recipients[0].Digest != "off" ||
		len(s.Recipients[0].Severities) != 0 || s.Recipients[1].Email != "zed@example.org" ||
		strings.Join(s.Recipients[1].Severities, ",") != "info,critical" || s.UpdatedAt == nil {
		t.Fatalf("stored %+v", s)
	}
	if r := s.Recipient("ZED@example.org"); r == nil || r.Digest != "weekly" {
		t.Errorf("Recipient: %+v", r)
	}
	if o, _ := db.NotificationSettings(other.ID); len(o.Recipients) != 0 {
		t.Errorf("the other organization sees %+v", o.Recipients)
	}

	// One entry: set, then removed.
	s, err = db.PutNotificationRecipient(org.ID, store.NotificationRecipient{Email: "AMY@example.org", Digest: "daily"}, false)
	if err != nil || len(s.Recipients) != 2 || s.Recipient("amy@example.org").Digest != "daily" {
		t.Fatalf("after setting amy: %+v (%v)", s, err)
	}
	s, err = db.PutNotificationRecipient(org.ID, store.NotificationRecipient{Email: "amy@example.org"}, true)
	if err != nil || len(s.Recipients) != 1 {
		t.Fatalf("after removing amy: %+v (%v)", s, err)
	}

	var seen []string
	if err := db.AllNotificationSettings(func(s *store.NotificationSettings) error {
		seen = append(seen, s.OrgID)
		return nil
	}); err != nil || len(seen) != 1 || seen[0] != org.ID {
		t.Errorf("AllNotificationSettings: %v (%v)", seen, err)
	}

	if _, err := db.DeleteOrganization(org.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.NotificationSettings(org.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("settings of a deleted organization: %v", err)
	}
	seen = nil
	_ = db.AllNotificationSettings(func(s *store.NotificationSettings) error { seen = append(seen, s.OrgID); return nil })
	if len(seen) != 0 {
		t.Errorf("settings left after the organization was deleted: %v", seen)
	}
}

func TestNotificationSettingsRefused(t *testing.T) {
	db := storetest.Open(t)
	org := storetest.MustOrganization(t, db, "acme", store.PlanUnlimited)
	many := make([]store.NotificationRecipient, store.MaxNotificationRecipients+1)
	for i := range many {
		many[i] = store.NotificationRecipient{Email: "a" + strings.Repeat("b", i%50) + string(rune('a'+i%26)) + "@x" + string(rune('a'+i/26)) + ".example"}
	}
	for name, list := range map[string][]store.NotificationRecipient{
		"no address":     {{Email: ""}},
		"not an address": {{Email: "ops"}},
		"display name":   {{Email: "Ops <ops@example.org>"}},
		"CRLF":           {{Email: "ops@example.org\r\nBcc: x@example.org"}},
		"two addresses":  {{Email: "a@example.org, b@example.org"}},
		"bad severity":   {{Email: "a@example.org", Severities: []string{"urgent"}}},
		"bad digest":     {{Email: "a@example.org", Digest: "hourly"}},
		"listed twice":   {{Email: "a@example.org"}, {Email: "A@example.org"}},
		"too many":       many,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := db.PutNotificationSettings(org.ID, list); !errors.Is(err, store.ErrInvalid) {
				t.Errorf("%v, want ErrInvalid", err)
			}
		})
	}
	if _, err := db.PutNotificationSettings(store.NewID(), nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown organization: %v", err)
	}
}

func TestEnqueueMailRefused(t *testing.T) {
	db := storetest.Open(t)
	ok := store.OutgoingMail{Kind: store.MailKindAlert, To: "a@example.org", Subject: "s", Text: "t"}
	for name, change := range map[string]func(m *store.OutgoingMail){
		"CRLF in subject":   func(m *store.OutgoingMail) { m.Subject = "s\r\nBcc: x@example.org" },
		"LF in unsubscribe": func(m *store.OutgoingMail) { m.ListUnsubscribe = "https://x/\nBcc: y" },
		"CR in a header":    func(m *store.OutgoingMail) { m.Headers = map[string]string{"X-A": "a\rb"} },
		"colon in a name":   func(m *store.OutgoingMail) { m.Headers = map[string]string{"X-A: b": "c"} },
		"bad address":       func(m *store.OutgoingMail) { m.To = "a@example.org\r\n" + "RCPT TO:<b@x>" },
		"no body":           func(m *store.OutgoingMail) { m.Text = "" },
		"no subject":        func(m *store.OutgoingMail) { m.Subject = " " },
		"unknown kind":      func(m *store.OutgoingMail) { m.Kind = "spam" },
		"too large":         func(m *store.OutgoingMail) { m.HTML = strings.Repeat("x", 600<<10) },
		"malformed org id":  func(m *store.OutgoingMail) { m.OrgID = "acme" },
	} {
		t.Run(name, func(t *testing.T) {
			m := ok
			change(&m)
			if _, err := db.EnqueueMail(&m); !errors.Is(err, store.ErrInvalid) {
				t.Errorf("%v, want ErrInvalid", err)
			}
		})
	}
	if n, _ := db.MailOutboxDepth(); n != 0 {
		t.Errorf("%d mails queued", n)
	}
}
