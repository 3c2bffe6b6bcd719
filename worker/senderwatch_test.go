package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/alert"
	"github.com/dmarcd/dmarcd/senders"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// senderEnv is a real store with a settable clock, one organization with
// a webhook and one domain, and the sender views over it.
type senderEnv struct {
	db    *store.DB
	clock *storetest.Clock
	org   *store.Organization
	dom   *store.Domain
	hook  *store.Webhook
	views *senders.Views
	seq   int
}

func newSenderEnv(t *testing.T) *senderEnv {
	t.Helper()
	clock := storetest.NewClock(storetest.Epoch())
	db := storetest.OpenWithClock(t, clock)
	e := &senderEnv{db: db, clock: clock, views: &senders.Views{DB: db, Known: senders.DefaultKnownSenders()}}
	e.org = storetest.MustOrganization(t, db, "acme", store.PlanUnlimited)
	e.dom = storetest.MustDomain(t, db, e.org.ID, "example.com")
	// The domain publishes p=none, as its DNS check saw (the advice reads
	// the policy from DNS, not from the reports).
	dom, err := db.UpdateDomain(e.org.ID, e.dom.ID, func(d *store.Domain) error { d.LastDNSRecord = "v=DMARC1; p=none"; return nil })
	if err != nil {
		t.Fatal(err)
	}
	e.dom = dom
	e.hook = &store.Webhook{OrgID: e.org.ID, URL: "https://hooks.example.net/dmarc", Name: "ops"}
	if err := db.CreateWebhook(e.hook, store.WebhookSecret("whsec_"+strings.Repeat("ab", 32))); err != nil {
		t.Fatal(err)
	}
	// Forward-confirmed names, as the reverse DNS job stores them.
	if err := db.PutRDNS([]store.RDNSEntry{
		{IP: "192.0.2.10", Status: store.RDNSConfirmed, Hostname: "mail.example.com", CheckedAt: clock.Now()},
		{IP: "198.51.100.1", Status: store.RDNSConfirmed, Hostname: "mail1.mcsv.net", CheckedAt: clock.Now()},
	}); err != nil {
		t.Fatal(err)
	}
	return e
}

// report stores yesterday's report: the domain's own server sends 1,000
// messages, fail of them failing DMARC; Mailchimp sends mailchimp messages
// signed for the domain; a spoofer with neither name nor AS sends 30.
func (e *senderEnv) report(t *testing.T, fail, mailchimp int64) {
	t.Helper()
	e.seq++
	begin := e.clock.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -1)
	d, err := e.db.NewReportDraft(store.Report{DomainID: e.dom.ID, Domain: e.dom.Name, OrgID: e.org.ID,
		OrgName: "google.com", OrgEmail: "noreply-dmarc-support@google.com", ExternalReportID: fmt.Sprintf("r%d", e.seq),
		DateBegin: begin, DateEnd: begin.Add(24*time.Hour - time.Second), ReceivedAt: e.clock.Now(),
		PolicyPublished: store.PolicyPublished{Domain: e.dom.Name, P: "none", PCT: 100, ADKIM: "r", ASPF: "r"}})
	if err != nil {
		t.Fatal(err)
	}
	add := func(ip string, n int64, pass bool) {
		if n == 0 {
			return
		}
		res := "fail"
		if pass {
			res = "pass"
		}
		d.Add(&store.Record{SourceIP: ip, Count: n, Disposition: "none", DKIM: store.Verdict(res), SPF: store.Verdict(res), HeaderFrom: e.dom.Name})
	}
	add("192.0.2.10", 1000-fail, true)
	add("192.0.2.10", fail, false)
	add("198.51.100.1", mailchimp, true)
	add("203.0.113.66", 30, false)
	d.Finish()
	outs, err := e.db.NewIngester().Commit(&store.IngestBatch{Reports: []*store.ReportDraft{d}})
	if err != nil || !outs[0].Stored {
		t.Fatalf("storing a report: %v %+v", err, outs)
	}
}

