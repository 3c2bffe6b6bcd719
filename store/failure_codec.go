package store

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/dmarcd/dmarcd/store/internal/codec"
)

// Keys and values of the failure report buckets (declared in schema.go).
//
//	failure_reports            id -> appendFailure
//	failure_headers            id -> appendFailureHeaders (absent: no headers)
//	failure_reports_by_org     org | arrival | id -> failIndexValue
//	failure_reports_by_domain  domain | arrival | id -> failIndexValue
//	failure_dedup              domain | identity hash -> id
//	failure_rollups            org | UTC day | domain -> appendFailureDay
//
// arrival is big-endian Unix seconds, day big-endian days since 1970, so
// that an organization's (or a domain's) reports are a range sorted by
// arrival date, and its days a range sorted by day.

// failTimeKeyLen is the length of a by-org or by-domain index key.
const failTimeKeyLen = idLen + 8 + idLen

// failTimeKey is owner id | arrival | report id.
func failTimeKey(owner string, arrival time.Time, id string) []byte {
	k := make([]byte, 0, failTimeKeyLen)
	k = append(k, owner...)
	k = binary.BigEndian.AppendUint64(k, unixKey(arrival))
	return append(k, id...)
}

// failTimePrefix is owner id | arrival: where the reports of owner that
// arrived at or after t begin.
func failTimePrefix(owner string, t time.Time) []byte {
	k := make([]byte, 0, idLen+8)
	k = append(k, owner...)
	return binary.BigEndian.AppendUint64(k, unixKey(t))
}

// failKeyArrival returns the arrival date (Unix seconds) of an index key.
func failKeyArrival(k []byte) uint64 { return binary.BigEndian.Uint64(k[idLen : idLen+8]) }

// failKeyID returns the report id of an index key.
func failKeyID(k []byte) string { return string(k[idLen+8:]) }

// failIndexValue is domain id | auth failure mask | source IP ("" when
// unknown): what the list filters on, so that filtering reads no report.
func failIndexValue(r *FailureReport, mask byte) []byte {
	ip := r.sourceIPOf()
	v := make([]byte, 0, idLen+1+len(ip))
	v = append(v, r.DomainID...)
	v = append(v, mask)
	return append(v, ip...)
}

// failIndexEntry is a decoded failIndexValue; its slices alias bbolt memory.
type failIndexEntry struct {
	domain []byte
	mask   byte
	ip     []byte
}

func decodeFailIndex(v []byte) (failIndexEntry, bool) {
	if len(v) < idLen+1 {
		return failIndexEntry{}, false
	}
	return failIndexEntry{domain: v[:idLen], mask: v[idLen], ip: v[idLen+1:]}, true
}

// failDedupKey is domain id | the first 16 bytes of SHA-256 of reporter,
// source IP, message id and arrival date (NUL-separated): a report with the
// same four for the same domain is the same report.
func failDedupKey(r *FailureReport) []byte {
	h := sha256.New()
	for _, p := range []*string{r.Reporter, r.SourceIP, r.MessageID} {
		if p != nil {
			h.Write([]byte(*p))
		}
		h.Write([]byte{0})
	}
	var ts [8]byte
	binary.BigEndian.PutUint64(ts[:], unixKey(r.ArrivalDate))
	h.Write(ts[:])
	k := make([]byte, 0, idLen+sha256.Size)
	k = append(k, r.DomainID...)
	return h.Sum(k)[:idLen+16]
}

// failRollupKeyLen is the length of a failure roll-up key.
const failRollupKeyLen = idLen + 4 + idLen

// failRollupKey is org id | UTC day | domain id.
func failRollupKey(orgID string, day uint32, domainID string) []byte {
	k := make([]byte, 0, failRollupKeyLen)
	k = append(k, orgID...)
	k = binary.BigEndian.AppendUint32(k, day)
	return append(k, domainID...)
}

// failRollupDay returns the day of a roll-up key.
func failRollupDay(k []byte) uint32 { return binary.BigEndian.Uint32(k[idLen : idLen+4]) }

// failRollupDomain returns the domain id of a roll-up key.
func failRollupDomain(k []byte) string { return string(k[idLen+4:]) }

// appendFailure encodes a failure report (the id is the key; headers are
// stored apart).
func appendFailure(e codec.Enc, r *FailureReport, mask byte, dkim [2]*string) codec.Enc {
	e = append(e, codecVersion)
	e = e.Str(r.DomainID).Str(r.Domain).Str(r.OrgID).Time(r.ReceivedAt).Time(r.ArrivalDate)
	e = e.Opt(r.Reporter).Opt(r.SourceIP).Opt(r.OriginalMailFrom).Opt(r.OriginalRcptTo).Opt(r.ReportedDomain)
	e = e.Opt(r.Subject).Opt(r.MessageID).Str(r.FeedbackType).Uvarint(uint64(mask)).Opt(r.DeliveryResult)
	a := &r.AuthenticationResults
	e = e.Opt(a.DMARC).Opt(a.SPF).Opt(a.DKIM).Opt(dkim[0]).Opt(dkim[1])
	return appendGeo(e, r.Geo)
}

// decodeFailure reads what appendFailure wrote.
func decodeFailure(id string, raw []byte) (*FailureReportDetail, byte, error) {
	d := codec.NewDec(raw)
	if d.Byte() != codecVersion {
		return nil, 0, fmt.Errorf("failure report %s: %w", id, errCorrupt)
	}
	r := &FailureReport{ID: id, DomainID: d.Str(), Domain: d.Str(), OrgID: d.Str(), ReceivedAt: d.Time(), ArrivalDate: d.Time()}
	r.Reporter, r.SourceIP, r.OriginalMailFrom, r.OriginalRcptTo, r.ReportedDomain = d.Opt(), d.Opt(), d.Opt(), d.Opt(), d.Opt()
	r.Subject, r.MessageID, r.FeedbackType = d.Opt(), d.Opt(), d.Str()
	mask := byte(d.Uvarint())
	r.AuthFailure = failChecksOf(mask)
	r.DeliveryResult = d.Opt()
	r.AuthenticationResults = FailureAuthResults{DMARC: d.Opt(), SPF: d.Opt(), DKIM: d.Opt()}
	det := &FailureReportDetail{FailureReport: r, DKIMDomain: d.Opt(), DKIMSelector: d.Opt()}
	r.Geo = decodeGeo(&d)
	if !d.Done() {
		return nil, 0, fmt.Errorf("failure report %s: %w", id, errCorrupt)
	}
	return det, mask, nil
}

// appendFailureHeaders encodes the headers of an original message.
func appendFailureHeaders(e codec.Enc, hs []FailureHeader) codec.Enc {
	e = append(e, codecVersion)
	e = e.Uvarint(uint64(len(hs)))
	for _, h := range hs {
		e = e.Str(h.Name).Str(h.Value)
	}
	return e
}

// decodeFailureHeaders reads what appendFailureHeaders wrote.
func decodeFailureHeaders(id string, raw []byte) ([]FailureHeader, error) {
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
