package alert_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/alert"
)

// TestMailboxFailing covers when mailbox_failing is raised: after a day of
// failed polls, once per run of failures, never when the last poll worked
// or the rules are off.
func TestMailboxFailing(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		since   time.Time
		alerted bool
		rules   alert.Rules
		want    bool
	}{
		{"last poll worked", time.Time{}, false, alert.DefaultRules(), false},
		{"failing for a minute", at.Add(-time.Minute), false, alert.DefaultRules(), false},
		{"a second short of a day", at.Add(-alert.MailboxFailingAfter + time.Second), false, alert.DefaultRules(), false},
		{"exactly a day", at.Add(-alert.MailboxFailingAfter), false, alert.DefaultRules(), true},
		{"three days", at.Add(-72 * time.Hour), false, alert.DefaultRules(), true},
		{"already alerted in this run", at.Add(-72 * time.Hour), true, alert.DefaultRules(), false},
		{"alerts off", at.Add(-72 * time.Hour), false, alert.Rules{Disabled: true}, false},
		{"clock behind the start", at.Add(time.Hour), false, alert.DefaultRules(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &alert.Mailbox{ID: "m1", Host: "imap.example.com", Username: "dmarc@example.com", Folder: "INBOX",
				LastError: "login failed: AUTHENTICATIONFAILED", FailingSince: tc.since, Alerted: tc.alerted}
			c := tc.rules.EvaluateMailbox(m, at)
			if (c != nil) != tc.want {
				t.Fatalf("raised %+v, want %v", c, tc.want)
			}
			if c == nil {
				return
			}
			if c.Type != alert.TypeMailboxFailing || c.Severity != alert.SeverityWarning || !alert.ValidType(c.Type) {
				t.Errorf("type %s severity %s", c.Type, c.Severity)
			}
			if c.Dedup != (alert.DedupKey{}) {
				t.Errorf("dedup key %+v: the store's mailbox state dedups this alert", c.Dedup)
			}
			for _, want := range []string{"dmarc@example.com", "imap.example.com"} {
				if !strings.Contains(c.Title, want) || !strings.Contains(c.Message, want) {
					t.Errorf("title %q / message %q lack %s", c.Title, c.Message, want)
				}
			}
			if !strings.Contains(c.Message, "AUTHENTICATIONFAILED") || !strings.Contains(c.Message, tc.since.Format("2006-01-02 15:04")) {
				t.Errorf("message %q lacks the error or the start", c.Message)
			}
			raw, err := json.Marshal(c.Details)
			if err != nil {
				t.Fatal(err)
			}
			var d map[string]any
			_ = json.Unmarshal(raw, &d)
			if d["mailbox_id"] != "m1" || d["failing_since"] != tc.since.Format(time.RFC3339) || d["last_error"] == "" ||
				d["failing_hours"] != float64(at.Sub(tc.since)/time.Hour) {
				t.Errorf("details %s", raw)
			}
		})
	}
}

// TestMailboxFailingWording covers the title's duration and a long,
// invalid UTF-8 server error cut to size.
func TestMailboxFailingWording(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		failing time.Duration
		title   string
	}{{24 * time.Hour, "for 24 hours"}, {47 * time.Hour, "for 47 hours"}, {50 * time.Hour, "for 2 days"}, {9 * 24 * time.Hour, "for 9 days"}} {
		c := alert.DefaultRules().EvaluateMailbox(&alert.Mailbox{Host: "h", Username: "u", FailingSince: at.Add(-tc.failing)}, at)
		if c == nil || !strings.HasSuffix(c.Title, tc.title) {
			t.Errorf("%v: %+v", tc.failing, c)
		}
		if c != nil && strings.Contains(c.Message, "The last error") {
			t.Errorf("no error, yet the message quotes one: %q", c.Message)
		}
	}
	long := strings.Repeat("é", 400) + "\xff\xfe"
	c := alert.DefaultRules().EvaluateMailbox(&alert.Mailbox{Host: "h", Username: "u", LastError: long, FailingSince: at.Add(-48 * time.Hour)}, at)
	raw, _ := json.Marshal(c.Details)
	var d struct {
		LastError string `json:"last_error"`
	}
	_ = json.Unmarshal(raw, &d)
	if len(d.LastError) > 510 || !strings.HasSuffix(d.LastError, "…") || strings.Contains(d.LastError, "\ufffd") ||
		!strings.Contains(c.Message, d.LastError) {
		t.Errorf("last error %d bytes: %q", len(d.LastError), d.LastError)
	}
}
