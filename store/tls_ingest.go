package store

import (
	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store/internal/reports"
)

// TLS reports through the ingest pipeline: a TLSDraft is prepared (its
// stored value encoded) in the caller's goroutine and stored by
// Ingester.Commit in the pipeline's group commit, with the aggregate and
// failure reports of other inputs: one transaction, one fsync for many.

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

// storeTLSDrafts writes the TLS drafts of a commit, each unless its domain
// is gone or the report is stored already (also earlier in the same
// commit), updates the day roll-ups once per day touched, and returns the
// reports it stored. owners caches domain id -> organization id across
// the commit.
func storeTLSDrafts(tx *bolt.Tx, drafts []*TLSDraft, owners map[string]string) ([]*TLSReportDetail, error) {
	if len(drafts) == 0 {
		return nil, nil
	}
	var stored []*TLSReportDetail
	rolls := tlsDays{}
	dedup := tx.Bucket(bucketTLSDedup)
	// Report keys only grow (time-ordered ids), index keys nearly so (a
	// domain's reports come day after day): fill pages fully, as records
	// do, so that a commit writes fewer pages.
	for _, b := range [][]byte{bucketTLSReports, bucketTLSByOrg, bucketTLSByDomain} {
		tx.Bucket(b).FillPercent = 0.95
	}
	for _, d := range drafts {
		d.out = TLSOutcome{}
		r := d.rep.TLSReport
		owner, err := domainOwner(tx, owners, r.DomainID)
		if err != nil {
			return nil, err
		}
		if owner == "" || owner != r.OrgID {
			d.out.DomainGone = true
			continue
		}
		if id := dedup.Get(d.dkey); id != nil {
			d.out.DuplicateID = string(id)
			continue
		}
		if err := putTLS(tx, r, d.val, d.dkey); err != nil {
			return nil, err
		}
		if err := rolls.add(tx, d.rep, 1); err != nil {
			return nil, err
		}
		d.out.Stored = true
		stored = append(stored, d.rep)
	}
	return stored, rolls.put(tx)
}
