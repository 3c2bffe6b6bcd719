package store

import (
	"crypto/sha256"
	"encoding/binary"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/dmarc/tlsrpt"
	"github.com/dmarcd/dmarcd/store/internal/reports"
)

// SMTP TLS reports (RFC 8460). Each is stored whole under its own id
// (bucketTLSReports, tls_codec.go), indexed by organization and by domain in
// date_begin order with its date_end beside it (so the date filters read
// only the index), deduplicated by organization name + report id + domain,
// and counted in per-domain per-day roll-ups (bucketTLSRollups) so that
// statistics never read a report.

// TLSInput is one parsed report to store for a domain of an organization
// (NewTLSDraft).
type TLSInput struct {
	OrgID, DomainID string
	Report          *tlsrpt.Report
	ReceivedAt      time.Time
}

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
	return reports.DecodeTLS(id, raw)
}

// TLS reports are package reports' values.
type (
	// TLSReport is a stored TLS report as lists show it (API.md).
	TLSReport = reports.TLSReport
	// TLSPolicy is one policy of a TLS report with its sessions.
	TLSPolicy = reports.TLSPolicy
	// TLSFailureDetail is one failure detail of a policy.
	TLSFailureDetail = reports.TLSFailureDetail
	// TLSReportDetail is a TLS report as the single GET shows it.
	TLSReportDetail = reports.TLSReportDetail
)