// senderAlerts returns the domain's new_sender and policy_ready alerts,
// oldest first.
func (e *senderEnv) senderAlerts(t *testing.T) []*store.Alert {
	t.Helper()
	as, _, err := e.db.ListAlerts(e.org.ID, store.AlertFilter{Page: store.Page{Page: 1, Limit: 100}})
	if err != nil {
		t.Fatal(err)
	}
	var out []*store.Alert
	for i := len(as) - 1; i >= 0; i-- {
		if as[i].Type == alert.TypeNewSender || as[i].Type == alert.TypePolicyReady {
			out = append(out, as[i])
		}
	}
	return out
}

func (e *senderEnv) watch() *SenderWatch { return &SenderWatch{Store: e.db, Views: e.views} }

// TestSenderWatchOverWeeks ingests a domain's daily reports over six
// weeks and runs the job each day: the first evaluation and the baseline
// week raise nothing; Mailchimp starting on day 10 raises one new_sender;
// the domain's own mail getting fixed brings the advice to
// ready_for_quarantine, which raises one policy_ready; a second run the
// same hour and a restarted job raise nothing more; both alerts are
// queued for the organization's webhook.
func TestSenderWatchOverWeeks(t *testing.T) {
	e := newSenderEnv(t)
	ctx := context.Background()
	w := e.watch()
	raisedOn := map[string]int{}
	for day := range 42 {
		fail, mailchimp := int64(100), int64(0)
		if day >= 15 {
			fail = 0
		}
		if day >= 10 {
			mailchimp = 50
		}
		e.report(t, fail, mailchimp)
		before := len(e.senderAlerts(t))
		if err := w.Run(ctx, e.clock.Now()); err != nil {
			t.Fatal(err)
		}
		// An hour later, and after a restart: nothing new.
		e.clock.Advance(time.Hour)
		if err := w.Run(ctx, e.clock.Now()); err != nil {
			t.Fatal(err)
		}
		if day%7 == 3 {
			w = e.watch()
			if err := w.Run(ctx, e.clock.Now()); err != nil {
				t.Fatal(err)
			}
		}
		as := e.senderAlerts(t)
		for _, a := range as[before:] {
			raisedOn[a.Type] = day
		}
		if len(as) > before+1 {
			t.Errorf("day %d raised %d sender alerts", day, len(as)-before)
		}
		e.clock.Advance(23 * time.Hour)
	}
	as := e.senderAlerts(t)
	if len(as) != 2 || as[0].Type != alert.TypeNewSender || as[1].Type != alert.TypePolicyReady {
		for _, a := range as {
			t.Logf("%s %s: %s", a.CreatedAt, a.Type, a.Title)
		}
		t.Fatalf("%d sender alerts, want a new_sender then a policy_ready", len(as))
	}
	if raisedOn[alert.TypeNewSender] != 10 {
		t.Errorf("new_sender on day %d, want 10", raisedOn[alert.TypeNewSender])
	}
	ns, pr := as[0], as[1]
	if ns.Severity != alert.SeverityInfo || ns.Title != "Intuit Mailchimp started sending as example.com (4.6% of its mail)" ||
		!strings.Contains(ns.Message, "Intuit Mailchimp sent 50 of the 1080 messages reported for example.com") {
		t.Errorf("new_sender %q: %q", ns.Title, ns.Message)
	}
	var det map[string]any
	if err := json.Unmarshal(ns.Details, &det); err != nil || det["sender"] != "Intuit Mailchimp" || det["sender_type"] != "service" {
		t.Errorf("new_sender details %s", ns.Details)
	}
	if pr.Severity != alert.SeverityInfo || pr.Title != "example.com is ready for p=quarantine" ||
		!strings.Contains(pr.Message, "Publish this TXT record at _dmarc.example.com: \"v=DMARC1; p=quarantine; t=y\".") {
		t.Errorf("policy_ready %q: %q", pr.Title, pr.Message)
	}
	if err := json.Unmarshal(pr.Details, &det); err != nil || det["previous_stage"] != "fix_senders" {
		t.Errorf("policy_ready details %s", pr.Details)
	}
	st, err := e.db.SenderAlertState(e.dom.ID)
	if err != nil || st.Stage != alert.StageReadyForQuarantine {
		t.Errorf("state %+v, %v", st, err)
	}
	queued := map[string]bool{}
	ds, err := e.db.DueDeliveries(e.clock.Now(), 1000, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.WebhookID == e.hook.ID {
			queued[d.AlertID] = true
		}
	}
	if !queued[ns.ID] || !queued[pr.ID] {
		t.Errorf("the webhook outbox misses a sender alert: %v", queued)
	}
}

