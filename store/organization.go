package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// Organization owns domains, keys and everything reported about them.
type Organization struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Plan      Plan      `json:"plan"`
	CreatedAt time.Time `json:"created_at"`
}

// orgRecord is how an organization is stored.
type orgRecord struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Plan      Plan      `json:"plan"`
	CreatedAt time.Time `json:"created_at"`
}

// maxNameLen bounds organization names, in characters.
const maxNameLen = 64

// MaxKeyNameLen bounds API key names, in characters (API.md: 1 to 100).
const MaxKeyNameLen = 100

// cleanName trims a display name and checks it: 1..64 characters of valid
// UTF-8 with no control characters. what names the field in the message.
func cleanName(what, s string) (string, error) {
	return cleanNameLen(what, s, maxNameLen)
}

// cleanNameLen is cleanName with another bound than maxNameLen.
func cleanNameLen(what, s string, max int) (string, error) {
	s = strings.TrimSpace(s)
	if n := utf8.RuneCountInString(s); n == 0 || n > max {
		return "", errorf(ErrInvalid, "%s must be 1 to %d characters", what, max)
	}
	if !utf8.ValidString(s) || strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return "", errorf(ErrInvalid, "%s must be valid text without control characters", what)
	}
	return s, nil
}

// CreateOrganization creates an organization. The name is trimmed and must be
// 1..64 characters without control characters and must not look like an id
// (ErrInvalid), and is unique regardless of case (ErrConflict). An unknown
// plan is ErrInvalid.
func (db *DB) CreateOrganization(name string, plan Plan) (*Organization, error) {
	name, err := cleanName("organization name", name)
	if err != nil {
		return nil, err
	}
	// Organizations are referred to by id or name; keep the two apart.
	if ValidID(strings.ToLower(name)) {
		return nil, errorf(ErrInvalid, "organization name must not look like an id")
	}
	if plan, err = ParsePlan(string(plan)); err != nil {
		return nil, err
	}
	rec := &orgRecord{ID: NewID(), Name: name, Plan: plan, CreatedAt: db.now()}
	err = db.updateAuth(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketOrgsByName).Get(orgNameKey(name)) != nil {
			return errorf(ErrConflict, "organization %q already exists", name)
		}
		if err := putOrg(tx, rec); err != nil {
			return err
		}
		return tx.Bucket(bucketOrgsByName).Put(orgNameKey(name), idKey(rec.ID))
	})
	if err != nil {
		return nil, wrap("create organization", err)
	}
	return rec.organization(), nil
}

// FindOrganizationByID returns the organization with id, or ErrNotFound.
func (db *DB) FindOrganizationByID(id string) (*Organization, error) {
	var rec *orgRecord
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		rec, err = getOrg(tx, id)
		return err
	})
	if err != nil {
		return nil, wrap("find organization", err)
	}
	return rec.organization(), nil
}

// FindOrganization returns the organization whose id (in any case) or else
// name (case-insensitive) is ref, or ErrNotFound.
func (db *DB) FindOrganization(ref string) (*Organization, error) {
	ref = strings.TrimSpace(ref)
	if id := strings.ToLower(ref); ValidID(id) {
		return db.FindOrganizationByID(id)
	}
	var rec *orgRecord
	err := db.bolt.View(func(tx *bolt.Tx) error {
		id := tx.Bucket(bucketOrgsByName).Get(orgNameKey(ref))
		if id == nil {
			return errOrgNotFound()
		}
		var err error
		rec, err = getOrg(tx, string(id))
		return err
	})
	if err != nil {
		return nil, wrap("find organization", err)
	}
	return rec.organization(), nil
}

// ListOrganizations returns every organization, sorted by name
// (case-insensitive).
func (db *DB) ListOrganizations() ([]*Organization, error) {
	orgs := []*Organization{}
	err := db.bolt.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketOrgsByName).ForEach(func(_, id []byte) error {
			rec, err := getOrg(tx, string(id))
			if err != nil {
				return err
			}
			orgs = append(orgs, rec.organization())
			return nil
		})
	})
	if err != nil {
		return nil, wrap("list organizations", err)
	}
	return orgs, nil
}

// SetOrganizationPlan changes the plan of organization id and returns it.
// Domains beyond a lower plan's limit stay; new ones are refused. An unknown
// plan is ErrInvalid, an unknown organization ErrNotFound.
func (db *DB) SetOrganizationPlan(id string, plan Plan) (*Organization, error) {
	plan, err := ParsePlan(string(plan))
	if err != nil {
		return nil, err
	}
	var rec *orgRecord
	err = db.updateAuth(func(tx *bolt.Tx) error {
		r, err := getOrg(tx, id)
		if err != nil {
			return err
		}
		r.Plan = plan
		rec = r
		return putOrg(tx, r)
	})
	if err != nil {
		return nil, wrap("set organization plan", err)
	}
	return rec.organization(), nil
}

// CountOrganizations returns the number of organizations.
func (db *DB) CountOrganizations() (int, error) {
	var n int
	err := db.bolt.View(func(tx *bolt.Tx) error {
		n = countPrefix(tx.Bucket(bucketOrgs), nil)
		return nil
	})
	return n, wrap("count organizations", err)
}

func errOrgNotFound() error { return errorf(ErrNotFound, "organization not found") }

// getOrg reads organization id; ErrNotFound when it is absent or id malformed.
func getOrg(tx *bolt.Tx, id string) (*orgRecord, error) {
	if !ValidID(id) {
		return nil, errOrgNotFound()
	}
	raw := tx.Bucket(bucketOrgs).Get(idKey(id))
	if raw == nil {
		return nil, errOrgNotFound()
	}
	rec := new(orgRecord)
	if err := json.Unmarshal(raw, rec); err != nil {
		return nil, fmt.Errorf("decode organization %s: %w", id, err)
	}
	return rec, nil
}

func putOrg(tx *bolt.Tx, rec *orgRecord) error {
	raw, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode organization %s: %w", rec.ID, err)
	}
	return tx.Bucket(bucketOrgs).Put(idKey(rec.ID), raw)
}

func (rec *orgRecord) organization() *Organization {
	return &Organization{ID: rec.ID, Name: rec.Name, Plan: rec.Plan, CreatedAt: rec.CreatedAt}
}

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
			bucketDomainsByOrg, bucketKeysByOrg, bucketWebhooksByOrg, bucketReportCounts,
			bucketNotifySettings, bucketAlertMailWindows} {
			if err := deleteAllWithPrefix(tx.Bucket(b), orgPrefix(org.ID)); err != nil {
				return err
			}
		}
		// Its people's places, links and audit log (the accounts stay).
		if err := deleteOrgMemberships(tx, org.ID); err != nil {
			return err
		}
		if err := deleteInvitationsPrefix(tx, orgPrefix(org.ID)); err != nil {
			return err
		}
		if err := deleteAllWithPrefix(tx.Bucket(bucketAudit), orgPrefix(org.ID)); err != nil {
			return err
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
