package alert

import (
	"fmt"
	"strings"
	"time"
)

// The mailbox rule: mailbox_failing, after each recorded poll of an IMAP
// mailbox (API.md "Mailboxes (IMAP intake)").

// MailboxFailingAfter is how long every poll of a mailbox must have failed
// before mailbox_failing is raised.
const MailboxFailingAfter = 24 * time.Hour

// maxMailboxError bounds the server's words quoted in the alert.
const maxMailboxError = 500

// Mailbox is what the mailbox rule needs of a mailbox after a poll.
type Mailbox struct {
	ID, Host, Username, Folder string
	// LastError is the last poll's error ("" when it worked).
	LastError string
	// FailingSince is when the current run of failed polls began; zero
	// when the last poll worked.
	FailingSince time.Time
	// Alerted is whether mailbox_failing was raised for this run already.
	Alerted bool
}

// mailboxDetails explain a mailbox_failing alert.
type mailboxDetails struct {
	MailboxID    string    `json:"mailbox_id"`
	Host         string    `json:"host"`
	Username     string    `json:"username"`
	Folder       string    `json:"folder"`
	FailingSince time.Time `json:"failing_since"`
	FailingHours int64     `json:"failing_hours"`
	LastError    string    `json:"last_error"`
}

// EvaluateMailbox returns the mailbox_failing alert (warning) mailbox m
// raises at now: when its polls have failed since at least
// MailboxFailingAfter and the alert was not raised for this run of
// failures. The caller records that it was (Mailbox.Alerted) and ends the
// run at the next poll that works, so a mailbox that fails again for a day
// raises it again.
func (r Rules) EvaluateMailbox(m *Mailbox, now time.Time) *Candidate {
	if r.Disabled || m.FailingSince.IsZero() || m.Alerted || now.Sub(m.FailingSince) < MailboxFailingAfter {
		return nil
	}
	last := strings.ToValidUTF8(m.LastError, "?")
	if len(last) > maxMailboxError {
		last = strings.ToValidUTF8(last[:maxMailboxError], "") + "…"
	}
	hours := int64(now.Sub(m.FailingSince) / time.Hour)
	since := m.FailingSince.UTC().Format("2006-01-02 15:04 UTC")
	why := ""
	if last != "" {
		why = " The last error: " + last + "."
	}
	return &Candidate{
		Type: TypeMailboxFailing, Severity: SeverityWarning,
		Title: fmt.Sprintf("Mailbox %s on %s has failed for %s", m.Username, m.Host, duration(hours)),
		Message: fmt.Sprintf("Every poll of %s on %s (folder %s) since %s has failed, so the reports arriving there are not read.%s "+
			"Check the server, the sign-in and the folder under Settings, Mailboxes; Poll now shows whether it works again.",
			m.Username, m.Host, m.Folder, since, why),
		Details: mailboxDetails{MailboxID: m.ID, Host: m.Host, Username: m.Username, Folder: m.Folder,
			FailingSince: m.FailingSince.UTC(), FailingHours: hours, LastError: last},
	}
}

// duration words a number of hours: "30 hours", "2 days".
func duration(hours int64) string {
	if hours < 48 {
		return fmt.Sprintf("%d hours", hours)
	}
	return fmt.Sprintf("%d days", hours/24)
}
