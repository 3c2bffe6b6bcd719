package alert_test

import (
	"slices"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/alert"
)

// seen is a domain state after earlier evaluations at the stage given.
func seen(stage string) alert.SenderState { return alert.SenderState{Stage: stage} }

// senderWatch is example.com (first report 30 days before now) sending
// 10,000 messages in the current window: 9,900 from Google Workspace
// (known from before) and the groups given.
func senderWatch(groups ...alert.SenderGroup) *alert.SenderWatch {
	return &alert.SenderWatch{DomainID: "d1", Domain: "example.com", FirstReport: now.AddDate(0, 0, -30).Truncate(24 * time.Hour),
		Current: append([]alert.SenderGroup{{Key: "s:Google Workspace", Name: "Google Workspace", Type: "service",
			Messages: 10000 - total(groups), DMARCPassRate: 1}}, groups...),
		Before: map[string]bool{"s:Google Workspace": true, "a:64496": true},
		Advice: alert.SenderAdvice{Stage: "fix_senders"}}
}

func total(gs []alert.SenderGroup) int64 {
	var n int64
	for _, g := range gs {
		n += g.Messages
	}
	return n
}

func mailchimp(n int64) alert.SenderGroup {
	return alert.SenderGroup{Key: "s:Intuit Mailchimp", Name: "Intuit Mailchimp", Type: "service", Messages: n, DMARCPassRate: 0.1,
		Hints: []string{"SPF passes for mcsv.net but is not aligned: sign with DKIM for example.com."}}
}

func types(cs []alert.Candidate) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Type+" "+c.Dedup.Cause)
	}
	return out
}

// TestNewSenderWho ensures which groups can be new senders and the 1 %
// edge: a known service or a base domain from 1 % of the window's mail, an
// AS or unnamed group never, a sender of the look-back window never.
func TestNewSenderWho(t *testing.T) {
	for _, tc := range []struct {
		name  string
		group alert.SenderGroup
		want  bool
	}{
		{"service at exactly 1 %", mailchimp(100), true},
		{"service under 1 %", mailchimp(99), false},
		{"new base domain", alert.SenderGroup{Key: "d:example.org", Name: "example.org", Type: "domain", Messages: 320}, true},
		{"AS only", alert.SenderGroup{Key: "a:64497", Name: "AS64497 Spoof Net", Type: "as", Messages: 5000}, false},
		{"unknown", alert.SenderGroup{Key: "u:", Name: "unknown", Type: "unknown", Messages: 5000}, false},
		{"sent before", alert.SenderGroup{Key: "s:Google Workspace", Name: "Google Workspace", Type: "service", Messages: 1}, false},
		{"no messages", alert.SenderGroup{Key: "d:example.net", Name: "example.net", Type: "domain"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := senderWatch(tc.group)
			cs, next := alert.DefaultRules().EvaluateSenders(w, seen("fix_senders"), now)
			_, announced := next.Announced[tc.group.Key]
			if got := len(cs) == 1; got != tc.want || announced != tc.want {
				t.Fatalf("raised %v, announced %v; want %v", types(cs), announced, tc.want)
			}
			if tc.want && (cs[0].Type != alert.TypeNewSender || cs[0].Severity != alert.SeverityInfo ||
				cs[0].Dedup != (alert.DedupKey{Day: today, DomainID: "d1", Type: alert.TypeNewSender, Cause: tc.group.Key})) {
				t.Errorf("candidate %+v", cs[0])
			}
		})
	}
}