// TestSenderWatchFirstRunAfterUpgrade ensures the first evaluation of a
// domain with months of history raises nothing, though a sender and a
// ready stage are there to announce.
func TestSenderWatchFirstRunAfterUpgrade(t *testing.T) {
	e := newSenderEnv(t)
	for day := range 20 {
		if day > 0 {
			e.clock.Advance(24 * time.Hour)
		}
		e.report(t, 0, int64(day/19)*50) // Mailchimp in the last report only
	}
	if err := e.watch().Run(context.Background(), e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if as := e.senderAlerts(t); len(as) != 0 {
		t.Errorf("the first run raised %s", as[0].Title)
	}
	st, err := e.db.SenderAlertState(e.dom.ID)
	if err != nil || st.Stage != alert.StageReadyForQuarantine || st.Announced == nil {
		t.Errorf("state %+v, %v", st, err)
	}
}

// TestSenderWatchSchedule ensures which runs evaluate: the first, then one
// per Interval; a Resolved call brings a run of the domains with a report
// in the last Interval, at most once per MinGap; domains without a
// report in the last day wait.
func TestSenderWatchSchedule(t *testing.T) {
	e := newSenderEnv(t)
	quiet := storetest.MustDomain(t, e.db, e.org.ID, "quiet.example")
	e.report(t, 0, 0)
	w := e.watch()
	ctx := context.Background()
	evaluated := func() bool {
		t.Helper()
		st, err := e.db.SenderAlertState(e.dom.ID)
		if err != nil {
			t.Fatal(err)
		}
		// Forget, to see whether the next run evaluates again.
		if st.Stage != "" {
			if _, err := e.db.RecordSenderCheck(store.SenderCheck{DomainID: e.dom.ID, Seen: st}); err != nil {
				t.Fatal(err)
			}
		}
		return st.Stage != ""
	}
	now := e.clock.Now()
	steps := []struct {
		at       time.Duration
		resolved bool
		want     bool
	}{
		{0, false, true},                 // at start
		{time.Minute, false, false},      // nothing due
		{2 * time.Minute, true, false},   // resolved, but within MinGap
		{5 * time.Minute, false, true},   // MinGap passed: the resolved run
		{6 * time.Minute, false, false},  // done
		{59 * time.Minute, false, false}, // not yet an Interval
		{60 * time.Minute, false, true},  // the hourly run
		{61 * time.Minute, true, false},  // within MinGap of it
		{66 * time.Minute, false, false}, // resolved run: the report is over an Interval old
	}
	for _, s := range steps {
		if s.resolved {
			w.Resolved()
		}
		if err := w.Run(ctx, now.Add(s.at)); err != nil {
			t.Fatal(err)
		}
		if got := evaluated(); got != s.want {
			t.Errorf("at +%s: evaluated %v, want %v", s.at, got, s.want)
		}
	}
	if st, _ := e.db.SenderAlertState(quiet.ID); st.Stage != "" {
		t.Errorf("a domain without reports was evaluated: %+v", st)
	}
	// A day later the report is too old for the hourly run as well.
	if err := w.Run(ctx, now.Add(25*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if evaluated() {
		t.Error("a domain without a report in the last day was evaluated")
	}
}

// TestSenderWatchDeletedDomain ensures a domain deleted between the list
// and its evaluation is skipped without error.
func TestSenderWatchDeletedDomain(t *testing.T) {
	e := newSenderEnv(t)
	e.report(t, 0, 0)
	d, err := e.db.FindDomainByID(e.dom.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.db.DeleteDomain(e.org.ID, e.dom.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.watch().Check(context.Background(), d, e.clock.Now()); err != nil {
		t.Errorf("a deleted domain: %v", err)
	}
	if st, _ := e.db.SenderAlertState(e.dom.ID); st.Stage != "" {
		t.Errorf("state of a deleted domain %+v", st)
	}
}
