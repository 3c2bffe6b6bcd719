package alert_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/alert"
)

// report is a report of domain d1 for yesterday (UTC), ending an hour
// before now, with the counts given and no failing source.
func report(messages, fail int64) *alert.Report {
	begin := now.UTC().Truncate(24*time.Hour).AddDate(0, 0, -1)
	return &alert.Report{ID: "r1", DomainID: "d1", Domain: "example.com", Reporter: "google.com",
		ReporterEmail: "noreply@google.com", ExternalReportID: "ext-1", DateBegin: begin, DateEnd: now.Add(-time.Hour),
		Messages: messages, DMARCPass: messages - fail, DMARCFail: fail}
}

func source(ip string, messages, fail int64) alert.Source {
	us, asn, org := "US", uint32(15169), "GOOGLE"
	return alert.Source{IP: ip, Messages: messages, DMARCPass: messages - fail, DMARCFail: fail,
		Origin: alert.Origin{CountryCode: &us, ASN: &asn, ASOrg: &org}}
}

// kinds renders candidates as "type/severity".
func kinds(cs []alert.Candidate) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, c.Type+"/"+c.Severity)
	}
	return out
}

// TestFailureRate ensures the thresholds hold at their edges: at least
// MinFailing failing messages, warning from 10 %, critical from 50 %.
func TestFailureRate(t *testing.T) {
	for _, c := range []struct {
		messages, fail int64
		want           string // severity, "" for no alert
	}{
		{100, 10, alert.SeverityWarning}, // 10 % and 10 failing: both edges
		{100, 9, ""},                     // 9 %, and under 10 failing
		{101, 10, ""},                    // 9.9 %
		{10, 9, ""},                      // 90 % but 9 failing
		{1, 1, ""},                       // one failing message of one is no alarm
		{20, 10, alert.SeverityCritical}, // 50 %
		{21, 10, alert.SeverityWarning},  // 47.6 %
		{1000, 999, alert.SeverityCritical},
		{0, 0, ""},
		{0, 10, ""}, // a report counting no messages
	} {
		got := alert.DefaultRules().EvaluateReport(report(c.messages, c.fail), newHistory(), now)
		want := []string{}
		if c.want != "" {
			want = []string{alert.TypeDMARCFailureRate + "/" + c.want}
		}
		if !slices.Equal(kinds(got), want) {
			t.Errorf("%d of %d failing: %v, want %v", c.fail, c.messages, kinds(got), want)
		}
	}
}

// TestFailureRateOncePerDayAndSeverity ensures an alert raised today holds
// back one of the same or a lower severity, not a higher one, and that
// yesterday's holds back nothing.
func TestFailureRateOncePerDayAndSeverity(t *testing.T) {
	key := alert.DedupKey{Day: today, DomainID: "d1", Type: alert.TypeDMARCFailureRate}
	for _, c := range []struct {
		before   string
		day      uint32
		fail     int64
		want     int
		whatWant string
	}{
		{alert.SeverityWarning, today, 20, 0, "a second warning"},
		{alert.SeverityWarning, today, 60, 1, "critical after a warning"},
		{alert.SeverityCritical, today, 20, 0, "a warning after a critical"},
		{alert.SeverityCritical, today, 60, 0, "a second critical"},
		{alert.SeverityCritical, today - 1, 20, 1, "a warning the day after a critical"},
	} {
		h := newHistory()
		k := key
		k.Day = c.day
		h.raised[k] = c.before
		if got := alert.DefaultRules().EvaluateReport(report(100, c.fail), h, now); len(got) != c.want {
			t.Errorf("%s: %v", c.whatWant, kinds(got))
		}
	}
}