// TestNewSenderText ensures the alert says who, how much, and what to do.
func TestNewSenderText(t *testing.T) {
	cs, _ := alert.DefaultRules().EvaluateSenders(senderWatch(mailchimp(320)), seen("fix_senders"), now)
	if len(cs) != 1 {
		t.Fatalf("raised %v", types(cs))
	}
	c := cs[0]
	if c.Title != "Intuit Mailchimp started sending as example.com (3.2% of its mail)" ||
		c.Message != "Intuit Mailchimp sent 320 of the 10000 messages reported for example.com from 2026-11-21 to 2026-11-22 (3.2%), and none in the 30 days before; 10% of it passed DMARC. SPF passes for mcsv.net but is not aligned: sign with DKIM for example.com." {
		t.Errorf("title %q\nmessage %q", c.Title, c.Message)
	}
	d := detailsOf(t, c)
	if d["sender"] != "Intuit Mailchimp" || d["sender_type"] != "service" || d["messages"] != 320.0 || d["total_messages"] != 10000.0 ||
		d["share"] != 0.032 || d["threshold"] != 0.01 || d["window_from"] != "2026-11-21T00:00:00Z" ||
		d["window_to"] != "2026-11-22T23:59:59Z" || len(d["hints"].([]any)) != 1 {
		t.Errorf("details %v", d)
	}
	passing := alert.SenderGroup{Key: "d:example.org", Name: "example.org", Type: "domain", Messages: 500, DMARCPassRate: 1}
	cs, _ = alert.DefaultRules().EvaluateSenders(senderWatch(passing), seen("fix_senders"), now)
	if len(cs) != 1 || cs[0].Message != "example.org sent 500 of the 10000 messages reported for example.com from 2026-11-21 to 2026-11-22 (5%), and none in the 30 days before; 100% of it passed DMARC. Its mail passes DMARC, so it is set up with example.com's SPF or DKIM records: if you did not set it up, find out who did, and remove it from the records if it should not send as example.com." {
		t.Errorf("passing sender: %+v", cs)
	}
	failing := alert.SenderGroup{Key: "d:example.org", Name: "example.org", Type: "domain", Messages: 500}
	cs, _ = alert.DefaultRules().EvaluateSenders(senderWatch(failing), seen("fix_senders"), now)
	if len(cs) != 1 || cs[0].Message != "example.org sent 500 of the 10000 messages reported for example.com from 2026-11-21 to 2026-11-22 (5%), and none in the 30 days before; 0% of it passed DMARC. If it sends for you, add it to the SPF record (TXT example.com) and have it sign with DKIM for example.com; if not, it is spoofing that an enforcing DMARC policy stops." {
		t.Errorf("failing sender without hints: %+v", cs)
	}
}

// TestNewSenderBaseline ensures a domain's first BaselineDays days raise
// no new_sender: the current window (yesterday and today) must start at
// least 7 days after the first report.
func TestNewSenderBaseline(t *testing.T) {
	curFrom, _, _, _ := alert.DefaultRules().SenderWindows(now)
	for _, tc := range []struct {
		name  string
		first time.Time
		want  bool
	}{
		{"no report yet", time.Time{}, false},
		{"first report 6 days before the window", curFrom.AddDate(0, 0, -6), false},
		{"first report 7 days before the window", curFrom.AddDate(0, 0, -7), true},
		{"first report late on its day", curFrom.AddDate(0, 0, -7).Add(23 * time.Hour), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := senderWatch(mailchimp(500))
			w.FirstReport = tc.first
			cs, next := alert.DefaultRules().EvaluateSenders(w, seen("fix_senders"), now)
			if (len(cs) == 1) != tc.want || (next.Announced != nil) != tc.want {
				t.Errorf("raised %v, state %+v", types(cs), next)
			}
		})
	}
	r := alert.DefaultRules()
	r.BaselineDays = 0
	w := senderWatch(mailchimp(500))
	w.FirstReport = curFrom
	if cs, _ := r.EvaluateSenders(w, seen("fix_senders"), now); len(cs) != 1 {
		t.Errorf("no baseline: %v", types(cs))
	}
}

