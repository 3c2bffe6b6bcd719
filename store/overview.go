package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The operator view (issue 26): for each of many organizations, its
// domains with their message totals over a range of days and its open
// alerts, read in one transaction from the day totals and the alert
// index, decoding only what the view shows.

// DomainTotals is one domain's totals over a range.
type DomainTotals struct {
	// Domain carries the id, organization, name, status, verification
	// and last report only.
	Domain         *Domain
	Messages, Pass int64
}

// OrgTotals is one organization's domains (in creation order) and open
// (pending or sent) alerts.
type OrgTotals struct {
	OrgID      string
	Domains    []DomainTotals
	OpenAlerts int
}

// OrganizationsTotals returns the OrgTotals of each organization of
// orgIDs, in that order, over the UTC days from..to (both included).
// Errors as DomainStatistics; an unknown organization is ErrNotFound.
func (db *DB) OrganizationsTotals(orgIDs []string, from, to time.Time) ([]OrgTotals, error) {
	fromDay, toDay, err := statsDays(from, to)
	if err != nil {
		return nil, err
	}
	out := make([]OrgTotals, 0, len(orgIDs))
	pending, sent := statusCode(AlertPending), statusCode(AlertSent)
	err = db.bolt.View(func(tx *bolt.Tx) error {
		domains := tx.Bucket(bucketDomains)
		for _, orgID := range orgIDs {
			if _, err := getOrg(tx, orgID); err != nil {
				return err
			}
			ot := OrgTotals{OrgID: orgID}
			err := forEachOrgDomainID(tx, orgID, func(id string) error {
				raw := domains.Get(idKey(id))
				if raw == nil {
					return nil
				}
				var rec struct {
					ID           string       `json:"id"`
					OrgID        string       `json:"org_id"`
					Name         string       `json:"name"`
					Status       DomainStatus `json:"status"`
					VerifiedAt   *time.Time   `json:"verified_at"`
					LastReportAt *time.Time   `json:"last_report_at"`
				}
				if err := json.Unmarshal(raw, &rec); err != nil {
					return fmt.Errorf("decode domain %s: %w", id, err)
				}
				dt := DomainTotals{Domain: &Domain{ID: rec.ID, OrgID: rec.OrgID, Name: rec.Name, Status: rec.Status,
					VerifiedAt: rec.VerifiedAt, LastReportAt: rec.LastReportAt}}
				err := eachRollupTotals(tx, id, fromDay, toDay, func(_ uint32, t DayStats) {
					dt.Messages += t.Messages
					dt.Pass += t.DMARCPass
				})
				ot.Domains = append(ot.Domains, dt)
				return err
			})
			if err != nil {
				return err
			}
			prefix := orgPrefix(orgID)
			c := tx.Bucket(bucketAlertsByOrg).Cursor()
			for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
				if st, _, _ := decodeAlertIndex(v); st == pending || st == sent {
					ot.OpenAlerts++
				}
			}
			out = append(out, ot)
		}
		return nil
	})
	if err != nil {
		return nil, wrap("organizations' totals", err)
	}
	return out, nil
}
