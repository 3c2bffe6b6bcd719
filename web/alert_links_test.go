package web

import (
	"encoding/json"
	"testing"

	"github.com/dmarcd/dmarcd/store"
)

// TestAlertLinksOfDetails reads the links of each kind of alert from its
// details: an aggregate report and a source (or the first failing one),
// a TLS report (whose report_id is the reporter's, not ours), a new
// sender's addresses, a failure report; and nothing from details that
// name no id or no address, or an alert of no domain.
func TestAlertLinksOfDetails(t *testing.T) {
	dom := store.NewID()
	rep, tls, fr := store.NewID(), store.NewID(), store.NewID()
	for _, c := range []struct {
		name    string
		details string
		domain  *string
		want    alertLink
	}{
		{"new_failing_source", `{"source_ip":"203.0.113.9","report":{"report_id":"` + rep + `"}}`, &dom,
			alertLink{Report: "/reports/" + rep, Source: "/domains/" + dom + "/sources?ip=203.0.113.9", SourceText: "The source 203.0.113.9"}},
		{"dmarc_failure_rate", `{"report_id":"` + rep + `","top_failing_sources":[{"source_ip":"2001:DB8::1"},{"source_ip":"192.0.2.1"}]}`, &dom,
			alertLink{Report: "/reports/" + rep, Source: "/domains/" + dom + "/sources?ip=2001%3Adb8%3A%3A1", SourceText: "The source 2001:db8::1"}},
		{"tls_failure_rate", `{"tls_report_id":"` + tls + `","report_id":"` + rep + `"}`, &dom, alertLink{Report: "/tls-reports/" + tls}},
		{"new_sender", `{"sender":"Twilio SendGrid"}`, &dom,
			alertLink{Source: "/domains/" + dom + "/sources?group=Twilio+SendGrid", SourceText: "The addresses of Twilio SendGrid"}},
		{"forensic_report_received", `{"forensic_report_id":"` + fr + `"}`, &dom, alertLink{Failure: "/forensic/" + fr}},
		{"not ids", `{"report_id":"../x","source_ip":"not an ip","forensic_report_id":"1"}`, &dom, alertLink{}},
		{"no domain", `{"source_ip":"203.0.113.9","report_id":"` + rep + `"}`, nil, alertLink{Report: "/reports/" + rep}},
		{"not an object", `[1]`, &dom, alertLink{}},
	} {
		got := linksOf(&store.Alert{DomainID: c.domain, Details: json.RawMessage(c.details)})
		if got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}
