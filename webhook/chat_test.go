package webhook_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dmarcd/dmarcd/alert"
	"github.com/dmarcd/dmarcd/internal/chattest"
	"github.com/dmarcd/dmarcd/webhook"
)

// hostile is report text written to break a chat message: Slack links and
// mentions, Markdown links and images, HTML, a forged line, a JSON
// breaker, bidirectional overrides and invalid UTF-8.
const hostile = "<https://evil.example/x|Click here> & <!channel> @channel @here [phish](https://evil.example/p) `code " +
	"![img](https://evil.example/i.png) <b>bold</b>\n*Forged line*\r\n\"},{\"type\":\"x\u202eevil\xff"

// history is an alert.History over nothing raised and nothing seen: every
// rule fires the first time.
type history struct{}

func (history) Raised(alert.DedupKey) (string, bool)           { return "", false }
func (history) RaisedCount(uint32, string, string) int         { return 0 }
func (history) HasSources(string) bool                         { return true }
func (history) SeenSource(string, string, uint32, uint32) bool { return false }

// candidates returns alerts of every type from the real rules, with
// hostile text wherever a report, a DNS answer or a mail server puts
// text of its own.
func candidates(t *testing.T, now time.Time) []alert.Candidate {
	t.Helper()
	r := alert.DefaultRules()
	as, cc := hostile, "US"
	asn := uint32(64496)
	var out []alert.Candidate
	out = append(out, r.EvaluateReport(&alert.Report{
		ID: "0b1c7e2a-0000-4000-8000-000000000001", DomainID: "d1", Domain: "example.com",
		Reporter: hostile, ReporterEmail: hostile, ExternalReportID: hostile,
		DateBegin: now.Add(-24 * time.Hour), DateEnd: now.Add(-time.Hour),
		Messages: 100, DMARCPass: 10, DMARCFail: 90,
		FailingSources: []alert.Source{{IP: "192.0.2.7", Messages: 90, DMARCFail: 90,
			Origin: alert.Origin{CountryCode: &cc, ASN: &asn, ASOrg: &as}}},
	}, history{}, now)...)
	if c := r.EvaluateFailure(&alert.Failure{ID: "f1", DomainID: "d1", Domain: "example.com", SourceIP: "192.0.2.8",
		ArrivalDate: now, Origin: alert.Origin{ASOrg: &as}}, history{}, now); c != nil {
		out = append(out, *c)
	}
	if c := r.EvaluateMailbox(&alert.Mailbox{ID: "m1", Host: "imap.example.com", Username: hostile, Folder: hostile,
		LastError: hostile, FailingSince: now.Add(-48 * time.Hour)}, now); c != nil {
		out = append(out, *c)
	}
	if c := r.EvaluateTLS(&alert.TLSReport{ID: "t1", DomainID: "d1", Domain: "example.com", Reporter: hostile, ReportID: hostile,
		DateBegin: now.Add(-24 * time.Hour), DateEnd: now.Add(-time.Hour), Successful: 10, Failed: 90,
		ResultTypes: map[string]int64{hostile: 90}}, history{}, now); c != nil {
		out = append(out, *c)
	}
	rec := "v=DMARC1; p=reject; rua=mailto:r@reports.example.net"
	for _, ch := range []alert.DNSChange{
		{Domain: "example.com", ReportingEmail: "r@reports.example.net", Active: true, Old: rec, New: ""},
		{Domain: "example.com", ReportingEmail: "r@reports.example.net", Active: true, Old: rec, New: "v=DMARC1; p=none; rua=mailto:r@reports.example.net"},
		{Domain: "example.com", ReportingEmail: "r@reports.example.net", Active: true, Old: rec, New: "v=DMARC1; p=reject; rua=mailto:other@example.org"},
		{Domain: "example.com", ReportingEmail: "r@reports.example.net", Active: true, Old: rec, New: "v=DMARC1; p=reject; rua=mailto:r@reports.example.net; " + hostile},
	} {
		if v := alert.ClassifyDNSChange(ch); v.Alert != nil {
			out = append(out, *v.Alert)
		}
	}
	sc, _ := r.EvaluateSenders(&alert.SenderWatch{DomainID: "d1", Domain: "example.com", FirstReport: now.AddDate(0, 0, -90),
		Current: []alert.SenderGroup{{Key: "s:x", Name: hostile, Type: alert.SenderGroupService, Messages: 100, DMARCPassRate: 0.5, Hints: []string{hostile}}},
		Before:  map[string]bool{}, Advice: alert.SenderAdvice{Stage: alert.StageReadyForReject, NextRecord: hostile, Reasons: []string{hostile}},
	}, alert.SenderState{Stage: "monitoring"}, now)
	out = append(out, sc...)
	seen := map[string]bool{}
	for _, c := range out {
		seen[c.Type] = true
	}
	for _, typ := range []string{alert.TypeDMARCFailureRate, alert.TypeNewFailingSource, alert.TypeFailureReportReceived,
		alert.TypeDNSRecordChanged, alert.TypeDNSRecordMissing, alert.TypePolicyWeakened, alert.TypeReportingAddressRemoved,
		alert.TypeTLSFailureRate, alert.TypeMailboxFailing, alert.TypeNewSender, alert.TypePolicyReady} {
		if !seen[typ] {
			t.Errorf("the rules raised no %s alert for the test", typ)
		}
	}
	return out
}

