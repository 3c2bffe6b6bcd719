package alert_test

import (
	"testing"

	"github.com/dmarcd/dmarcd/alert"
)

// TestClassifyDNSChange ensures each kind of change raises its one alert,
// the most specific, and says when the domain goes inactive.
func TestClassifyDNSChange(t *testing.T) {
	const addr = "d7k2m9xq4p2a@reports.example.net"
	rua := func(policy string) string { return "v=DMARC1; " + policy + "; rua=mailto:" + addr }
	other := "v=DMARC1; p=reject; rua=mailto:dmarc@example.com"
	for _, c := range []struct {
		name         string
		active       bool
		old, new     string
		typ, sev     string // "" for no alert
		deactivate   bool
		wantInDetail string // a details field that must be set
	}{
		{"FirstLookRemembers", true, "", rua("p=none"), "", "", false, ""},
		{"FirstLookNoRecordPending", false, "", alert.NoRecord, "", "", true, ""},
		{"FirstLookActiveAddressGone", true, "", other, alert.TypeReportingAddressRemoved, alert.SeverityCritical, true, "reporting_email"},
		{"FirstLookActiveNoRecord", true, "", alert.NoRecord, alert.TypeDNSRecordMissing, alert.SeverityCritical, true, ""},
		{"Missing", true, rua("p=reject"), alert.NoRecord, alert.TypeDNSRecordMissing, alert.SeverityCritical, true, "old_record"},
		{"Invalid", true, rua("p=reject"), "v=DMARC1; p=bogus", alert.TypeDNSRecordChanged, alert.SeverityWarning, true, "problem"},
		{"Several", true, rua("p=reject"), rua("p=reject") + "\n" + rua("p=none"), alert.TypeDNSRecordChanged, alert.SeverityWarning, true, "problem"},
		{"AddressRemoved", true, rua("p=reject"), other, alert.TypeReportingAddressRemoved, alert.SeverityCritical, true, "reporting_email"},
		{"AddressStillGone", false, other, "v=DMARC1; p=reject; rua=mailto:postmaster@example.com", alert.TypeDNSRecordChanged, alert.SeverityInfo, true, ""},
		{"PolicyWeakened", true, rua("p=reject"), rua("p=quarantine"), alert.TypePolicyWeakened, alert.SeverityWarning, false, "old_policy"},
		{"PctWeakened", true, rua("p=reject"), rua("p=reject; pct=50"), alert.TypePolicyWeakened, alert.SeverityWarning, false, "new_policy"},
		{"Strengthened", true, rua("p=none"), rua("p=reject"), alert.TypeDNSRecordChanged, alert.SeverityInfo, false, ""},
		{"PublishedAgain", false, alert.NoRecord, rua("p=none"), alert.TypeDNSRecordChanged, alert.SeverityInfo, false, "new_record"},
		{"ValidAgain", true, "v=DMARC1; p=bogus", rua("p=none"), alert.TypeDNSRecordChanged, alert.SeverityInfo, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := alert.ClassifyDNSChange(alert.DNSChange{Domain: "example.com", ReportingEmail: addr, Active: c.active, Old: c.old, New: c.new})
			if v.Deactivate != c.deactivate {
				t.Errorf("deactivate = %v", v.Deactivate)
			}
			if c.typ == "" {
				if v.Alert != nil {
					t.Errorf("alert %+v, want none", v.Alert)
				}
				return
			}
			a := v.Alert
			if a == nil || a.Type != c.typ || a.Severity != c.sev || a.Title == "" || a.Message == "" || a.Dedup != (alert.DedupKey{}) {
				t.Fatalf("alert %+v, want %s/%s", a, c.typ, c.sev)
			}
			d := detailsOf(t, *a)
			if d["record_name"] != "_dmarc.example.com" {
				t.Errorf("details %v", d)
			}
			if c.wantInDetail != "" && d[c.wantInDetail] == nil {
				t.Errorf("details lack %s: %v", c.wantInDetail, d)
			}
		})
	}
}

// TestClassifyDNSChangeTexts ensures the alerts say what changed.
func TestClassifyDNSChangeTexts(t *testing.T) {
	v := alert.ClassifyDNSChange(alert.DNSChange{Domain: "example.com", ReportingEmail: "a@r.example", Active: true,
		Old: "v=DMARC1; p=reject; rua=mailto:a@r.example", New: "v=DMARC1; p=none; pct=20; rua=mailto:a@r.example"})
	if v.Alert.Title != "DMARC policy of example.com weakened" ||
		v.Alert.Message != "The DMARC record at _dmarc.example.com went from p=reject pct=100 to p=none pct=20." {
		t.Errorf("texts: %q / %q", v.Alert.Title, v.Alert.Message)
	}
	d := detailsOf(t, *v.Alert)
	if old := d["old_policy"].(map[string]any); old["p"] != "reject" || old["pct"] != 100.0 {
		t.Errorf("old policy %v", old)
	}
	v = alert.ClassifyDNSChange(alert.DNSChange{Domain: "example.com", ReportingEmail: "a@r.example", Active: true,
		Old: alert.NoRecord, New: "v=DMARC1; p=none; rua=mailto:a@r.example"})
	if v.Alert.Message != "A DMARC record is published again at _dmarc.example.com." {
		t.Errorf("message %q", v.Alert.Message)
	}
	if d := detailsOf(t, *v.Alert); d["old_record"] != nil || d["new_record"] != "v=DMARC1; p=none; rua=mailto:a@r.example" {
		t.Errorf("details %v", d)
	}
}
