package worker_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gomessage "github.com/emersion/go-message"
	_ "github.com/emersion/go-message/charset"

	"github.com/dmarcd/dmarcd/digest"
	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/ingest/ingesttest"
	"github.com/dmarcd/dmarcd/internal/mailtest"
	"github.com/dmarcd/dmarcd/internal/numfmt"
	"github.com/dmarcd/dmarcd/internal/reportgen"
	"github.com/dmarcd/dmarcd/mailout"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/worker"
)

// digestMails are the digests in the organization's mail log, by
// recipient and subject.
func digestMails(t *testing.T, db *store.DB, orgID string) []string {
	t.Helper()
	log, err := db.MailLog(orgID, 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range log {
		if m.Kind == store.MailKindDigest {
			out = append(out, m.To+" "+m.Subject)
		}
	}
	return out
}

// TestDigestMailOncePerPeriod queues the digests of daily and weekly
// recipients as their periods close, once each across runs and a restart
// of the store, sends them through a go-smtp sink on loopback, and reads
// the received day digest with go-message: both parts state each
// domain's figures as the statistics of that day are.
func TestDigestMailOncePerPeriod(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dmarcd.db")
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	org, err := db.CreateOrganization("acme", store.PlanUnlimited)
	if err != nil {
		t.Fatal(err)
	}
	var doms []*store.Domain
	for i, name := range []string{"example.com", "example.org"} {
		d := &store.Domain{OrgID: org.ID, Name: name, ReportingEmail: fmt.Sprintf("d%d@reports.test", i), DMARCRecord: "v=DMARC1; p=none"}
		if err := db.CreateDomain(d); err != nil {
			t.Fatal(err)
		}
		doms = append(doms, d)
	}
	p, stop := ingesttest.Start(t, ingest.Config{Store: db})
	seed := int64(0)
	for day := 10; day <= 29; day++ {
		for _, d := range doms {
			seed++
			xml := reportgen.Generate(seed, 30, reportgen.Options{Domain: d.Name, ReportID: fmt.Sprint("r", seed),
				Begin: time.Date(2026, 11, day, 0, 0, 0, 0, time.UTC)})
			if _, err := p.Ingest(context.Background(), bytes.NewReader(xml), ingest.Arrival{Source: ingest.SourceImport, OrgID: org.ID, Name: "r.xml"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	stop()
	if _, err := db.PutNotificationSettings(org.ID, []store.NotificationRecipient{
		{Email: "daily@example.net", Digest: store.DigestDaily},
		{Email: "weekly@example.net", Digest: store.DigestWeekly},
		{Email: "off@example.net", Digest: store.DigestOff, Severities: []string{"critical"}},
	}); err != nil {
		t.Fatal(err)
	}
	at := func(day, hour int) time.Time { return time.Date(2026, 11, day, hour, 0, 0, 0, time.UTC) }
	job := &worker.DigestMail{Store: db, Builder: &digest.Builder{DB: db}, PublicURL: "https://dmarc.example.net"}
	run := func(now time.Time, want ...string) {
		t.Helper()
		if err := job.Run(context.Background(), now); err != nil {
			t.Fatal(err)
		}
		got := digestMails(t, db, org.ID)
		slices.Sort(got)
		slices.Sort(want)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("at %s the digests queued are\n%s\nwant\n%s", now, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	// Sunday 29th before 06:00: the day of the 27th, the week of the
	// 16th (due since Monday 23rd, 06:00).
	day27 := "daily@example.net Daily DMARC digest for acme: Fri 27 Nov 2026"
	week16 := "weekly@example.net Weekly DMARC digest for acme: week of 16–22 Nov 2026"
	day28 := "daily@example.net Daily DMARC digest for acme: Sat 28 Nov 2026"
	run(at(29, 5), day27, week16)
	run(at(29, 5).Add(30*time.Minute), day27, week16)
	// A restart: the markers are in the file.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = store.Open(path, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	job = &worker.DigestMail{Store: db, Builder: &digest.Builder{DB: db}, PublicURL: "https://dmarc.example.net"}
	run(at(29, 5).Add(50*time.Minute), day27, week16)
	run(at(29, 6), day28, day27, week16)
	run(at(29, 23), day28, day27, week16)
	day29 := "daily@example.net Daily DMARC digest for acme: Sun 29 Nov 2026"
	week23 := "weekly@example.net Weekly DMARC digest for acme: week of 23–29 Nov 2026"
	run(at(30, 5), day28, day27, week16)
	run(at(30, 7), day29, week23, day28, day27, week16)

	// Send them and read the day digest of the 28th as received.
	sink := mailtest.StartSink(t, mailtest.SinkConfig{TLS: "none"})
	relay, err := mailout.NewRelay(mailout.RelayConfig{Addr: sink.Addr, TLS: mailout.TLSNone, From: "dmarcd@example.net"})
	if err != nil {
		t.Fatal(err)
	}
	sender := &worker.MailSender{Store: db, Relay: relay}
	if err := sender.SendDue(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	got := sink.WaitReceived(t, 5, 10*time.Second)
	var text, html string
	for _, r := range got {
		if s, tx, h := readDigest(t, r.Data); s == strings.TrimPrefix(day28, "daily@example.net ") {
			if r.To[0] != "daily@example.net" {
				t.Errorf("the daily digest went to %v", r.To)
			}
			text, html = tx, h
		}
	}
	if text == "" {
		t.Fatal("the digest of the 28th was not received")
	}
	day := at(28, 0)
	for _, d := range doms {
		st, err := db.DomainStatistics(org.ID, d.ID, day, day)
		if err != nil {
			t.Fatal(err)
		}
		if st.MessageCount == 0 {
			t.Fatalf("%s had no mail on the 28th: the test proves nothing", d.Name)
		}
		count, rate := numfmt.Count(st.MessageCount), numfmt.Percent(st.DMARC.PassRate)
		line := fmt.Sprintf("%s: %s messages", d.Name, count)
		found := false
		for _, l := range strings.Split(text, "\n") {
			found = found || strings.HasPrefix(l, line) && strings.Contains(l, "DMARC pass "+rate)
		}
		if !found {
			t.Errorf("the text part has no line %q with %s:\n%s", line, rate, text)
		}
		i := strings.Index(html, ">"+d.Name+"<")
		if i < 0 || !strings.Contains(html[i:], ">"+count+"<") || !strings.Contains(html[i:], ">"+rate+"<") {
			t.Errorf("the HTML part lacks %s's %s messages and %s", d.Name, count, rate)
		}
	}
}

// readDigest parses a received message with go-message: its subject and
// its text and HTML parts.
func readDigest(t *testing.T, raw []byte) (subject, text, html string) {
	t.Helper()
	e, err := gomessage.Read(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if subject, err = e.Header.Text("Subject"); err != nil {
		t.Fatal(err)
	}
	mr := e.MultipartReader()
	if mr == nil {
		t.Fatalf("not multipart: %s", e.Header.Get("Content-Type"))
	}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ct, _, _ := part.Header.ContentType()
		body, err := io.ReadAll(part.Body)
		if err != nil {
			t.Fatal(err)
		}
		switch ct {
		case "text/plain":
			text = string(body)
		case "text/html":
			html = string(body)
		}
	}
	if text == "" || html == "" {
		t.Fatalf("parts: text %d bytes, HTML %d bytes", len(text), len(html))
	}
	return subject, text, html
}