// TestFailureRateCandidate ensures the alert says what happened: its
// texts, its details (the five sources with most mail among those
// failing) and its dedup key.
func TestFailureRateCandidate(t *testing.T) {
	rep := report(200, 120)
	for i := range 7 {
		rep.FailingSources = append(rep.FailingSources, source(fmt.Sprintf("192.0.2.%d", i), int64(10+i), int64(10+i)))
	}
	rep.FailingSources = append(rep.FailingSources, source("192.0.2.99", 16, 1)) // ties 192.0.2.6 on messages
	h := newHistory()
	h.hasSources = false // no new sources: the failure rate alone
	got := alert.DefaultRules().EvaluateReport(rep, h, now)
	if len(got) != 1 {
		t.Fatalf("%v", kinds(got))
	}
	c := got[0]
	if c.Title != "60% of the mail from example.com failed DMARC" ||
		c.Message != "The report of google.com (2026-11-21 to 2026-11-22) counts 120 of 200 messages failing DMARC (60%), at or over the critical threshold of 50%." {
		t.Errorf("texts: %q / %q", c.Title, c.Message)
	}
	if c.Dedup != (alert.DedupKey{Day: today, DomainID: "d1", Type: alert.TypeDMARCFailureRate}) {
		t.Errorf("dedup key %+v", c.Dedup)
	}
	d := detailsOf(t, c)
	if d["report_id"] != "r1" || d["reporter"] != "google.com" || d["external_report_id"] != "ext-1" ||
		d["failure_rate"] != 0.6 || d["threshold"] != 0.5 || d["min_failing"] != 10.0 || d["dmarc_fail"] != 120.0 ||
		d["date_begin"] != "2026-11-21T00:00:00Z" {
		t.Errorf("details %v", d)
	}
	var ips []string
	for _, s := range d["top_failing_sources"].([]any) {
		m := s.(map[string]any)
		ips = append(ips, m["source_ip"].(string))
		if m["country_code"] != "US" || m["asn"] != 15169.0 || m["as_org"] != "GOOGLE" {
			t.Errorf("source %v", m)
		}
	}
	if want := []string{"192.0.2.6", "192.0.2.99", "192.0.2.5", "192.0.2.4", "192.0.2.3"}; !slices.Equal(ips, want) {
		t.Errorf("top failing sources %v, want %v", ips, want)
	}
	if none := detailsOf(t, alert.DefaultRules().EvaluateReport(report(100, 60), newHistory(), now)[0]); len(none["top_failing_sources"].([]any)) != 0 {
		t.Errorf("a report without failing sources lists %v", none["top_failing_sources"])
	}
}

// TestReportAge ensures a report that ended MaxReportAge ago still raises
// alerts, and one a second older does not.
func TestReportAge(t *testing.T) {
	r := alert.DefaultRules()
	for _, c := range []struct {
		age  time.Duration
		want int
	}{{r.MaxReportAge, 2}, {r.MaxReportAge + time.Second, 0}, {0, 2}} {
		rep := report(100, 60)
		rep.DateEnd = now.Add(-c.age)
		rep.DateBegin = rep.DateEnd.Add(-24 * time.Hour)
		rep.FailingSources = []alert.Source{source("198.51.100.1", 60, 60)}
		if got := r.EvaluateReport(rep, newHistory(), now); len(got) != c.want {
			t.Errorf("ended %v ago: %v, want %d alerts", c.age, kinds(got), c.want)
		}
	}
	if r.Fresh(now.Add(-r.MaxReportAge-time.Second), now) || !r.Fresh(now.Add(time.Hour), now) {
		t.Error("Fresh disagrees")
	}
}

// TestNewFailingSources ensures a failing source is new when it was not
// seen in the 30 days before the report's day up to that day, that the
// baseline report raises none, and that the alerts come most failing
// first.
func TestNewFailingSources(t *testing.T) {
	day := today - 1 // the report's day
	rep := report(100, 3)
	rep.FailingSources = []alert.Source{
		source("192.0.2.1", 1, 1),   // seen the same day
		source("192.0.2.2", 1, 1),   // seen 30 days before: known
		source("192.0.2.3", 5, 1),   // seen 31 days before: new
		source("192.0.2.4", 9, 2),   // never seen: new, more failing
		source("2001:db8::1", 1, 1), // never seen
		source("192.0.2.11", 1, 1),  // raised today already
	}
	h := newHistory()
	h.seen["192.0.2.1"] = []uint32{day}
	h.seen["192.0.2.2"] = []uint32{day - 30}
	h.seen["192.0.2.3"] = []uint32{day - 31, day + 1}
	h.raised[alert.DedupKey{Day: today, DomainID: "d1", Type: alert.TypeNewFailingSource, Cause: "192.0.2.11"}] = alert.SeverityInfo
	got := alert.DefaultRules().EvaluateReport(rep, h, now)
	var ips []string
	for _, c := range got {
		if c.Type != alert.TypeNewFailingSource || c.Severity != alert.SeverityInfo ||
			c.Dedup != (alert.DedupKey{Day: today, DomainID: "d1", Type: alert.TypeNewFailingSource, Cause: c.Dedup.Cause}) {
			t.Errorf("candidate %+v", c)
		}
		ips = append(ips, c.Dedup.Cause)
	}
	if want := []string{"192.0.2.4", "192.0.2.3", "2001:db8::1"}; !slices.Equal(ips, want) {
		t.Errorf("new sources %v, want %v", ips, want)
	}
	c := got[0]
	if c.Title != "New source 192.0.2.4 sends mail failing DMARC for example.com" ||
		c.Message != "192.0.2.4 (US, AS15169 GOOGLE) sent 2 messages failing DMARC in the report of google.com (2026-11-21 to 2026-11-22) and was not seen for example.com in the 30 days before." {
		t.Errorf("texts: %q / %q", c.Title, c.Message)
	}
	d := detailsOf(t, c)
	if d["source_ip"] != "192.0.2.4" || d["dmarc_fail"] != 2.0 || d["window_days"] != 30.0 ||
		d["report"].(map[string]any)["report_id"] != "r1" {
		t.Errorf("details %v", d)
	}

	h.hasSources = false // the domain's first report: its baseline
	if got := alert.DefaultRules().EvaluateReport(rep, h, now); len(got) != 0 {
		t.Errorf("the baseline report raised %v", kinds(got))
	}
}

