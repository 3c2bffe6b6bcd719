package reports

import (
	"fmt"

	"github.com/dmarcd/dmarcd/store/internal/codec"
)

// failureCodecVersion is the first byte of a failure report value written
// now: version 1 (codecVersion) and, after the geo object, the
// Auth-Failure values as reported and the identity. Version 1 values
// (schema 6) are read as reporting the families, without identity.
const failureCodecVersion = 2

// AppendFailure encodes a failure report (the id is the key; headers are
// stored apart).
func AppendFailure(e codec.Enc, r *FailureReport, mask byte, dkim [2]*string) codec.Enc {
	e = append(e, failureCodecVersion)
	e = e.Str(r.DomainID).Str(r.Domain).Str(r.OrgID).Time(r.ReceivedAt).Time(r.ArrivalDate)
	e = e.Opt(r.Reporter).Opt(r.SourceIP).Opt(r.OriginalMailFrom).Opt(r.OriginalRcptTo).Opt(r.ReportedDomain)
	e = e.Opt(r.Subject).Opt(r.MessageID).Str(r.FeedbackType).Uvarint(uint64(mask)).Opt(r.DeliveryResult)
	a := &r.AuthenticationResults
	e = e.Opt(a.DMARC).Opt(a.SPF).Opt(a.DKIM).Opt(dkim[0]).Opt(dkim[1])
	e = appendGeo(e, r.Geo)
	e = e.Strs(r.AuthFailureReported)
	return e.Str(r.Identity)
}

// DecodeFailure reads what AppendFailure wrote (either version).
func DecodeFailure(id string, raw []byte) (*FailureReportDetail, byte, error) {
	d := codec.NewDec(raw)
	version := d.Byte()
	if version != codecVersion && version != failureCodecVersion {
		return nil, 0, fmt.Errorf("failure report %s: %w", id, errCorrupt)
	}
	r := &FailureReport{ID: id, DomainID: d.Str(), Domain: d.Str(), OrgID: d.Str(), ReceivedAt: d.Time(), ArrivalDate: d.Time()}
	r.Reporter, r.SourceIP, r.OriginalMailFrom, r.OriginalRcptTo, r.ReportedDomain = d.Opt(), d.Opt(), d.Opt(), d.Opt(), d.Opt()
	r.Subject, r.MessageID, r.FeedbackType = d.Opt(), d.Opt(), d.Str()
	mask := byte(d.Uvarint())
	r.AuthFailure = FailChecksOf(mask)
	r.DeliveryResult = d.Opt()
	r.AuthenticationResults = FailureAuthResults{DMARC: d.Opt(), SPF: d.Opt(), DKIM: d.Opt()}
	det := &FailureReportDetail{FailureReport: r, DKIMDomain: d.Opt(), DKIMSelector: d.Opt()}
	r.Geo = decodeGeo(&d)
	if version == codecVersion {
		r.AuthFailureReported = FailChecksOf(mask)
	} else {
		r.AuthFailureReported = d.Strs()
		r.Identity = d.Str()
	}
	if !d.Done() {
		return nil, 0, fmt.Errorf("failure report %s: %w", id, errCorrupt)
	}
	return det, mask, nil
}

// AppendFailureHeaders encodes the headers of an original message.
func AppendFailureHeaders(e codec.Enc, hs []FailureHeader) codec.Enc {
	e = append(e, codecVersion)
	e = e.Uvarint(uint64(len(hs)))
	for _, h := range hs {
		e = e.Str(h.Name).Str(h.Value)
	}
	return e
}

// DecodeFailureHeaders reads what AppendFailureHeaders wrote.
func DecodeFailureHeaders(id string, raw []byte) ([]FailureHeader, error) {
	d := codec.NewDec(raw)
	if d.Byte() != codecVersion {
		return nil, fmt.Errorf("failure report %s headers: %w", id, errCorrupt)
	}
	hs := make([]FailureHeader, d.Count())
	for i := range hs {
		hs[i] = FailureHeader{Name: d.Str(), Value: d.Str()}
	}
	if !d.Done() {
		return nil, fmt.Errorf("failure report %s headers: %w", id, errCorrupt)
	}
	return hs, nil
}
