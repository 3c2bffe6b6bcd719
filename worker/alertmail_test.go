package worker_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-message/mail"

	"github.com/dmarcd/dmarcd/alert"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
	"github.com/dmarcd/dmarcd/worker"
)

// alertMailEnv raises alerts through DNS checks (each one alert with the
// title and message the test chooses) and runs the alert mail job.
type alertMailEnv struct {
	*mailEnv
	job     *worker.AlertMail
	records map[string]string // domain id -> its last DNS record
}

func newAlertMailEnv(t *testing.T, recipients ...store.NotificationRecipient) *alertMailEnv {
	t.Helper()
	e := &alertMailEnv{mailEnv: newMailEnv(t, nil), records: map[string]string{}}
	e.job = &worker.AlertMail{Store: e.db, PublicURL: "https://dmarc.example.net", Window: 10 * time.Minute}
	if _, err := e.db.PutNotificationSettings(e.org.ID, recipients); err != nil {
		t.Fatal(err)
	}
	e.run(t) // the first run starts after the alerts there are (none)
	return e
}

func (e *alertMailEnv) raise(t testing.TB, d *store.Domain, severity, title, message string) *store.Alert {
	t.Helper()
	seen := e.records[d.ID]
	if _, ok := e.records[d.ID]; !ok {
		seen = d.LastDNSRecord
	}
	rec := store.NewID()
	a, err := e.db.RecordDNSCheck(store.DNSCheck{DomainID: d.ID, Seen: seen, Record: rec,
		Alert: &alert.Candidate{Type: alert.TypeDNSRecordChanged, Severity: severity, Title: title, Message: message, Details: map[string]any{}}})
	if err != nil {
		t.Fatal(err)
	}
	e.records[d.ID] = rec
	return a
}

func (e *alertMailEnv) run(t testing.TB) {
	t.Helper()
	if err := e.job.Run(context.Background(), e.clock.Now()); err != nil {
		t.Fatal(err)
	}
}

// queued returns the mail log, oldest first, and the outbox's mails.
func (e *alertMailEnv) mails(t testing.TB) []*store.MailStatus {
	t.Helper()
	log, err := e.db.MailLog(e.org.ID, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for i, j := 0, len(log)-1; i < j; i, j = i+1, j-1 {
		log[i], log[j] = log[j], log[i]
	}
	return log
}

func TestAlertMailGroupsPerDomainAndRecipient(t *testing.T) {
	e := newAlertMailEnv(t,
		store.NotificationRecipient{Email: "Ops@Example.org", Severities: []string{"warning", "critical"}},
		store.NotificationRecipient{Email: "boss@example.org", Severities: []string{"critical"}},
		store.NotificationRecipient{Email: "quiet@example.org", Digest: "weekly"})
	d1 := storetest.MustDomain(t, e.db, e.org.ID, "one.example")
	d2 := storetest.MustDomain(t, e.db, e.org.ID, "two.example")

	e.raise(t, d1, alert.SeverityCritical, "Record gone", "m1")
	e.run(t)
	got := e.mails(t)
	if len(got) != 2 || got[0].To+got[1].To != "ops@example.orgboss@example.org" && got[0].To+got[1].To != "boss@example.orgops@example.org" {
		t.Fatalf("first alert: %d mails %+v, want one each to ops and boss at once", len(got), got)
	}

	// A burst on d1 within the window waits; d2 is its own window.
	e.clock.Advance(time.Minute)
	for i := range 3 {
		e.raise(t, d1, alert.SeverityWarning, fmt.Sprintf("Change %d", i), "m")
	}
	e.raise(t, d1, alert.SeverityInfo, "Info only", "m") // mailed to nobody
	e.raise(t, d2, alert.SeverityWarning, "Other domain", "m")
	e.run(t)
	got = e.mails(t)
	if len(got) != 3 || got[2].To != "ops@example.org" || !strings.Contains(got[2].Subject, "two.example") {
		t.Fatalf("after the burst: %+v, want one more mail (ops, two.example)", got)
	}
	e.clock.Advance(8 * time.Minute)
	e.run(t)
	if n := len(e.mails(t)); n != 3 {
		t.Fatalf("%d mails before the window passed, want 3", n)
	}
	e.clock.Advance(time.Minute)
	e.run(t)
	got = e.mails(t)
	if len(got) != 4 || got[3].To != "ops@example.org" || got[3].Subject != "[dmarcd] 3 alerts for one.example" {
		t.Fatalf("after the window: %+v, want ops's mail of the 3 warnings", got)
	}
	e.clock.Advance(time.Hour)
	e.run(t)
	if n := len(e.mails(t)); n != 4 {
		t.Fatalf("%d mails, want nothing more", n)
	}
}

func TestAlertMailLeavesOutDismissedAlerts(t *testing.T) {
	e := newAlertMailEnv(t, store.NotificationRecipient{Email: "ops@example.org", Severities: []string{"warning"}})
	d := storetest.MustDomain(t, e.db, e.org.ID, "one.example")
	e.raise(t, d, alert.SeverityWarning, "first", "m")
	e.run(t)
	a := e.raise(t, d, alert.SeverityWarning, "dismissed before mailed", "m")
	if _, err := e.db.DismissAlert(e.org.ID, a.ID); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Hour)
	e.run(t)
	if n := len(e.mails(t)); n != 1 {
		t.Fatalf("%d mails, want 1: the only pending alert was dismissed", n)
	}
}

