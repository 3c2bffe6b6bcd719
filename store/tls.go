package store

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/dmarc/tlsrpt"
	"github.com/dmarcd/dmarcd/store/internal/reports"
)

// SMTP TLS reports (RFC 8460). Each is stored whole under its own id
// (bucketTLSReports, reports.AppendTLS), indexed by organization and by domain in
// date_begin order with its date_end beside it (so the date filters read
// only the index), deduplicated by organization name + report id + domain,
// and counted in per-domain per-day roll-ups (bucketTLSRollups) so that
// statistics never read a report.

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

// TLSInput is one parsed report to store for a domain of an organization
// (NewTLSDraft).
type TLSInput struct {
	OrgID, DomainID string
	Report          *tlsrpt.Report
	ReceivedAt      time.Time
}

// TLSDraft is a TLS report ready to be committed (IngestBatch.TLS).
type TLSDraft struct {
	rep  *TLSReportDetail
	val  []byte
	dkey []byte
	out  TLSOutcome
}

// TLSOutcome is what Commit did with one TLSDraft.
type TLSOutcome struct {
	// Stored is set when the report is now stored.
	Stored bool
	// DuplicateID is the report already stored with the same identity
	// (domain, organization name, report id) when that kept this one out.
	DuplicateID string
	// DomainGone is set when the domain was deleted (or belongs to another
	// organization) before the commit.
	DomainGone bool
}

// NewTLSDraft prepares in for a commit, giving it a new id. The report is
// stored as ListTLSReports and FindTLSReport show it (UTC seconds, text cut). ErrInvalid for
// a nil report, a zero receive time or malformed ids.
func NewTLSDraft(in TLSInput) (*TLSDraft, error) {
	if in.Report == nil || in.ReceivedAt.IsZero() {
		return nil, errorf(ErrInvalid, "TLS report: a report and a receive time are required")
	}
	if !ValidID(in.OrgID) || !ValidID(in.DomainID) {
		return nil, errorf(ErrInvalid, "TLS report needs a domain and an organization")
	}
	d := reports.TLSDetailOf(NewID(), in.OrgID, in.DomainID, in.Report, in.ReceivedAt)
	return &TLSDraft{rep: d, val: reports.AppendTLS(nil, in.OrgID, d), dkey: tlsDedupKey(in.DomainID, d.OrganizationName, d.ReportID)}, nil
}

// Report returns the report as it is stored (its ID included).
func (d *TLSDraft) Report() *TLSReport { return d.rep.TLSReport }

// Outcome returns what the commit did with the draft.
func (d *TLSDraft) Outcome() TLSOutcome { return d.out }

// TLSFilter selects TLS reports for ListTLSReports, as for aggregate
// reports: DateFrom keeps reports whose date_begin >= DateFrom, DateTo
// those whose date_end <= DateTo. Cursor, when set, is a NextCursor of an
// earlier page with the same filters, and replaces Page.Page.
type TLSFilter struct {
	DomainID         string
	DateFrom, DateTo *time.Time
	Page             Page
	Cursor           string
}

// TLSList is one page of TLS reports.
type TLSList struct {
	Reports []*TLSReport
	// Total is how many reports pass the filters, cursor aside.
	Total int
	// NextCursor continues after the last report of the page; "" on the
	// last page.
	NextCursor string
}

// ListTLSReports returns one page of the TLS reports of organization orgID
// that pass f, newest date_begin first (ties: newest stored first). The
// filters are read from the index, never from the reports. Errors:
// ErrNotFound when f.DomainID is not a domain of the organization,
// ErrInvalid for a page or limit below 1 or a malformed cursor.
func (db *DB) ListTLSReports(orgID string, f TLSFilter) (*TLSList, error) {
	if f.Cursor != "" {
		f.Page.Page = 1
	}
	skip, err := f.Page.offset()
	if err != nil {
		return nil, err
	}
	var after []byte
	if f.Cursor != "" {
		if after, err = decodeTLSCursor(f.Cursor); err != nil {
			return nil, err
		}
	}
	out := &TLSList{Reports: []*TLSReport{}}
	err = db.bolt.View(func(tx *bolt.Tx) error {
		owner, bucket := orgID, bucketTLSByOrg
		if f.DomainID != "" {
			if _, err := getOrgDomain(tx, orgID, f.DomainID); err != nil {
				return err
			}
			owner, bucket = f.DomainID, bucketTLSByDomain
		}
		var ids []string
		var last []byte
		out.Total, ids, last = scanTLS(tx.Bucket(bucket), owner, f, after, skip, f.Page.Limit)
		if last != nil {
			out.NextCursor = base64.RawURLEncoding.EncodeToString(last)
		}
		for _, id := range ids {
			d, err := getTLS(tx, id)
			if err != nil {
				return err
			}
			out.Reports = append(out.Reports, d.TLSReport)
		}
		return nil
	})
	if err != nil {
		return nil, wrap("list TLS reports", err)
	}
	return out, nil
}