// TestNewFailingSourceCap ensures at most MaxNewSourceAlerts are raised
// per domain and day, counting those raised before, and none for a
// report too old to be learnt.
func TestNewFailingSourceCap(t *testing.T) {
	rep := report(1000, 40)
	for i := range 40 {
		rep.FailingSources = append(rep.FailingSources, source(fmt.Sprintf("203.0.113.%d", i), 1, 1))
	}
	h := newHistory()
	if got := alert.DefaultRules().EvaluateReport(rep, h, now); len(got) != 10 {
		t.Errorf("%d alerts, want the cap of 10", len(got))
	}
	for i := range 8 {
		h.raised[alert.DedupKey{Day: today, DomainID: "d1", Type: alert.TypeNewFailingSource, Cause: fmt.Sprint(i)}] = alert.SeverityInfo
	}
	h.raised[alert.DedupKey{Day: today, DomainID: "d2", Type: alert.TypeNewFailingSource, Cause: "x"}] = alert.SeverityInfo
	h.raised[alert.DedupKey{Day: today - 1, DomainID: "d1", Type: alert.TypeNewFailingSource, Cause: "x"}] = alert.SeverityInfo
	if got := alert.DefaultRules().EvaluateReport(rep, h, now); len(got) != 2 {
		t.Errorf("%d alerts after 8 today, want 2", len(got))
	}
	r := alert.DefaultRules()
	r.MaxNewSourceAlerts = 50
	if got := r.EvaluateReport(rep, newHistory(), now); len(got) != 40 {
		t.Errorf("%d alerts under a cap of 50, want all 40", len(got))
	}

	// A report whose first day is more than the window before today:
	// its sources are not learnt, so it cannot tell a new one.
	old := report(100, 40)
	old.FailingSources = rep.FailingSources
	old.DateBegin = now.AddDate(0, 0, -32)
	if got := alert.DefaultRules().EvaluateReport(old, newHistory(), now); len(got) != 1 || got[0].Type != alert.TypeDMARCFailureRate {
		t.Errorf("a report begun 32 days ago: %v", kinds(got))
	}
}

// TestSourceWindow ensures the window and the learning horizon follow
// NewSourceDays, clamped at day 0.
func TestSourceWindow(t *testing.T) {
	r := alert.DefaultRules()
	if from, to := r.SourceWindow(100); from != 70 || to != 100 {
		t.Errorf("window of day 100: %d..%d", from, to)
	}
	if from, to := r.SourceWindow(5); from != 0 || to != 5 {
		t.Errorf("window of day 5: %d..%d", from, to)
	}
	if !r.KeepsSources(69, 100) || r.KeepsSources(68, 100) || !r.KeepsSources(100, 100) || !r.KeepsSources(101, 100) {
		t.Error("KeepsSources disagrees with the window")
	}
}

// TestDisabledRules ensures disabled rules raise nothing.
func TestDisabledRules(t *testing.T) {
	rep := report(100, 60)
	rep.FailingSources = []alert.Source{source("198.51.100.1", 60, 60)}
	off := alert.Rules{Disabled: true}
	if got := off.EvaluateReport(rep, newHistory(), now); len(got) != 0 {
		t.Errorf("disabled rules raised %v", kinds(got))
	}
	if got := off.EvaluateFailure(&alert.Failure{ID: "f", DomainID: "d1", Domain: "example.com"}, newHistory(), now); got != nil {
		t.Errorf("disabled rules raised %+v", got)
	}
}
