package reports

import (
	"time"

	"github.com/dmarcd/dmarcd/dmarc/tlsrpt"
)

// TLSReport is a stored TLS report as lists show it (API.md).
type TLSReport struct {
	ID                 string    `json:"id"`
	DomainID           string    `json:"domain_id"`
	OrgID              string    `json:"-"`
	OrganizationName   string    `json:"organization_name"`
	ReportID           string    `json:"report_id"`
	ContactInfo        *string   `json:"contact_info"`
	DateBegin          time.Time `json:"date_begin"`
	DateEnd            time.Time `json:"date_end"`
	ReceivedAt         time.Time `json:"received_at"`
	SuccessfulSessions int64     `json:"successful_sessions"`
	FailedSessions     int64     `json:"failed_sessions"`
}

// TLSPolicy is one policy of a TLS report with its sessions.
type TLSPolicy struct {
	PolicyType         string             `json:"policy_type"`
	PolicyDomain       string             `json:"policy_domain"`
	PolicyString       []string           `json:"policy_string"`
	MXHost             []string           `json:"mx_host"`
	SuccessfulSessions int64              `json:"successful_sessions"`
	FailedSessions     int64              `json:"failed_sessions"`
	FailureDetails     []TLSFailureDetail `json:"failure_details"`
}

// TLSFailureDetail is one failure detail of a policy. Text the report
// left out is nil (JSON null); result types are kept as sent.
type TLSFailureDetail struct {
	ResultType            string  `json:"result_type"`
	SendingMTAIP          *string `json:"sending_mta_ip"`
	ReceivingMXHostname   *string `json:"receiving_mx_hostname"`
	ReceivingMXHelo       *string `json:"receiving_mx_helo"`
	ReceivingIP           *string `json:"receiving_ip"`
	FailedSessions        int64   `json:"failed_sessions"`
	AdditionalInformation *string `json:"additional_information"`
	FailureReasonCode     *string `json:"failure_reason_code"`
}

// TLSReportDetail is a TLS report as the single GET shows it: the list
// object plus its policies.
type TLSReportDetail struct {
	*TLSReport
	Policies []TLSPolicy `json:"policies"`
}

// Bounds on what one stored TLS report keeps; the parser's caps bound the
// counts, these the text.
const (
	maxTLSList = 100 // entries of policy_string and mx_host kept
)

// TLSDetailOf turns parsed report p of domain domainID of organization
// orgID, received at received, into what is stored under id: times in UTC
// at second precision, text cut to 1,024 bytes, at most 100 policy
// strings and MX hosts per policy, empty optional text as nil.
func TLSDetailOf(id, orgID, domainID string, p *tlsrpt.Report, received time.Time) *TLSReportDetail {
	succ, fail := p.Sessions()
	d := &TLSReportDetail{
		TLSReport: &TLSReport{
			ID: id, DomainID: domainID, OrgID: orgID,
			OrganizationName: CutText(p.OrganizationName), ReportID: CutText(p.ReportID),
			ContactInfo: optText(p.ContactInfo),
			DateBegin:   p.DateBegin.UTC().Truncate(time.Second), DateEnd: p.DateEnd.UTC().Truncate(time.Second),
			ReceivedAt:         received.UTC().Truncate(time.Second),
			SuccessfulSessions: succ, FailedSessions: fail,
		},
		Policies: make([]TLSPolicy, 0, len(p.Policies)),
	}
	for _, pol := range p.Policies {
		sp := TLSPolicy{
			PolicyType: pol.Type, PolicyDomain: CutText(pol.Domain),
			PolicyString: cutList(pol.Strings), MXHost: cutList(pol.MXHosts),
			SuccessfulSessions: pol.SuccessfulSessions, FailedSessions: pol.FailedSessions,
			FailureDetails: make([]TLSFailureDetail, 0, len(pol.Failures)),
		}
		for _, f := range pol.Failures {
			sp.FailureDetails = append(sp.FailureDetails, TLSFailureDetail{
				ResultType:            CutText(f.ResultType),
				SendingMTAIP:          optText(f.SendingMTAIP),
				ReceivingMXHostname:   optText(f.ReceivingMXHostname),
				ReceivingMXHelo:       optText(f.ReceivingMXHelo),
				ReceivingIP:           optText(f.ReceivingIP),
				FailedSessions:        f.FailedSessions,
				AdditionalInformation: optText(f.AdditionalInformation),
				FailureReasonCode:     optText(f.FailureReasonCode),
			})
		}
		d.Policies = append(d.Policies, sp)
	}
	return d
}

// optText is CutText for optional text: "" becomes nil.
func optText(s string) *string {
	if s == "" {
		return nil
	}
	return new(CutText(s))
}

// cutList keeps at most maxTLSList entries, each cut; never nil, so JSON
// shows [].
func cutList(in []string) []string {
	out := make([]string, 0, min(len(in), maxTLSList))
	for _, s := range in {
		if len(out) == maxTLSList {
			break
		}
		out = append(out, CutText(s))
	}
	return out
}

// tlsStoredValue is the JSON stored form of a report of the first
// release: the API's fields plus the organization, which the API does not
// show. New reports are stored with AppendTLS (tls_codec.go).
type tlsStoredValue struct {
	OrgID string `json:"org_id"`
	*TLSReportDetail
}
