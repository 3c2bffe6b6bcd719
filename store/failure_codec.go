package store

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"time"
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
// source IP, message id and arrival date (NUL-separated), or, for a report
// with an Identity, that identity in place of the arrival date: a report
// with the same four for the same domain is the same report.
func failDedupKey(r *FailureReport) []byte {
	h := sha256.New()
	for _, p := range []*string{r.Reporter, r.SourceIP, r.MessageID} {
		if p != nil {
			h.Write([]byte(*p))
		}
		h.Write([]byte{0})
	}
	if r.Identity != "" {
		// 0xff and a text: never the 8 bytes of an arrival date.
		h.Write([]byte{0xff})
		h.Write([]byte(r.Identity))
	} else {
		var ts [8]byte
		binary.BigEndian.PutUint64(ts[:], unixKey(r.ArrivalDate))
		h.Write(ts[:])
	}
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

// failureCodecVersion is the first byte of a failure report value written
// now: version 1 (codecVersion) and, after the geo object, the
// Auth-Failure values as reported and the identity. Version 1 values
// (schema 6) are read as reporting the families, without identity.
const failureCodecVersion = 2

// appendFailure encodes a failure report (the id is the key; headers are
// stored apart).
func appendFailure(e enc, r *FailureReport, mask byte, dkim [2]*string) enc {
	e = append(e, failureCodecVersion)
	e = e.str(r.DomainID).str(r.Domain).str(r.OrgID).time(r.ReceivedAt).time(r.ArrivalDate)
	e = e.opt(r.Reporter).opt(r.SourceIP).opt(r.OriginalMailFrom).opt(r.OriginalRcptTo).opt(r.ReportedDomain)
	e = e.opt(r.Subject).opt(r.MessageID).str(r.FeedbackType).uvarint(uint64(mask)).opt(r.DeliveryResult)
	a := &r.AuthenticationResults
	e = e.opt(a.DMARC).opt(a.SPF).opt(a.DKIM).opt(dkim[0]).opt(dkim[1])
	e = appendGeo(e, r.Geo)
	e = e.uvarint(uint64(len(r.AuthFailureReported)))
	for _, v := range r.AuthFailureReported {
		e = e.str(v)
	}
	return e.str(r.Identity)
}

// decodeFailure reads what appendFailure wrote (either version).
func decodeFailure(id string, raw []byte) (*FailureReportDetail, byte, error) {
	d := &dec{b: raw}
	version := d.byte()
	if version != codecVersion && version != failureCodecVersion {
		return nil, 0, fmt.Errorf("failure report %s: %w", id, errCorrupt)
	}
	r := &FailureReport{ID: id, DomainID: d.str(), Domain: d.str(), OrgID: d.str(), ReceivedAt: d.time(), ArrivalDate: d.time()}
	r.Reporter, r.SourceIP, r.OriginalMailFrom, r.OriginalRcptTo, r.ReportedDomain = d.opt(), d.opt(), d.opt(), d.opt(), d.opt()
	r.Subject, r.MessageID, r.FeedbackType = d.opt(), d.opt(), d.str()
	mask := byte(d.uvarint())
	r.AuthFailure = failChecksOf(mask)
	r.DeliveryResult = d.opt()
	r.AuthenticationResults = FailureAuthResults{DMARC: d.opt(), SPF: d.opt(), DKIM: d.opt()}
	det := &FailureReportDetail{FailureReport: r, DKIMDomain: d.opt(), DKIMSelector: d.opt()}
	r.Geo = decodeGeo(d)
	if version == codecVersion {
		r.AuthFailureReported = failChecksOf(mask)
	} else {
		r.AuthFailureReported = make([]string, d.count())
		for i := range r.AuthFailureReported {
			r.AuthFailureReported[i] = d.str()
		}
		r.Identity = d.str()
	}
	if !d.ok() || len(d.b) != 0 {
		return nil, 0, fmt.Errorf("failure report %s: %w", id, errCorrupt)
	}
	return det, mask, nil
}

// appendFailureHeaders encodes the headers of an original message.
func appendFailureHeaders(e enc, hs []FailureHeader) enc {
	e = append(e, codecVersion)
	e = e.uvarint(uint64(len(hs)))
	for _, h := range hs {
		e = e.str(h.Name).str(h.Value)
	}
	return e
}

// decodeFailureHeaders reads what appendFailureHeaders wrote.
func decodeFailureHeaders(id string, raw []byte) ([]FailureHeader, error) {
	d := &dec{b: raw}
	if d.byte() != codecVersion {
		return nil, fmt.Errorf("failure report %s headers: %w", id, errCorrupt)
	}
	hs := make([]FailureHeader, d.count())
	for i := range hs {
		hs[i] = FailureHeader{Name: d.str(), Value: d.str()}
	}
	if !d.ok() || len(d.b) != 0 {
		return nil, fmt.Errorf("failure report %s headers: %w", id, errCorrupt)
	}
	return hs, nil
}
