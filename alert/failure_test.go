package alert_test

import (
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/alert"
)

// geo stands for the store's geolocation object, put in the details as it
// is.
type geo struct {
	CountryCode string `json:"country_code"`
	City        string `json:"city"`
}

// TestFailureReportOncePerHour ensures a failure report raises one info
// alert per domain and clock hour, saying where the mail came from.
func TestFailureReportOncePerHour(t *testing.T) {
	cc, asn := "GB", uint32(20712)
	f := &alert.Failure{ID: "f1", DomainID: "d1", Domain: "example.com", SourceIP: "192.0.2.1",
		ArrivalDate: time.Date(2026, 11, 22, 8, 59, 30, 900, time.UTC), Origin: alert.Origin{CountryCode: &cc, ASN: &asn},
		Geo: &geo{CountryCode: "GB", City: "London"}}
	h := newHistory()
	c := alert.DefaultRules().EvaluateFailure(f, h, now)
	if c == nil {
		t.Fatal("no alert")
	}
	wantKey := alert.DedupKey{Day: today, DomainID: "d1", Type: alert.TypeFailureReportReceived, Cause: "9"}
	if c.Type != alert.TypeFailureReportReceived || c.Severity != alert.SeverityInfo || c.Dedup != wantKey ||
		c.Title != "Failure report received for example.com" ||
		c.Message != "A failure (forensic) report about mail from 192.0.2.1 (GB, AS20712) arrived for example.com; further ones this hour raise no alert." {
		t.Errorf("candidate %+v", c)
	}
	d := detailsOf(t, *c)
	if d["forensic_report_id"] != "f1" || d["source_ip"] != "192.0.2.1" || d["arrival_date"] != "2026-11-22T08:59:30Z" ||
		d["hour_start"] != "2026-11-22T09:00:00Z" || d["geo"].(map[string]any)["city"] != "London" {
		t.Errorf("details %v", d)
	}

	h.raised[wantKey] = alert.SeverityInfo
	if c := alert.DefaultRules().EvaluateFailure(f, h, now.Add(29*time.Minute)); c != nil {
		t.Errorf("a second alert in the hour: %+v", c)
	}
	if c := alert.DefaultRules().EvaluateFailure(f, h, now.Add(30*time.Minute)); c == nil || c.Dedup.Cause != "10" {
		t.Errorf("the next hour: %+v", c)
	}
	other := *f
	other.DomainID = "d2"
	if c := alert.DefaultRules().EvaluateFailure(&other, h, now); c == nil {
		t.Error("another domain's report held back")
	}

	// Without a source or geo the message says less and the details null.
	bare := &alert.Failure{ID: "f2", DomainID: "d3", Domain: "example.org", ArrivalDate: now}
	c = alert.DefaultRules().EvaluateFailure(bare, h, now)
	if c == nil || c.Message != "A failure (forensic) report arrived for example.org; further ones this hour raise no alert." {
		t.Fatalf("candidate %+v", c)
	}
	if d := detailsOf(t, *c); d["source_ip"] != nil || d["geo"] != nil {
		t.Errorf("details %v", d)
	}
}
