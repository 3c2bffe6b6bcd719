package web

import (
	"cmp"
	"encoding/json"
	"net/netip"
	"net/url"

	"github.com/dmarcd/dmarcd/store"
)

// alertLink is where an alert's cause can be seen: the report it comes
// from (aggregate or TLS), the source or sender it names (the domain's
// sources page, filtered to it), its failure report.
type alertLink struct {
	Report, Source, Failure string // paths; "" for none
	SourceText              string // what Source shows: "The source 192.0.2.1"
}

// linksOf reads the links of an alert from its details, as the alert
// rules write them: tls_report_id, else report_id (or report.report_id);
// source_ip (or the first of top_failing_sources), else sender (a
// new_sender's group); forensic_report_id. An id that is not one is left
// out.
func linksOf(a *store.Alert) alertLink {
	var d struct {
		TLSReportID string `json:"tls_report_id"`
		ReportID    string `json:"report_id"`
		Report      struct {
			ReportID string `json:"report_id"`
		} `json:"report"`
		SourceIP string `json:"source_ip"`
		Top      []struct {
			SourceIP string `json:"source_ip"`
		} `json:"top_failing_sources"`
		Sender           string `json:"sender"`
		ForensicReportID string `json:"forensic_report_id"`
	}
	var l alertLink
	if len(a.Details) == 0 || json.Unmarshal(a.Details, &d) != nil {
		return l
	}
	switch id := cmp.Or(d.ReportID, d.Report.ReportID); {
	case d.TLSReportID != "":
		if store.ValidID(d.TLSReportID) {
			l.Report = "/tls-reports/" + d.TLSReportID
		}
	case store.ValidID(id):
		l.Report = "/reports/" + id
	}
	if store.ValidID(d.ForensicReportID) {
		l.Failure = "/forensic/" + d.ForensicReportID
	}
	if a.DomainID == nil || !store.ValidID(*a.DomainID) {
		return l
	}
	sources := "/domains/" + *a.DomainID + "/sources"
	ip := d.SourceIP
	if ip == "" && len(d.Top) > 0 {
		ip = d.Top[0].SourceIP
	}
	if addr, err := netip.ParseAddr(ip); err == nil {
		l.Source, l.SourceText = sources+"?ip="+url.QueryEscape(addr.String()), "The source "+addr.String()
	} else if d.Sender != "" {
		l.Source, l.SourceText = sources+"?group="+url.QueryEscape(d.Sender), "The addresses of "+d.Sender
	}
	return l
}