// eventOf wraps a candidate as the store would: an alert object in an
// alert.created event.
func eventOf(t *testing.T, c alert.Candidate, id string, domainID *string, now time.Time, test bool) *webhook.Event {
	t.Helper()
	det, err := json.Marshal(c.Details)
	if err != nil {
		t.Fatal(err)
	}
	a := map[string]any{"id": id, "domain_id": domainID, "type": c.Type, "severity": c.Severity, "status": "pending",
		"title": c.Title, "message": c.Message, "details": json.RawMessage(det), "created_at": now,
		"sent_at": nil, "dismissed_at": nil}
	ev, err := webhook.NewAlertEvent("evt_"+id, "org-1", a, now, test)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

const public = "https://dmarc.example.net"

// TestChatMessagesOfEveryAlertType renders an alert of every type, each
// full of hostile report text, in both chat formats, and checks them
// against the documented shapes: valid JSON, Slack's and Teams' required
// keys and limits, no link but the one to the alert, no mention; and
// readable: the severity, the domain, the title's words, evidence lines
// and the link to the alert.
func TestChatMessagesOfEveryAlertType(t *testing.T) {
	now := time.Date(2026, 11, 22, 9, 30, 0, 0, time.UTC)
	domainID := "6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f"
	for i, c := range candidates(t, now) {
		id := "a0000000-0000-4000-8000-00000000000" + string(rune('a'+i%6))
		ev := eventOf(t, c, id, &domainID, now, false)
		link := public + "/alerts?domain=" + domainID + "#alert-" + id
		for _, format := range []string{webhook.FormatSlack, webhook.FormatTeams} {
			body, err := webhook.Body(format, ev, webhook.ChatContext{Domain: "example.com", PublicURL: public})
			if err != nil {
				t.Fatalf("%s %s: %v", c.Type, format, err)
			}
			check := chattest.CheckSlack
			if format == webhook.FormatTeams {
				check = chattest.CheckTeams
			}
			if err := check(body, link); err != nil {
				t.Errorf("%s %s: %v\n%s", c.Type, format, err, body)
				continue
			}
			text := visibleText(t, format, body)
			word := map[string]string{"critical": "Critical", "warning": "Warning", "info": "Info"}[c.Severity]
			for _, want := range []string{word + ":", "example.com", link, "dmarcd · " + c.Type} {
				if !strings.Contains(text, want) {
					t.Errorf("%s %s: the message does not say %q:\n%s", c.Type, format, want, text)
				}
			}
			if strings.Contains(text, "\u202e") || strings.Contains(text, "Forged line*\n") || strings.Contains(string(body), `"type":"x`) {
				t.Errorf("%s %s: hostile text changed the message:\n%s", c.Type, format, body)
			}
			if c.Type != alert.TypeDNSRecordMissing && c.Type != alert.TypePolicyWeakened && c.Type != alert.TypeReportingAddressRemoved &&
				c.Type != alert.TypeDNSRecordChanged && !strings.Contains(text, "•") && format == webhook.FormatSlack {
				t.Errorf("%s: no evidence lines:\n%s", c.Type, text)
			}
		}
	}
}

// visibleText is what a person reads of a message: Slack's text and
// blocks, or the card's texts, facts and action URLs.
func visibleText(t *testing.T, format string, body []byte) string {
	t.Helper()
	var b strings.Builder
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if k == "text" || k == "title" || k == "value" || k == "url" {
					if s, ok := x.(string); ok {
						b.WriteString(s + "\n")
						continue
					}
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	walk(v)
	return b.String()
}

// TestSlackEscapes checks the escaping itself on one hostile title and
// message: Slack's three characters become entities, a Markdown link and
// a mention are broken by an invisible space, line breaks are spaces.
func TestSlackEscapes(t *testing.T) {
	now := time.Date(2026, 11, 22, 9, 30, 0, 0, time.UTC)
	c := alert.Candidate{Type: alert.TypeNewSender, Severity: alert.SeverityWarning,
		Title: "a < b & c > d", Message: "[x](https://evil.example) @channel\nnext", Details: map[string]any{}}
	body, err := webhook.Body(webhook.FormatSlack, eventOf(t, c, "id-1", nil, now, false), webhook.ChatContext{})
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Text   string `json:"text"`
		Blocks []struct {
			Type string `json:"type"`
			Text *struct {
				Text string `json:"text"`
			} `json:"text"`
		} `json:"blocks"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"a &lt; b &amp; c &gt; d", "[x]\u200b(https://evil.example) @\u200bchannel next",
		"*Domain:* none (an alert about the organization)"} {
		if !strings.Contains(m.Text, want) {
			t.Errorf("text lacks %q:\n%q", want, m.Text)
		}
	}
	if m.Blocks[0].Type != "header" || m.Blocks[0].Text.Text != "🟠 Warning: a < b & c > d" {
		t.Errorf("header = %+v (plain_text is not escaped)", m.Blocks[0])
	}
	if strings.Contains(m.Text, "Open in dmarcd") {
		t.Errorf("a link without --public-url:\n%s", m.Text)
	}
	if err := chattest.CheckSlack(body, ""); err != nil {
		t.Error(err)
	}
}

// TestChatLimits feeds an alert whose every text is far over the
// services' limits and checks the message is cut to them, still valid,
// and not cut inside an entity or a character.
func TestChatLimits(t *testing.T) {
	now := time.Date(2026, 11, 22, 9, 30, 0, 0, time.UTC)
	long := strings.Repeat("&<é", 5000)
	hints := make([]string, 30)
	for i := range hints {
		hints[i] = long
	}
	c := alert.Candidate{Type: alert.TypeNewSender, Severity: alert.SeverityCritical, Title: long, Message: long,
		Details: map[string]any{"sender": long, "sender_type": long, "hints": hints, "reasons": hints}}
	ev := eventOf(t, c, "id-2", nil, now, false)
	for _, format := range []string{webhook.FormatSlack, webhook.FormatTeams} {
		body, err := webhook.Body(format, ev, webhook.ChatContext{Domain: long, PublicURL: public})
		if err != nil {
			t.Fatal(err)
		}
		check := chattest.CheckSlack
		if format == webhook.FormatTeams {
			check = chattest.CheckTeams
		}
		if err := check(body, public+"/alerts#alert-id-2"); err != nil {
			t.Errorf("%s: %v", format, err)
		}
		if !utf8.Valid(body) || strings.Contains(string(body), "\ufffd") {
			t.Errorf("%s: a character was cut in half", format)
		}
		if !strings.Contains(string(body), "…") {
			t.Errorf("%s: nothing says the text was cut", format)
		}
	}
}

// TestTestEventInChatFormats checks a test event says it is one and
// links to the alerts page, not to an alert.
func TestTestEventInChatFormats(t *testing.T) {
	now := time.Date(2026, 11, 22, 9, 30, 0, 0, time.UTC)
	c := alert.Candidate{Type: alert.TypeDMARCFailureRate, Severity: alert.SeverityInfo, Title: "Test alert from dmarcd",
		Message: "A test.", Details: map[string]any{"reporter": "reporter.example", "messages": 120, "dmarc_fail": 30}}
	ev := eventOf(t, c, "id-3", nil, now, true)
	for _, format := range []string{webhook.FormatSlack, webhook.FormatTeams} {
		body, err := webhook.Body(format, ev, webhook.ChatContext{Domain: "example.com", PublicURL: public + "/"})
		if err != nil {
			t.Fatal(err)
		}
		text := visibleText(t, format, body)
		for _, want := range []string{"🧪 Test (info): Test alert from dmarcd", public + "/alerts\n", "Reporter", "120, of which 30 failed DMARC (25.0%)"} {
			if !strings.Contains(text, want) && !strings.Contains(text, strings.TrimSuffix(want, "\n")+"|") {
				t.Errorf("%s: the test message lacks %q:\n%s", format, want, text)
			}
		}
	}
}

// TestBodyFormats checks the dmarcd format (and none) is Encode's bytes,
// and an unknown format or an event without an alert is an error.
func TestBodyFormats(t *testing.T) {
	now := time.Date(2026, 11, 22, 9, 30, 0, 0, time.UTC)
	ev := eventOf(t, alert.Candidate{Type: "x", Severity: "info", Title: "t", Message: "m", Details: map[string]any{}}, "id-4", nil, now, false)
	want, err := webhook.Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"", webhook.FormatDMARCD} {
		if got, err := webhook.Body(f, ev, webhook.ChatContext{PublicURL: public}); err != nil || string(got) != string(want) {
			t.Errorf("format %q: %s, %v; want Encode's bytes", f, got, err)
		}
	}
	if _, err := webhook.Body("discord", ev, webhook.ChatContext{}); err == nil {
		t.Error("an unknown format rendered")
	}
	noAlert := *ev
	noAlert.Data = json.RawMessage(`{"other":{}}`)
	if _, err := webhook.Body(webhook.FormatSlack, &noAlert, webhook.ChatContext{}); err == nil {
		t.Error("an event without an alert rendered")
	}
	if !webhook.ValidFormat("teams") || webhook.ValidFormat("") || webhook.ValidFormat("Slack") {
		t.Error("ValidFormat")
	}
}

// FuzzChatBody renders alerts of arbitrary text: the message is always
// valid JSON within the documented shapes, and no link but ours.
func FuzzChatBody(f *testing.F) {
	f.Add("title", "message", "reporter", "example.com")
	f.Add(hostile, hostile, hostile, hostile)
	f.Add("&amp;&", "]]((", "@@all", "\xff\xfe")
	now := time.Date(2026, 11, 22, 9, 30, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, title, message, reporter, domain string) {
		c := alert.Candidate{Type: alert.TypeDMARCFailureRate, Severity: alert.SeverityWarning, Title: title, Message: message,
			Details: map[string]any{"reporter": reporter, "top_failing_sources": []map[string]any{{"source_ip": reporter, "as_org": title}}}}
		ev := eventOf(t, c, "id-5", nil, now, false)
		for _, format := range []string{webhook.FormatSlack, webhook.FormatTeams} {
			body, err := webhook.Body(format, ev, webhook.ChatContext{Domain: domain, PublicURL: public})
			if err != nil {
				t.Fatal(err)
			}
			check := chattest.CheckSlack
			if format == webhook.FormatTeams {
				check = chattest.CheckTeams
			}
			if err := check(body, public+"/alerts#alert-id-5"); err != nil {
				t.Fatalf("%s: %v\n%s", format, err, body)
			}
		}
	})
}