// TestAlertMailHostileText sends the mail of an alert whose title and
// message carry markup and a header injection through the sink, and
// reads it back: escaped in HTML, no header added, links to the alert.
func TestAlertMailHostileText(t *testing.T) {
	e := newAlertMailEnv(t, store.NotificationRecipient{Email: "ops@example.org", Severities: []string{"critical"}})
	d := storetest.MustDomain(t, e.db, e.org.ID, "one.example")
	a := e.raise(t, d, alert.SeverityCritical, "<script>alert(1)</script>\r\nBcc: victim@example.com",
		`<img src=x onerror=alert(2)> "quoted" & more`)
	e.run(t)
	e.send(t)
	got := e.sink.Received()
	if len(got) != 1 || len(got[0].To) != 1 || got[0].To[0] != "ops@example.org" {
		t.Fatalf("received %+v", got)
	}
	r, err := mail.CreateReader(bytes.NewReader(got[0].Data))
	if err != nil {
		t.Fatal(err)
	}
	fields := r.Header.Fields()
	for fields.Next() {
		if strings.EqualFold(fields.Key(), "Bcc") {
			t.Fatal("the alert title added a Bcc header field")
		}
	}
	subject, _ := r.Header.Subject()
	if strings.ContainsAny(subject, "\r\n") || !strings.Contains(subject, "one.example") {
		t.Errorf("subject %q", subject)
	}
	if r.Header.Get("List-Unsubscribe") != "<https://dmarc.example.net/settings/notifications?email=ops%40example.org>" ||
		r.Header.Get("Auto-Submitted") != "auto-generated" {
		t.Errorf("headers: List-Unsubscribe %q, Auto-Submitted %q", r.Header.Get("List-Unsubscribe"), r.Header.Get("Auto-Submitted"))
	}
	parts := map[string]string{}
	for {
		p, err := r.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ct, _, _ := p.Header.(*mail.InlineHeader).ContentType()
		b, _ := io.ReadAll(p.Body)
		parts[ct] = string(b)
	}
	html, text := parts["text/html"], parts["text/plain"]
	link := "https://dmarc.example.net/alerts?domain=" + d.ID + "#alert-" + a.ID
	if strings.Contains(html, "<script>") || strings.Contains(html, "<img") || !strings.Contains(html, "&lt;script&gt;") {
		t.Errorf("the HTML part does not escape the alert text:\n%s", html)
	}
	if !strings.Contains(html, strings.ReplaceAll(link, "#", "#")) || !strings.Contains(text, link) {
		t.Errorf("no link %s in both parts:\n%s\n%s", link, text, html)
	}
	if !strings.Contains(text, "<script>alert(1)</script>") {
		t.Errorf("the text part lost the title:\n%s", text)
	}
}

