package reports

import (
	"encoding/json"
	"fmt"

	"github.com/dmarcd/dmarcd/store/internal/codec"
)

// The stored form of a TLS report (bucketTLSReports, keyed by id): the
// binary codec of report_codec.go, as failure reports use, because
// encoding and decoding JSON was most of what storing a TLS report cost.
// Values written by the first release of TLS reports are JSON (they start
// with '{'); getTLS still reads them.
//
//	codecVersion | org id | domain id | organization name | report id |
//	contact info (opt) | date_begin | date_end | received_at |
//	successful | failed | policies (count, then each:
//	  type | domain | policy strings | mx hosts | successful | failed |
//	  failure details (count, then each: result type | sending ip (opt) |
//	  mx hostname (opt) | mx helo (opt) | receiving ip (opt) | failed |
//	  additional information (opt) | failure reason code (opt)))

// AppendTLS encodes report d of organization orgID.
func AppendTLS(e codec.Enc, orgID string, d *TLSReportDetail) codec.Enc {
	r := d.TLSReport
	e = append(e, codecVersion)
	e = e.Str(orgID).Str(r.DomainID).Str(r.OrganizationName).Str(r.ReportID).Opt(r.ContactInfo)
	e = e.Time(r.DateBegin).Time(r.DateEnd).Time(r.ReceivedAt).Varint(r.SuccessfulSessions).Varint(r.FailedSessions)
	e = e.Uvarint(uint64(len(d.Policies)))
	for i := range d.Policies {
		p := &d.Policies[i]
		e = e.Str(p.PolicyType).Str(p.PolicyDomain).Strs(p.PolicyString).Strs(p.MXHost)
		e = e.Varint(p.SuccessfulSessions).Varint(p.FailedSessions).Uvarint(uint64(len(p.FailureDetails)))
		for j := range p.FailureDetails {
			f := &p.FailureDetails[j]
			e = e.Str(f.ResultType).Opt(f.SendingMTAIP).Opt(f.ReceivingMXHostname).Opt(f.ReceivingMXHelo).Opt(f.ReceivingIP)
			e = e.Varint(f.FailedSessions).Opt(f.AdditionalInformation).Opt(f.FailureReasonCode)
		}
	}
	return e
}

// DecodeTLS reads a stored TLS report: what AppendTLS wrote, or the JSON
// of the first release.
func DecodeTLS(id string, raw []byte) (*TLSReportDetail, error) {
	if len(raw) > 0 && raw[0] == '{' {
		var v tlsStoredValue
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("decode TLS report %s: %w", id, err)
		}
		if v.TLSReportDetail == nil || v.TLSReport == nil {
			return nil, fmt.Errorf("decode TLS report %s: empty", id)
		}
		v.TLSReport.OrgID = v.OrgID
		return v.TLSReportDetail, nil
	}
	d := codec.NewStringDec(raw)
	if d.Byte() != codecVersion {
		return nil, fmt.Errorf("TLS report %s: %w", id, errCorrupt)
	}
	r := &TLSReport{ID: id, OrgID: d.Str(), DomainID: d.Str(), OrganizationName: d.Str(), ReportID: d.Str(), ContactInfo: d.Opt()}
	r.DateBegin, r.DateEnd, r.ReceivedAt = d.Time(), d.Time(), d.Time()
	r.SuccessfulSessions, r.FailedSessions = d.Varint(), d.Varint()
	det := &TLSReportDetail{TLSReport: r, Policies: make([]TLSPolicy, d.Count())}
	for i := range det.Policies {
		p := &det.Policies[i]
		p.PolicyType, p.PolicyDomain, p.PolicyString, p.MXHost = d.Str(), d.Str(), d.Strs(), d.Strs()
		p.SuccessfulSessions, p.FailedSessions = d.Varint(), d.Varint()
		p.FailureDetails = make([]TLSFailureDetail, d.Count())
		for j := range p.FailureDetails {
			f := &p.FailureDetails[j]
			f.ResultType, f.SendingMTAIP, f.ReceivingMXHostname, f.ReceivingMXHelo, f.ReceivingIP = d.Str(), d.Opt(), d.Opt(), d.Opt(), d.Opt()
			f.FailedSessions, f.AdditionalInformation, f.FailureReasonCode = d.Varint(), d.Opt(), d.Opt()
		}
	}
	if !d.Done() {
		return nil, fmt.Errorf("TLS report %s: %w", id, errCorrupt)
	}
	return det, nil
}
