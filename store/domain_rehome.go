package store

import (
	"strings"

	bolt "go.etcd.io/bbolt"
)

// Rehomed is one domain whose reporting address RehomeUnverified moved.
type Rehomed struct {
	DomainID string
	OrgID    string
	Name     string
	From, To string
}

// RehomeUnverified moves the reporting address of every domain never
// verified (no verified_at) to reportingDomain, keeping its local part: until
// a domain's DNS publishes its address, that address follows the current
// --reporting-domain, so a first start on a host with an unusable name hands
// out nothing that must stay. A verified domain keeps its address, since
// that is what its DNS publishes. The suggested record (dmarc_record) is
// rewritten with the new address. A domain whose new address another domain
// already has keeps its old one and is left out of the result. All in one
// transaction.
func (db *DB) RehomeUnverified(reportingDomain string) ([]Rehomed, error) {
	reportingDomain = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(reportingDomain), "."))
	if reportingDomain == "" || strings.IndexFunc(reportingDomain, isSpaceOrControl) >= 0 || strings.Contains(reportingDomain, "@") {
		return nil, errorf(ErrInvalid, "reporting domain %q is not a domain name", reportingDomain)
	}
	var moved []Rehomed
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		moved = nil
		var recs []*domainRecord
		err := tx.Bucket(bucketDomains).ForEach(func(k, v []byte) error {
			rec, err := decodeDomain(string(k), v)
			if err != nil {
				return err
			}
			_, host, ok := strings.Cut(rec.ReportingEmail, "@")
			if ok && rec.VerifiedAt == nil && !strings.EqualFold(host, reportingDomain) {
				recs = append(recs, rec)
			}
			return nil
		})
		if err != nil {
			return err
		}
		byEmail := tx.Bucket(bucketDomainsByEmail)
		for _, rec := range recs {
			local, _, _ := strings.Cut(rec.ReportingEmail, "@")
			to := local + "@" + reportingDomain
			if byEmail.Get(emailKey(to)) != nil {
				continue
			}
			from := rec.ReportingEmail
			if err := byEmail.Delete(emailKey(from)); err != nil {
				return err
			}
			rec.ReportingEmail = to
			rec.DMARCRecord = strings.ReplaceAll(rec.DMARCRecord, from, to)
			if err := putDomain(tx, rec); err != nil {
				return err
			}
			if err := byEmail.Put(emailKey(to), idKey(rec.ID)); err != nil {
				return err
			}
			moved = append(moved, Rehomed{DomainID: rec.ID, OrgID: rec.OrgID, Name: rec.Name, From: from, To: to})
		}
		return nil
	})
	if err != nil {
		return nil, wrap("rehome unverified domains", err)
	}
	for _, m := range moved {
		db.domainVersions.counter(m.OrgID).Add(2) // caches of the organization's domains are stale
	}
	return moved, nil
}