// BenchmarkAlertMailBurst: a burst of 1,000 alerts over 5 domains for 3
// recipients becomes at most one mail per domain and recipient within
// the window (checked on every iteration). The time is the alert mail
// job's alone (its 21 runs over the burst and the flush after the
// window), not the raising of the alerts.
func BenchmarkAlertMailBurst(b *testing.B) {
	const alerts, domains = 1000, 5
	recipients := []store.NotificationRecipient{
		{Email: "a@example.org", Severities: []string{"info", "warning", "critical"}},
		{Email: "b@example.org", Severities: []string{"warning", "critical"}},
		{Email: "c@example.org", Severities: []string{"critical"}},
	}
	for b.Loop() {
		b.StopTimer()
		clock := storetest.NewClock(storetest.Epoch())
		db := storetest.OpenWithOptions(b, clock, &store.Options{NoSync: true})
		org := storetest.MustOrganization(b, db, "acme", store.PlanUnlimited)
		if _, err := db.PutNotificationSettings(org.ID, recipients); err != nil {
			b.Fatal(err)
		}
		e := &alertMailEnv{mailEnv: &mailEnv{db: db, clock: clock, org: org}, records: map[string]string{},
			job: &worker.AlertMail{Store: db, PublicURL: "https://dmarc.example.net"}}
		e.run(b)
		var ds []*store.Domain
		for i := range domains {
			ds = append(ds, storetest.MustDomain(b, db, org.ID, fmt.Sprintf("d%d.example", i)))
		}
		sevs := []string{alert.SeverityInfo, alert.SeverityWarning, alert.SeverityCritical}
		for i := range alerts {
			e.raise(b, ds[i%domains], sevs[i%3], fmt.Sprintf("alert %d", i), "m")
			if i%50 == 0 { // the job runs during the burst, as it does every 15 s
				b.StartTimer()
				e.run(b)
				b.StopTimer()
			}
			if i%200 == 0 {
				clock.Advance(time.Minute)
			}
		}
		b.StartTimer()
		e.run(b)
		b.StopTimer()
		log, err := db.MailLog(org.ID, 1000)
		if err != nil {
			b.Fatal(err)
		}
		per := map[string]int{}
		for _, m := range log {
			per[m.To]++
		}
		// 5 minutes of burst inside a 10-minute window: the first mail of
		// each domain and recipient at once, the rest held.
		for _, r := range recipients {
			if per[r.Email] > domains {
				b.Fatalf("%s got %d mails in the window, want at most %d (one per domain)", r.Email, per[r.Email], domains)
			}
		}
		clock.Advance(10 * time.Minute)
		b.StartTimer()
		e.run(b)
		b.StopTimer()
		log, _ = db.MailLog(org.ID, 1000)
		if len(log) > 2*domains*len(recipients) {
			b.Fatalf("%d mails after the window, want at most %d", len(log), 2*domains*len(recipients))
		}
		b.ReportMetric(float64(len(log)), "mails/burst")
		b.StartTimer()
	}
}

// TestAlertMailStartsAfterHistory: alerts raised before the first run
// (before alert mail was configured) are not mailed; those after are.
func TestAlertMailStartsAfterHistory(t *testing.T) {
	e := &alertMailEnv{mailEnv: newMailEnv(t, nil), records: map[string]string{}}
	e.job = &worker.AlertMail{Store: e.db, PublicURL: "https://dmarc.example.net"}
	if _, err := e.db.PutNotificationSettings(e.org.ID, []store.NotificationRecipient{{Email: "ops@example.org", Severities: []string{"critical"}}}); err != nil {
		t.Fatal(err)
	}
	d := storetest.MustDomain(t, e.db, e.org.ID, "one.example")
	e.raise(t, d, alert.SeverityCritical, "old", "m")
	e.run(t)
	e.run(t)
	if n := len(e.mails(t)); n != 0 {
		t.Fatalf("%d mails for history", n)
	}
	e.raise(t, d, alert.SeverityCritical, "new", "m")
	e.run(t)
	if got := e.mails(t); len(got) != 1 || !strings.Contains(got[0].Subject, "new") {
		t.Fatalf("mails %+v, want the new alert's", got)
	}
}
