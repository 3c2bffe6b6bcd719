package store

import (
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/alert"
	"github.com/dmarcd/dmarcd/store/internal/days"
)

// raiseTLSAlerts runs the TLS rule (tls_failure_rate) for the TLS reports
// just stored, in the transaction that stores them, so an alert exists
// exactly when its report does.
func (db *DB) raiseTLSAlerts(tx *bolt.Tx, stored []*TLSReportDetail) error {
	rules := db.AlertRules()
	if rules.Disabled || len(stored) == 0 {
		return nil
	}
	now := db.now()
	e := &ruleEval{db: db, tx: tx, rules: rules, now: now, today: days.Of(now),
		dedup: tx.Bucket(bucketAlertDedup), counts: map[string]int{}}
	names := map[string]string{}
	for _, d := range stored {
		r := d.TLSReport
		name, ok := names[r.DomainID]
		if !ok {
			dom, err := getDomain(tx, r.DomainID)
			if err != nil {
				return err
			}
			name = dom.Name
			names[r.DomainID] = name
		}
		rep := alert.TLSReport{ID: r.ID, DomainID: r.DomainID, Domain: name, Reporter: r.OrganizationName,
			ReportID: r.ReportID, DateBegin: r.DateBegin, DateEnd: r.DateEnd,
			Successful: r.SuccessfulSessions, Failed: r.FailedSessions, ResultTypes: map[string]int64{}}
		for _, p := range d.Policies {
			for _, f := range p.FailureDetails {
				rep.ResultTypes[f.ResultType] += f.FailedSessions
			}
		}
		if c := rules.EvaluateTLS(&rep, e, now); c != nil {
			if err := e.raise(c, r.OrgID, r.DomainID); err != nil {
				return fmt.Errorf("alert rules for TLS report %s: %w", r.ID, err)
			}
		}
	}
	return nil
}
