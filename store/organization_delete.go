package store

import (
	"bytes"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// OrganizationDeletion counts what DeleteOrganization removed.
type OrganizationDeletion struct {
	Organization *Organization `json:"organization"`
	Domains      int           `json:"domains"`
	Keys         int           `json:"api_keys"`
	Webhooks     int           `json:"webhooks"`
	Quarantined  int           `json:"quarantine_entries"`
}

// DeleteOrganization removes organization id with everything it owns: its
// API keys first (so nothing can act for it meanwhile), its webhooks and
// their pending deliveries, each domain with its reports, failure reports
// and alerts (DeleteDomain and its cascades), its quarantine entries, and
// last the organization itself with what is left under its id. Each step
// is its own transaction: an interrupted delete leaves the organization
// in place with less data, and running it again finishes it.
// ErrNotFound for an unknown id.
func (db *DB) DeleteOrganization(id string) (*OrganizationDeletion, error) {
	org, err := db.FindOrganizationByID(id)
	if err != nil {
		return nil, err
	}
	del := &OrganizationDeletion{Organization: org}
	if del.Keys, err = db.deleteOrgKeys(org.ID); err != nil {
		return nil, wrap("delete organization keys", err)
	}
	for {
		hooks, _, err := db.ListWebhooks(org.ID, Page{Page: 1, Limit: 100})
		if err != nil {
			return nil, err
		}
		if len(hooks) == 0 {
			break
		}
		for _, h := range hooks {
			if err := db.DeleteWebhook(org.ID, h.ID); err != nil {
				return nil, err
			}
			del.Webhooks++
		}
	}
	for {
		domains, _, err := db.ListDomains(org.ID, Page{Page: 1, Limit: 100})
		if err != nil {
			return nil, err
		}
		if len(domains) == 0 {
			break
		}
		for _, d := range domains {
			if err := db.DeleteDomain(org.ID, d.ID); err != nil {
				return nil, err
			}
			del.Domains++
		}
	}
	if del.Quarantined, err = db.deleteOrgQuarantine(org.ID); err != nil {
		return nil, err
	}
	err = db.updateAuth(func(tx *bolt.Tx) error {
		rec, err := getOrg(tx, org.ID)
		if err != nil {
			return err
		}
		// Index entries under the organization's id that no domain
		// cascade reached (organization-wide roll-ups and indexes).
		for _, b := range [][]byte{bucketAlertsByOrg, bucketFailuresByOrg, bucketFailureRollups,
			bucketDomainsByOrg, bucketKeysByOrg, bucketWebhooksByOrg, bucketReportsByOrg, bucketReportCounts} {
			if err := deleteAllWithPrefix(tx.Bucket(b), orgPrefix(org.ID)); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bucketOrgsByName).Delete(orgNameKey(rec.Name)); err != nil {
			return err
		}
		return tx.Bucket(bucketOrgs).Delete(idKey(org.ID))
	})
	if err != nil {
		return nil, wrap("delete organization", err)
	}
	return del, nil
}

// deleteOrgKeys deletes every key of the organization, revoked or not,
// with its hash entry, in one transaction.
func (db *DB) deleteOrgKeys(orgID string) (int, error) {
	n := 0
	err := db.updateAuth(func(tx *bolt.Tx) error {
		n = 0
		byOrg := tx.Bucket(bucketKeysByOrg)
		var ids []string
		c := byOrg.Cursor()
		prefix := orgPrefix(orgID)
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			ids = append(ids, idFromOrgTimeIDKey(k))
		}
		for _, id := range ids {
			rec, err := getKey(tx, id)
			if err != nil {
				continue // an index entry without its key: swept with the prefix
			}
			if err := tx.Bucket(bucketKeysByHash).Delete(rec.Hash); err != nil {
				return err
			}
			if err := tx.Bucket(bucketKeys).Delete(idKey(id)); err != nil {
				return err
			}
			n++
		}
		return deleteAllWithPrefix(byOrg, prefix)
	})
	return n, err
}

// deleteOrgQuarantine deletes the quarantine entries of the organization.
func (db *DB) deleteOrgQuarantine(orgID string) (int, error) {
	n := 0
	for page := 1; ; {
		entries, _, err := db.ListQuarantine(Page{Page: page, Limit: 100})
		if err != nil {
			return n, err
		}
		if len(entries) == 0 {
			return n, nil
		}
		kept := 0
		for _, e := range entries {
			if e.OrgID != orgID {
				kept++
				continue
			}
			if err := db.DeleteQuarantine(e.ID); err != nil {
				return n, err
			}
			n++
		}
		if kept == len(entries) {
			page++ // a page of others' entries: look further
		}
	}
}

// deleteAllWithPrefix deletes every key of b starting with prefix.
func deleteAllWithPrefix(b *bolt.Bucket, prefix []byte) error {
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// RenameOrganization gives organization id a new name, with the checks of
// CreateOrganization (ErrInvalid, ErrConflict for a name another
// organization has; a change of case only is allowed). ErrNotFound for an
// unknown id.
func (db *DB) RenameOrganization(id, name string) (*Organization, error) {
	name, err := cleanName("organization name", name)
	if err != nil {
		return nil, err
	}
	if ValidID(strings.ToLower(name)) {
		return nil, errorf(ErrInvalid, "organization name must not look like an id")
	}
	var rec *orgRecord
	err = db.updateAuth(func(tx *bolt.Tx) error {
		r, err := getOrg(tx, id)
		if err != nil {
			return err
		}
		names := tx.Bucket(bucketOrgsByName)
		if other := names.Get(orgNameKey(name)); other != nil && string(other) != r.ID {
			return errorf(ErrConflict, "organization %q already exists", name)
		}
		if err := names.Delete(orgNameKey(r.Name)); err != nil {
			return err
		}
		r.Name = name
		rec = r
		if err := putOrg(tx, r); err != nil {
			return err
		}
		return names.Put(orgNameKey(name), idKey(r.ID))
	})
	if err != nil {
		return nil, wrap("rename organization", err)
	}
	return rec.organization(), nil
}