// FindTLSReport returns TLS report id of organization orgID with its
// policies. ErrNotFound also when it belongs to another organization or id
// is malformed.
func (db *DB) FindTLSReport(orgID, id string) (*TLSReportDetail, error) {
	var d *TLSReportDetail
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		if d, err = getTLS(tx, id); err != nil {
			return err
		}
		if d.OrgID != orgID {
			d = nil
			return errTLSNotFound()
		}
		return nil
	})
	if err != nil {
		return nil, wrap("find TLS report", err)
	}
	return d, nil
}

// TLS statistics are package reports' values.
type (
	// TLSStatistics are a domain's TLS sessions over a range of UTC days.
	TLSStatistics = reports.TLSStatistics
	// TLSDayStats are one UTC day's sessions.
	TLSDayStats = reports.TLSDayStats
	// TLSResultStats are the failed sessions of one result type.
	TLSResultStats = reports.TLSResultStats
	// TLSPolicyStats are the sessions under one policy type.
	TLSPolicyStats = reports.TLSPolicyStats
	// TLSMXStats are the failed sessions with one receiving MX host.
	TLSMXStats = reports.TLSMXStats
	// TLSIPStats are the failed sessions from one sending IP.
	TLSIPStats = reports.TLSIPStats
)

// TLSStatistics returns the TLS statistics of domain domainID of
// organization orgID over the UTC days from from to to (both included, at
// most 366), read from the roll-ups only. Errors: ErrNotFound for a domain
// of another organization, ErrRangeReversed or ErrRangeTooLong as
// DomainStatistics.
func (db *DB) TLSStatistics(orgID, domainID string, from, to time.Time) (*TLSStatistics, error) {
	fromDay, toDay, err := statsDays(from, to)
	if err != nil {
		return nil, err
	}
	rolls := map[uint32]*reports.TLSDay{}
	err = db.bolt.View(func(tx *bolt.Tx) error {
		if _, err := getOrgDomain(tx, orgID, domainID); err != nil {
			return err
		}
		c := tx.Bucket(bucketTLSRollups).Cursor()
		end := tlsRollupKey(domainID, toDay)
		for k, v := c.Seek(tlsRollupKey(domainID, fromDay)); k != nil && string(k) <= string(end); k, v = c.Next() {
			if len(k) != idLen+4 {
				continue
			}
			d := &reports.TLSDay{}
			if err := json.Unmarshal(v, d); err != nil {
				return fmt.Errorf("decode TLS roll-up %x: %w", k, err)
			}
			rolls[binary.BigEndian.Uint32(k[idLen:])] = d
		}
		return nil
	})
	if err != nil {
		return nil, wrap("TLS statistics", err)
	}
	return reports.TLSStatisticsOf(domainID, fromDay, toDay, rolls), nil
}

// tlsDeleteStep is how many TLS reports one transaction of
// DeleteTLSReportsBefore deletes.
const tlsDeleteStep = 1000

// DeleteTLSReportsBefore deletes every TLS report whose date_end is before
// t, with its index entries and its share of the daily roll-ups, in
// transactions of at most 1,000 reports, and returns how many it deleted.
// Meant for the retention job, with the aggregate reports' cutoff. An
// error leaves the reports of the failed transaction in place.
func (db *DB) DeleteTLSReportsBefore(t time.Time) (int, error) {
	total := 0
	cutoff := unixKey(t)
	for {
		n := 0
		err := db.bolt.Update(func(tx *bolt.Tx) error {
			ids := expiredTLS(tx, cutoff, tlsDeleteStep)
			rolls := tlsDays{}
			for _, id := range ids {
				if err := deleteTLS(tx, id, rolls); err != nil {
					return err
				}
			}
			n = len(ids)
			return rolls.put(tx)
		})
		if err != nil {
			return total, wrap("delete TLS reports", err)
		}
		total += n
		if n < tlsDeleteStep {
			return total, nil
		}
	}
}

func errTLSNotFound() error { return errorf(ErrNotFound, "TLS report not found") }

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
