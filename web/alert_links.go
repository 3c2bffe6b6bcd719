package web

import (
	"cmp"
	"encoding/json"
	"net/netip"
	"net/url"

	"github.com/dmarcd/dmarcd/store"
)

// alertLink is where an alert's cause can be seen: its aggregate report,
// the source it names (the domain's sources page, filtered to it), its
// failure report.
type alertLink struct {
	Report, Source, SourceIP, Failure string // paths; "" for none
}

// linksOf reads the links of an alert from its details: report_id (or
// report.report_id), source_ip (or the first of top_failing_sources),
// forensic_report_id. Details are the store's, written by the alert
// rules; an id that is not one is left out.
func linksOf(a *store.Alert) alertLink {
	var d struct {
		ReportID string `json:"report_id"`
		Report   struct {
			ReportID string `json:"report_id"`
		} `json:"report"`
		SourceIP string `json:"source_ip"`
		Top      []struct {
			SourceIP string `json:"source_ip"`
		} `json:"top_failing_sources"`
		ForensicReportID string `json:"forensic_report_id"`
	}
	var l alertLink
	if len(a.Details) == 0 || json.Unmarshal(a.Details, &d) != nil {
		return l
	}
	if id := cmp.Or(d.ReportID, d.Report.ReportID); store.ValidID(id) {
		l.Report = "/reports/" + id
	}
	if store.ValidID(d.ForensicReportID) {
		l.Failure = "/forensic/" + d.ForensicReportID
	}
	ip := d.SourceIP
	if ip == "" && len(d.Top) > 0 {
		ip = d.Top[0].SourceIP
	}
	if addr, err := netip.ParseAddr(ip); err == nil && a.DomainID != nil && store.ValidID(*a.DomainID) {
		l.SourceIP = addr.String()
		l.Source = "/domains/" + *a.DomainID + "/sources?ip=" + url.QueryEscape(l.SourceIP)
	}
	return l
}