// TestNewSenderOnce ensures a sender is announced once while it keeps
// sending or while the look-back window remembers it, and may be again
// after a silence longer than the window.
func TestNewSenderOnce(t *testing.T) {
	r := alert.DefaultRules()
	cs, st := r.EvaluateSenders(senderWatch(mailchimp(500)), seen("fix_senders"), now)
	if len(cs) != 1 || st.Announced["s:Intuit Mailchimp"] != today {
		t.Fatalf("raised %v, state %+v", types(cs), st)
	}
	if cs, _ := r.EvaluateSenders(senderWatch(mailchimp(500)), st, now.Add(time.Hour)); len(cs) != 0 {
		t.Errorf("again an hour later: %v", types(cs))
	}
	// The next day it is still absent from the look-back window (it began
	// in the current one): still remembered.
	if cs, _ := r.EvaluateSenders(senderWatch(mailchimp(500)), st, now.AddDate(0, 0, 1)); len(cs) != 0 {
		t.Errorf("again the next day: %v", types(cs))
	}
	// 33 days later the announcement is forgotten: back after a silence.
	later := now.AddDate(0, 0, 33)
	w := senderWatch(mailchimp(500))
	w.FirstReport = now.AddDate(0, 0, -60)
	cs, st2 := r.EvaluateSenders(w, st, later)
	if len(cs) != 1 || st2.Announced["s:Intuit Mailchimp"] != alert.Day(later) {
		t.Errorf("after a silence: %v, state %+v", types(cs), st2)
	}
	// A state remembers no announcement longer than it matters.
	_, st3 := r.EvaluateSenders(senderWatch(), st, later)
	if st3.Announced != nil {
		t.Errorf("an old announcement kept: %+v", st3)
	}
}

// TestSendersFirstEvaluation ensures the first evaluation of a domain (a
// new domain, or the first run after an upgrade) raises nothing, and
// remembers the stage and the senders that would have been new.
func TestSendersFirstEvaluation(t *testing.T) {
	w := senderWatch(mailchimp(500))
	w.Advice.Stage = alert.StageReadyForReject
	cs, st := alert.DefaultRules().EvaluateSenders(w, alert.SenderState{}, now)
	if len(cs) != 0 || st.Stage != alert.StageReadyForReject || st.Announced["s:Intuit Mailchimp"] != today || st.Ready != nil {
		t.Fatalf("raised %v, state %+v", types(cs), st)
	}
	if cs, _ := alert.DefaultRules().EvaluateSenders(w, st, now.Add(time.Hour)); len(cs) != 0 {
		t.Errorf("the second evaluation: %v", types(cs))
	}
}

// TestPolicyReadyTransitions ensures policy_ready follows the stage: it
// fires when the stage becomes ready_for_quarantine or ready_for_reject.
func TestPolicyReadyTransitions(t *testing.T) {
	for _, tc := range []struct {
		old, now string
		want     bool
	}{
		{"fix_senders", alert.StageReadyForQuarantine, true},
		{"not_enough_data", alert.StageReadyForQuarantine, true},
		{"no_record", alert.StageReadyForQuarantine, true},
		{alert.StageReadyForQuarantine, alert.StageReadyForReject, true},
		{"fix_senders", alert.StageReadyForReject, true},
		{"enforced", alert.StageReadyForReject, true},
		{alert.StageReadyForQuarantine, alert.StageReadyForQuarantine, false},
		{alert.StageReadyForReject, alert.StageReadyForReject, false},
		{alert.StageReadyForReject, "enforced", false},
		{alert.StageReadyForQuarantine, "fix_senders", false},
		{"no_record", "not_enough_data", false},
		{"", alert.StageReadyForQuarantine, false},
	} {
		t.Run(tc.old+" to "+tc.now, func(t *testing.T) {
			w := senderWatch()
			w.Advice.Stage = tc.now
			cs, st := alert.DefaultRules().EvaluateSenders(w, seen(tc.old), now)
			if (len(cs) == 1) != tc.want || st.Stage != tc.now {
				t.Fatalf("raised %v, state %+v", types(cs), st)
			}
			if tc.want && (cs[0].Type != alert.TypePolicyReady || cs[0].Severity != alert.SeverityInfo ||
				cs[0].Dedup != (alert.DedupKey{Day: today, DomainID: "d1", Type: alert.TypePolicyReady, Cause: tc.now})) {
				t.Errorf("candidate %+v", cs[0])
			}
		})
	}
}

