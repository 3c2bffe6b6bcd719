package store

import (
	"encoding/json"
	"fmt"
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

// appendTLS encodes report d of organization orgID.
func appendTLS(e enc, orgID string, d *TLSReportDetail) enc {
	r := d.TLSReport
	e = append(e, codecVersion)
	e = e.str(orgID).str(r.DomainID).str(r.OrganizationName).str(r.ReportID).opt(r.ContactInfo)
	e = e.time(r.DateBegin).time(r.DateEnd).time(r.ReceivedAt).varint(r.SuccessfulSessions).varint(r.FailedSessions)
	e = e.uvarint(uint64(len(d.Policies)))
	for i := range d.Policies {
		p := &d.Policies[i]
		e = e.str(p.PolicyType).str(p.PolicyDomain).strs(p.PolicyString).strs(p.MXHost)
		e = e.varint(p.SuccessfulSessions).varint(p.FailedSessions).uvarint(uint64(len(p.FailureDetails)))
		for j := range p.FailureDetails {
			f := &p.FailureDetails[j]
			e = e.str(f.ResultType).opt(f.SendingMTAIP).opt(f.ReceivingMXHostname).opt(f.ReceivingMXHelo).opt(f.ReceivingIP)
			e = e.varint(f.FailedSessions).opt(f.AdditionalInformation).opt(f.FailureReasonCode)
		}
	}
	return e
}

func (e enc) strs(list []string) enc {
	e = e.uvarint(uint64(len(list)))
	for _, s := range list {
		e = e.str(s)
	}
	return e
}

func (d *dec) strs() []string {
	out := make([]string, d.count())
	for i := range out {
		out[i] = d.str()
	}
	return out
}

// decodeTLS reads a stored TLS report: what appendTLS wrote, or the JSON
// of the first release.
func decodeTLS(id string, raw []byte) (*TLSReportDetail, error) {
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
	d := newStringDec(raw)
	if d.byte() != codecVersion {
		return nil, fmt.Errorf("TLS report %s: %w", id, errCorrupt)
	}
	r := &TLSReport{ID: id, OrgID: d.str(), DomainID: d.str(), OrganizationName: d.str(), ReportID: d.str(), ContactInfo: d.opt()}
	r.DateBegin, r.DateEnd, r.ReceivedAt = d.time(), d.time(), d.time()
	r.SuccessfulSessions, r.FailedSessions = d.varint(), d.varint()
	det := &TLSReportDetail{TLSReport: r, Policies: make([]TLSPolicy, d.count())}
	for i := range det.Policies {
		p := &det.Policies[i]
		p.PolicyType, p.PolicyDomain, p.PolicyString, p.MXHost = d.str(), d.str(), d.strs(), d.strs()
		p.SuccessfulSessions, p.FailedSessions = d.varint(), d.varint()
		p.FailureDetails = make([]TLSFailureDetail, d.count())
		for j := range p.FailureDetails {
			f := &p.FailureDetails[j]
			f.ResultType, f.SendingMTAIP, f.ReceivingMXHostname, f.ReceivingMXHelo, f.ReceivingIP = d.str(), d.opt(), d.opt(), d.opt(), d.opt()
			f.FailedSessions, f.AdditionalInformation, f.FailureReasonCode = d.varint(), d.opt(), d.opt()
		}
	}
	if !d.ok() || len(d.b) != 0 {
		return nil, fmt.Errorf("TLS report %s: %w", id, errCorrupt)
	}
	return det, nil
}
