package alert_test

import (
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/alert"
)

// tlsReport is a one-day TLS report of d1 ending an hour before now.
func tlsReport(ok, failed int64) *alert.TLSReport {
	end := now.Add(-time.Hour)
	return &alert.TLSReport{ID: "t1", DomainID: "d1", Domain: "example.com", Reporter: "Google Inc.",
		ReportID: "2026-11-21T00:00:00Z_example.com", DateBegin: end.Add(-24 * time.Hour), DateEnd: end,
		Successful: ok, Failed: failed,
		ResultTypes: map[string]int64{"certificate-expired": failed - failed/3, "starttls-not-supported": failed / 3}}
}

// TestTLSFailureRateThresholds ensures the bands of API.md: warning at 5 %
// and 10 failed sessions, critical at 25 % and 10 failed sessions.
func TestTLSFailureRateThresholds(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ok, failed int64
		want       string // severity, "" for none
	}{
		{"none failed", 1000, 0, ""},
		{"9 failed of 9: too few", 0, 9, ""},
		{"4.9 %", 1902, 98, ""},
		{"5 % and 10 failed", 190, 10, alert.SeverityWarning},
		{"24.9 %", 751, 249, alert.SeverityWarning},
		{"25 %", 30, 10, alert.SeverityCritical},
		{"all failed", 0, 10, alert.SeverityCritical},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := alert.DefaultRules().EvaluateTLS(tlsReport(tc.ok, tc.failed), newHistory(), now)
			switch {
			case tc.want == "" && c != nil:
				t.Fatalf("raised %+v", c)
			case tc.want != "" && c == nil:
				t.Fatal("raised nothing")
			case c != nil && (c.Severity != tc.want || c.Type != alert.TypeTLSFailureRate):
				t.Fatalf("raised %s %s, want %s", c.Type, c.Severity, tc.want)
			}
		})
	}
}

// TestTLSFailureRateDetailsAndDedup ensures the alert names the worst
// failure, is remembered per domain and UTC day, and that only a worse
// severity repeats it that day.
func TestTLSFailureRateDetailsAndDedup(t *testing.T) {
	h := newHistory()
	c := alert.DefaultRules().EvaluateTLS(tlsReport(170, 30), h, now)
	if c == nil {
		t.Fatal("no alert")
	}
	wantKey := alert.DedupKey{Day: today, DomainID: "d1", Type: alert.TypeTLSFailureRate}
	if c.Dedup != wantKey || c.Severity != alert.SeverityWarning ||
		c.Title != "15% of TLS sessions to example.com's mail servers failed" ||
		c.Message != "The TLS report of Google Inc. (2026-11-21 to 2026-11-22) counts 30 of 200 sessions that could not be secured (15%), at or over the warning threshold of 5%. The most frequent failure: certificate-expired (20 sessions)." {
		t.Errorf("candidate %+v", c)
	}
	d := detailsOf(t, *c)
	rts := d["result_types"].([]any)
	if d["tls_report_id"] != "t1" || d["failed_sessions"] != 30.0 || d["failure_rate"] != 0.15 || len(rts) != 2 ||
		rts[0].(map[string]any)["result_type"] != "certificate-expired" {
		t.Errorf("details %v", d)
	}
	h.raised[wantKey] = alert.SeverityWarning
	if c := alert.DefaultRules().EvaluateTLS(tlsReport(170, 30), h, now); c != nil {
		t.Errorf("a second warning the same day: %+v", c)
	}
	if c := alert.DefaultRules().EvaluateTLS(tlsReport(10, 30), h, now); c == nil || c.Severity != alert.SeverityCritical {
		t.Errorf("a critical rate after a warning: %+v", c)
	}
	h.raised[wantKey] = alert.SeverityCritical
	if c := alert.DefaultRules().EvaluateTLS(tlsReport(170, 30), h, now); c != nil {
		t.Errorf("a warning after a critical one: %+v", c)
	}
	if c := alert.DefaultRules().EvaluateTLS(tlsReport(170, 30), h, now.Add(24*time.Hour)); c == nil {
		t.Error("nothing the next day")
	}
}

// TestTLSFailureRateOldOrDisabled ensures an imported old report and
// disabled rules raise nothing.
func TestTLSFailureRateOldOrDisabled(t *testing.T) {
	old := tlsReport(0, 100)
	old.DateEnd = now.Add(-8 * 24 * time.Hour)
	if c := alert.DefaultRules().EvaluateTLS(old, newHistory(), now); c != nil {
		t.Errorf("an old report raised %+v", c)
	}
	if c := (alert.Rules{Disabled: true}).EvaluateTLS(tlsReport(0, 100), newHistory(), now); c != nil {
		t.Errorf("disabled rules raised %+v", c)
	}
}
