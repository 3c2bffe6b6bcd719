package store

import (
	"crypto/sha256"
	"encoding/binary"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/dmarc/tlsrpt"
)

// SMTP TLS reports (RFC 8460). Each is stored whole under its own id
// (bucketTLSReports, tls_codec.go), indexed by organization and by domain in
// date_begin order with its date_end beside it (so the date filters read
// only the index), deduplicated by organization name + report id + domain,
// and counted in per-domain per-day roll-ups (bucketTLSRollups) so that
// statistics never read a report.

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

// TLSInput is one parsed report to store for a domain of an organization
// (NewTLSDraft).
type TLSInput struct {
	OrgID, DomainID string
	Report          *tlsrpt.Report
	ReceivedAt      time.Time
}

// Bounds on what one stored TLS report keeps; the parser's caps bound the
// counts, these the text.
const (
	maxTLSList = 100 // entries of policy_string and mx_host kept
)

func errTLSNotFound() error { return errorf(ErrNotFound, "TLS report not found") }

// putTLS writes a new report and its index and dedup entries.
func putTLS(tx *bolt.Tx, r *TLSReport, val, dkey []byte) error {
	if err := tx.Bucket(bucketTLSReports).Put(idKey(r.ID), val); err != nil {
		return err
	}
	end := binary.BigEndian.AppendUint64(nil, unixKey(r.DateEnd))
	if err := tx.Bucket(bucketTLSByOrg).Put(tlsTimeKey(r.OrgID, r.DateBegin, r.ID), append([]byte(r.DomainID), end...)); err != nil {
		return err
	}
	if err := tx.Bucket(bucketTLSByDomain).Put(tlsTimeKey(r.DomainID, r.DateBegin, r.ID), end); err != nil {
		return err
	}
	return tx.Bucket(bucketTLSDedup).Put(dkey, []byte(r.ID))
}

// tlsDetailOf turns a parsed report into what is stored, with a new id:
// times in UTC at second precision, text cut to 1,024 bytes, at most 100
// policy strings and MX hosts per policy, empty optional text as nil.
func tlsDetailOf(x TLSInput) *TLSReportDetail {
	p := x.Report
	succ, fail := p.Sessions()
	d := &TLSReportDetail{
		TLSReport: &TLSReport{
			ID: NewID(), DomainID: x.DomainID, OrgID: x.OrgID,
			OrganizationName: cutText(p.OrganizationName), ReportID: cutText(p.ReportID),
			ContactInfo: optText(p.ContactInfo),
			DateBegin:   p.DateBegin.UTC().Truncate(time.Second), DateEnd: p.DateEnd.UTC().Truncate(time.Second),
			ReceivedAt:         x.ReceivedAt.UTC().Truncate(time.Second),
			SuccessfulSessions: succ, FailedSessions: fail,
		},
		Policies: make([]TLSPolicy, 0, len(p.Policies)),
	}
	for _, pol := range p.Policies {
		sp := TLSPolicy{
			PolicyType: pol.Type, PolicyDomain: cutText(pol.Domain),
			PolicyString: cutList(pol.Strings), MXHost: cutList(pol.MXHosts),
			SuccessfulSessions: pol.SuccessfulSessions, FailedSessions: pol.FailedSessions,
			FailureDetails: make([]TLSFailureDetail, 0, len(pol.Failures)),
		}
		for _, f := range pol.Failures {
			sp.FailureDetails = append(sp.FailureDetails, TLSFailureDetail{
				ResultType:            cutText(f.ResultType),
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

// optText is cutText for optional text: "" becomes nil.
func optText(s string) *string {
	if s == "" {
		return nil
	}
	return new(cutText(s))
}

// cutList keeps at most maxTLSList entries, each cut; never nil, so JSON
// shows [].
func cutList(in []string) []string {
	out := make([]string, 0, min(len(in), maxTLSList))
	for _, s := range in {
		if len(out) == maxTLSList {
			break
		}
		out = append(out, cutText(s))
	}
	return out
}

// tlsTimeKey is owner id | date_begin (big-endian Unix seconds) | report
// id: one organization's or domain's reports, sorted by date_begin, ties
// by the time-ordered id.
func tlsTimeKey(owner string, begin time.Time, id string) []byte {
	k := make([]byte, 0, tlsTimeKeyLen)
	k = append(k, owner...)
	k = binary.BigEndian.AppendUint64(k, unixKey(begin))
	return append(k, id...)
}

// tlsTimeKeyLen is the length of every tlsTimeKey.
const tlsTimeKeyLen = idLen + 8 + idLen

// tlsKeyID returns the report id of a tlsTimeKey.
func tlsKeyID(k []byte) string { return string(k[idLen+8:]) }

// tlsKeyBegin returns the date_begin of a tlsTimeKey.
func tlsKeyBegin(k []byte) uint64 { return binary.BigEndian.Uint64(k[idLen : idLen+8]) }

// tlsDedupKey is domain id | the first 16 bytes of SHA-256(organization
// name, 0x00, report id): the identity of API.md, one range per domain for
// the cascade.
func tlsDedupKey(domainID, orgName, reportID string) []byte {
	h := sha256.New()
	h.Write([]byte(orgName))
	h.Write([]byte{0})
	h.Write([]byte(reportID))
	return h.Sum([]byte(domainID))[:idLen+16]
}

// getTLS reads report id. ErrNotFound when absent or id malformed.
func getTLS(tx *bolt.Tx, id string) (*TLSReportDetail, error) {
	if !ValidID(id) {
		return nil, errTLSNotFound()
	}
	raw := tx.Bucket(bucketTLSReports).Get(idKey(id))
	if raw == nil {
		return nil, errTLSNotFound()
	}
	return decodeTLS(id, raw)
}

// tlsStoredValue is the JSON stored form of a report of the first
// release: the API's fields plus the organization, which the API does not
// show. New reports are stored with appendTLS (tls_codec.go).
type tlsStoredValue struct {
	OrgID string `json:"org_id"`
	*TLSReportDetail
}