// TestPolicyReadyText ensures the alert names the record to publish.
func TestPolicyReadyText(t *testing.T) {
	w := senderWatch()
	w.Advice = alert.SenderAdvice{Stage: alert.StageReadyForQuarantine,
		NextRecord: "v=DMARC1; p=quarantine; t=y; rua=mailto:r@reports.example.net",
		Reasons:    []string{"Legitimate mail passes: move to p=quarantine in test mode (t=y) first."}}
	cs, _ := alert.DefaultRules().EvaluateSenders(w, seen("fix_senders"), now)
	if len(cs) != 1 {
		t.Fatalf("raised %v", types(cs))
	}
	c := cs[0]
	if c.Title != "example.com is ready for p=quarantine" ||
		c.Message != `Legitimate mail passes: move to p=quarantine in test mode (t=y) first. Publish this TXT record at _dmarc.example.com: "v=DMARC1; p=quarantine; t=y; rua=mailto:r@reports.example.net".` {
		t.Errorf("title %q\nmessage %q", c.Title, c.Message)
	}
	d := detailsOf(t, c)
	if d["stage"] != alert.StageReadyForQuarantine || d["previous_stage"] != "fix_senders" ||
		d["next_record"] != w.Advice.NextRecord || len(d["reasons"].([]any)) != 1 {
		t.Errorf("details %v", d)
	}
	w.Advice = alert.SenderAdvice{Stage: alert.StageReadyForReject}
	cs, _ = alert.DefaultRules().EvaluateSenders(w, seen(alert.StageReadyForQuarantine), now)
	if len(cs) != 1 || cs[0].Title != "example.com is ready for p=reject" || cs[0].Message != "" || detailsOf(t, cs[0])["next_record"] != nil {
		t.Errorf("without a next record: %+v", cs)
	}
}

// TestPolicyReadyHovering ensures a pass rate hovering at the threshold
// raises policy_ready for a stage once per PolicyReadyRepeatDays.
func TestPolicyReadyHovering(t *testing.T) {
	r := alert.DefaultRules()
	st := seen("fix_senders")
	var raised []time.Time
	for day := range 20 {
		at := now.AddDate(0, 0, day)
		w := senderWatch()
		w.Advice.Stage = []string{alert.StageReadyForQuarantine, "fix_senders"}[day%2]
		var cs []alert.Candidate
		cs, st = r.EvaluateSenders(w, st, at)
		if len(cs) > 0 {
			raised = append(raised, at)
		}
	}
	want := []time.Time{now, now.AddDate(0, 0, 8), now.AddDate(0, 0, 16)}
	if !slices.Equal(raised, want) {
		t.Errorf("raised on %v, want %v", raised, want)
	}
}

// TestSendersDisabled ensures disabled rules raise nothing and still
// remember, so that turning them on later does not raise the past.
func TestSendersDisabled(t *testing.T) {
	w := senderWatch(mailchimp(500))
	w.Advice.Stage = alert.StageReadyForQuarantine
	r := alert.DefaultRules()
	r.Disabled = true
	cs, st := r.EvaluateSenders(w, seen("fix_senders"), now)
	if len(cs) != 0 || st.Stage != alert.StageReadyForQuarantine || st.Announced["s:Intuit Mailchimp"] != today {
		t.Errorf("raised %v, state %+v", types(cs), st)
	}
}

// TestSenderRulesValidate ensures the new thresholds are checked.
func TestSenderRulesValidate(t *testing.T) {
	for _, f := range []func(*alert.Rules){
		func(r *alert.Rules) { r.NewSenderShare = 0 },
		func(r *alert.Rules) { r.NewSenderShare = 1.01 },
		func(r *alert.Rules) { r.BaselineDays = -1 },
		func(r *alert.Rules) { r.PolicyReadyRepeatDays = 0 },
	} {
		r := alert.DefaultRules()
		f(&r)
		if r.Validate() == nil {
			t.Errorf("%+v accepted", r)
		}
	}
	if !alert.ValidType(alert.TypeNewSender) || !alert.ValidType(alert.TypePolicyReady) {
		t.Error("the sender types are not valid types")
	}
}
