package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// DomainStatus is where a domain stands in verification.
type DomainStatus string

// The domain statuses.
const (
	// DomainPending: created, the reporting address not yet seen in DNS.
	DomainPending DomainStatus = "pending"
	// DomainActive: verification found the reporting address.
	DomainActive DomainStatus = "active"
	// DomainInactive: a later DNS check no longer finds it.
	DomainInactive DomainStatus = "inactive"
)

func (s DomainStatus) valid() bool {
	return s == DomainPending || s == DomainActive || s == DomainInactive
}

// Domain is a domain an organization monitors. Its JSON is the API's; OrgID
// and LastDNSRecord stay out of it.
type Domain struct {
	ID             string       `json:"id"`
	OrgID          string       `json:"-"`
	Name           string       `json:"name"`
	Status         DomainStatus `json:"status"`
	VerifiedAt     *time.Time   `json:"verified_at"`
	LastReportAt   *time.Time   `json:"last_report_at"`
	CreatedAt      time.Time    `json:"created_at"`
	ReportingEmail string       `json:"reporting_email"`
	DMARCRecord    string       `json:"dmarc_record"`
	// LastDNSRecord is the _dmarc TXT record last seen by change detection.
	LastDNSRecord string `json:"-"`
	// RegisteredDNSRecord is what _dmarc published when the domain was
	// registered (DMARC records sorted, one per line; "" for none): change
	// detection's first look compares with it.
	RegisteredDNSRecord string `json:"-"`
}

// domainRecord is how a domain is stored.
type domainRecord struct {
	ID             string       `json:"id"`
	OrgID          string       `json:"org_id"`
	Name           string       `json:"name"`
	Status         DomainStatus `json:"status"`
	VerifiedAt     *time.Time   `json:"verified_at,omitempty"`
	LastReportAt   *time.Time   `json:"last_report_at,omitempty"`
	CreatedAt      time.Time    `json:"created_at"`
	ReportingEmail string       `json:"reporting_email"`
	DMARCRecord    string       `json:"dmarc_record"`
	LastDNSRecord  string       `json:"last_dns_record,omitempty"`
	// RegisteredDNSRecord: see Domain.
	RegisteredDNSRecord string `json:"registered_dns_record,omitempty"`
}

// maxDomainNameLen is the longest DNS name in text form.
const maxDomainNameLen = 253

// CreateDomain stores d. The caller sets OrgID, Name (already normalized:
// lower case, no trailing dot), ReportingEmail and DMARCRecord; the store sets
// ID, CreatedAt and Status (pending) and writes them back into d on success.
// Errors: ErrInvalid for a malformed name or address; ErrNotFound for an
// unknown organization; ErrConflict when the organization already has the
// name or any domain of any organization has the reporting address
// (case-insensitive); ErrLimit when the plan's domain count is reached.
// Different organizations may register the same name.
func (db *DB) CreateDomain(d *Domain) error {
	if d == nil {
		return errorf(ErrInvalid, "domain is required")
	}
	rec := recordOf(d)
	rec.ID, rec.CreatedAt, rec.Status = NewID(), db.now(), DomainPending
	if err := rec.validate(); err != nil {
		return err
	}
	err := db.domainVersions.changing(rec.OrgID, func() error {
		return db.bolt.Update(func(tx *bolt.Tx) error {
			org, err := getOrg(tx, rec.OrgID)
			if err != nil {
				return err
			}
			if tx.Bucket(bucketDomainsByName).Get(domainNameKey(rec.OrgID, rec.Name)) != nil {
				return errorf(ErrConflict, "domain already registered in this organization")
			}
			if limit := org.Plan.Limits().MaxDomains; limit >= 0 &&
				countPrefix(tx.Bucket(bucketDomainsByOrg), orgPrefix(rec.OrgID)) >= limit {
				return errorf(ErrLimit, "plan limit of %d domains reached", limit)
			}
			if tx.Bucket(bucketDomainsByEmail).Get(emailKey(rec.ReportingEmail)) != nil {
				return errorf(ErrConflict, "reporting email already in use")
			}
			return db.insertDomain(tx, rec)
		})
	})
	if err != nil {
		return wrap("create domain", err)
	}
	*d = *rec.domain()
	return nil
}

func (rec *domainRecord) validate() error {
	name := rec.Name
	if name == "" || len(name) > maxDomainNameLen || name != strings.ToLower(strings.TrimSpace(name)) ||
		strings.HasSuffix(name, ".") || strings.IndexFunc(name, isSpaceOrControl) >= 0 {
		return errorf(ErrInvalid, "domain name %q is not a normalized domain name", name)
	}
	local, host, ok := strings.Cut(rec.ReportingEmail, "@")
	if !ok || local == "" || host == "" || strings.Contains(host, "@") ||
		strings.IndexFunc(rec.ReportingEmail, isSpaceOrControl) >= 0 {
		return errorf(ErrInvalid, "reporting email %q is not an address", rec.ReportingEmail)
	}
	if !rec.Status.valid() {
		return errorf(ErrInvalid, "invalid domain status %q", rec.Status)
	}
	return nil
}

func isSpaceOrControl(r rune) bool { return r <= ' ' || r == 0x7f }

// FindDomain returns domain id of organization orgID. ErrNotFound also when
// it belongs to another organization or id is malformed.
func (db *DB) FindDomain(orgID, id string) (*Domain, error) {
	var rec *domainRecord
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		rec, err = getOrgDomain(tx, orgID, id)
		return err
	})
	if err != nil {
		return nil, wrap("find domain", err)
	}
	return rec.domain(), nil
}

// FindDomainByID returns domain id whatever its organization, or
// ErrNotFound. For internal use: API handlers use FindDomain.
func (db *DB) FindDomainByID(id string) (*Domain, error) {
	var rec *domainRecord
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		rec, err = getDomain(tx, id)
		return err
	})
	if err != nil {
		return nil, wrap("find domain", err)
	}
	return rec.domain(), nil
}

// FindDomainByReportingEmail returns the domain whose reporting address is
// addr (case-insensitive), or ErrNotFound.
func (db *DB) FindDomainByReportingEmail(addr string) (*Domain, error) {
	var rec *domainRecord
	err := db.bolt.View(func(tx *bolt.Tx) error {
		id := tx.Bucket(bucketDomainsByEmail).Get(emailKey(strings.TrimSpace(addr)))
		if id == nil {
			return errDomainNotFound()
		}
		var err error
		rec, err = getDomain(tx, string(id))
		return err
	})
	if err != nil {
		return nil, wrap("find domain by reporting email", err)
	}
	return rec.domain(), nil
}

// Page selects a page of a listing: Page is 1-based, Limit > 0.
type Page struct {
	Page, Limit int
}

// offset returns how many items come before the page, saturating instead of
// overflowing for absurd page numbers.
func (p Page) offset() (int, error) {
	if p.Page < 1 || p.Limit < 1 {
		return 0, errorf(ErrInvalid, "page and limit must be at least 1")
	}
	if p.Page-1 > math.MaxInt/p.Limit {
		return math.MaxInt, nil
	}
	return (p.Page - 1) * p.Limit, nil
}

// ListDomains returns one page of the domains of organization orgID, newest
// first, and how many it has in all. A page past the end is empty. Errors:
// ErrInvalid for a page or limit below 1, ErrNotFound for an unknown
// organization.
func (db *DB) ListDomains(orgID string, p Page) ([]*Domain, int, error) {
	skip, err := p.offset()
	if err != nil {
		return nil, 0, err
	}
	domains := []*Domain{}
	total := 0
	err = db.bolt.View(func(tx *bolt.Tx) error {
		if _, err := getOrg(tx, orgID); err != nil {
			return err
		}
		prefix := orgPrefix(orgID)
		c := tx.Bucket(bucketDomainsByOrg).Cursor()
		for k := lastWithPrefix(c, prefix); k != nil; k = prevWithPrefix(c, prefix) {
			if total >= skip && len(domains) < p.Limit {
				rec, err := getDomain(tx, idFromOrgTimeIDKey(k))
				if err != nil {
					return err
				}
				domains = append(domains, rec.domain())
			}
			total++
		}
		return nil
	})
	if err != nil {
		return nil, 0, wrap("list domains", err)
	}
	return domains, total, nil
}

// AllDomains returns every domain of every organization in id order, which
// is creation order.
func (db *DB) AllDomains() ([]*Domain, error) {
	domains := []*Domain{}
	err := db.bolt.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketDomains).ForEach(func(k, raw []byte) error {
			rec, err := decodeDomain(string(k), raw)
			if err != nil {
				return err
			}
			domains = append(domains, rec.domain())
			return nil
		})
	})
	if err != nil {
		return nil, wrap("list all domains", err)
	}
	return domains, nil
}

// UpdateDomain applies fn to domain id of organization orgID and stores the
// result, in one transaction, and returns it. fn may change Status,
// VerifiedAt, LastReportAt, DMARCRecord and LastDNSRecord; changes to ID,
// OrgID, Name, ReportingEmail and CreatedAt are undone. An error from fn is
// returned as is and nothing is stored. Errors: ErrNotFound as FindDomain,
// ErrInvalid for an unknown status.
func (db *DB) UpdateDomain(orgID, id string, fn func(d *Domain) error) (*Domain, error) {
	if fn == nil {
		return nil, errorf(ErrInvalid, "update function is required")
	}
	var updated *domainRecord
	var fnErr error
	err := db.domainVersions.changing(orgID, func() error {
		return db.bolt.Update(func(tx *bolt.Tx) error {
			old, err := getOrgDomain(tx, orgID, id)
			if err != nil {
				return err
			}
			d := old.domain()
			if fnErr = fn(d); fnErr != nil {
				return fnErr
			}
			rec := recordOf(d)
			rec.ID, rec.OrgID, rec.Name, rec.ReportingEmail, rec.CreatedAt =
				old.ID, old.OrgID, old.Name, old.ReportingEmail, old.CreatedAt
			if err := rec.validate(); err != nil {
				return err
			}
			updated = rec
			return putDomain(tx, rec)
		})
	})
	if fnErr != nil {
		return nil, fnErr
	}
	if err != nil {
		return nil, wrap("update domain", err)
	}
	return updated.domain(), nil
}

// DeleteDomain removes domain id of organization orgID with its index
// entries and everything that belongs to it (its aggregate reports with
// their records and roll-ups, its failure reports with their headers and
// counts, its alerts and the source index of the alert rules), all in one
// transaction: an error leaves the domain and all of it in place.
// ErrNotFound as FindDomain.
func (db *DB) DeleteDomain(orgID, id string) error {
	err := db.domainVersions.changing(orgID, func() error {
		return db.bolt.Update(func(tx *bolt.Tx) error {
			rec, err := getOrgDomain(tx, orgID, id)
			if err != nil {
				return err
			}
			if err := db.removeDomain(tx, rec); err != nil {
				return err
			}
			// What else is keyed by the domain. A new bucket keyed by
			// domain id gets its line here. The alert dedup entries are
			// left to expire: their keys start with the day.
			// The organization's report index first: it is found
			// through the domain's index, which the next cascade deletes.
			if err := deleteDomainOrgReports(tx, rec.OrgID, rec.ID); err != nil {
				return fmt.Errorf("cascade delete of domain %s: %w", rec.ID, err)
			}
			for _, cascade := range []func(*bolt.Tx, string) error{
				deleteDomainReports,  // aggregate reports, records, roll-ups
				deleteDomainFailures, // failure reports, headers, daily counts
				deleteDomainAlerts,   // alerts, their index, the source index
				deleteDomainTLS,      // TLS reports, their index, daily roll-ups
				deleteDomainSources,  // per-source roll-ups, pending reverse DNS
			} {
				if err := cascade(tx, rec.ID); err != nil {
					return fmt.Errorf("cascade delete of domain %s: %w", rec.ID, err)
				}
			}
			return nil
		})
	})
	return wrap("delete domain", err)
}

// DomainRef names a domain: what routing a report needs of it.
type DomainRef struct {
	ID, OrgID, Name string
}

// DomainsNamed returns the domains called name (lower case, no trailing
// dot) of organization orgID, or of every organization when orgID is "",
// in organization order. It reads index entries only, so it is cheap enough
// to call for every report.
func (db *DB) DomainsNamed(orgID, name string) ([]DomainRef, error) {
	var refs []DomainRef
	names := db.names.ver.Load()
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		refs, err = db.names.domainsNamed(tx, names, orgID, name)
		return err
	})
	if err != nil {
		return nil, wrap("find domains by name", err)
	}
	return refs, nil
}

// maxLocalMatches bounds DomainsByReportingLocal: reporting addresses are
// unique random local parts, so more than one match is already an
// anomaly (an address kept from an earlier --reporting-domain).
const maxLocalMatches = 8

// DomainsByReportingLocal returns the domains whose reporting address has
// the local part local (case-insensitive), whatever its domain part: the
// HTTPS way in for TLS reports (/tlsrpt/<local part>) knows only that.
// At most a few are returned, in address order; none is no error.
func (db *DB) DomainsByReportingLocal(local string) ([]*Domain, error) {
	local = strings.TrimSpace(local)
	if local == "" || strings.ContainsAny(local, "@") {
		return nil, nil
	}
	prefix := emailKey(local + "@")
	var out []*Domain
	err := db.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketDomainsByEmail).Cursor()
		for k, id := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(out) < maxLocalMatches; k, id = c.Next() {
			rec, err := getDomain(tx, string(id))
			if err != nil {
				return err
			}
			out = append(out, rec.domain())
		}
		return nil
	})
	if err != nil {
		return nil, wrap("find domains by reporting local part", err)
	}
	return out, nil
}

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

// DomainIDs returns the id of every domain of every organization, in id
// order (creation order). It reads keys only, so it stays cheap with many
// domains: the DNS change detection spreads its checks by this order.
func (db *DB) DomainIDs() ([]string, error) {
	var ids []string
	err := db.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketDomains).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			ids = append(ids, string(k))
		}
		return nil
	})
	if err != nil {
		return nil, wrap("list domain ids", err)
	}
	return ids, nil
}

// DomainsVersion returns a number that changes whenever a domain of the
// organization is created, changed or deleted. Read it before reading the
// domains: data derived from that read is current while DomainsVersion
// still returns the same number.
func (db *DB) DomainsVersion(orgID string) uint64 {
	return db.domainVersions.counter(orgID).Load()
}

func errDomainNotFound() error { return errorf(ErrNotFound, "domain not found") }

// getDomain reads domain id; ErrNotFound when absent or id malformed.
func getDomain(tx *bolt.Tx, id string) (*domainRecord, error) {
	if !ValidID(id) {
		return nil, errDomainNotFound()
	}
	raw := tx.Bucket(bucketDomains).Get(idKey(id))
	if raw == nil {
		return nil, errDomainNotFound()
	}
	return decodeDomain(id, raw)
}

// getOrgDomain is getDomain that also hides other organizations' domains.
func getOrgDomain(tx *bolt.Tx, orgID, id string) (*domainRecord, error) {
	rec, err := getDomain(tx, id)
	if err != nil {
		return nil, err
	}
	if rec.OrgID != orgID {
		return nil, errDomainNotFound()
	}
	return rec, nil
}

func decodeDomain(id string, raw []byte) (*domainRecord, error) {
	rec := new(domainRecord)
	if err := json.Unmarshal(raw, rec); err != nil {
		return nil, fmt.Errorf("decode domain %s: %w", id, err)
	}
	return rec, nil
}

func putDomain(tx *bolt.Tx, rec *domainRecord) error {
	raw, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode domain %s: %w", rec.ID, err)
	}
	return tx.Bucket(bucketDomains).Put(idKey(rec.ID), raw)
}

// insertDomain writes a new domain and its three index entries.
func (db *DB) insertDomain(tx *bolt.Tx, rec *domainRecord) error {
	db.names.changing(tx)
	if err := putDomain(tx, rec); err != nil {
		return err
	}
	if err := tx.Bucket(bucketDomainsByOrg).Put(orgTimeIDKey(rec.OrgID, rec.CreatedAt, rec.ID), nil); err != nil {
		return err
	}
	if err := tx.Bucket(bucketDomainsByName).Put(domainNameKey(rec.OrgID, rec.Name), idKey(rec.ID)); err != nil {
		return err
	}
	return tx.Bucket(bucketDomainsByEmail).Put(emailKey(rec.ReportingEmail), idKey(rec.ID))
}

// removeDomain deletes a domain and its three index entries.
func (db *DB) removeDomain(tx *bolt.Tx, rec *domainRecord) error {
	db.names.changing(tx)
	for _, del := range []struct {
		bucket, key []byte
	}{
		{bucketDomains, idKey(rec.ID)},
		{bucketDomainsByOrg, orgTimeIDKey(rec.OrgID, rec.CreatedAt, rec.ID)},
		{bucketDomainsByName, domainNameKey(rec.OrgID, rec.Name)},
		{bucketDomainsByEmail, emailKey(rec.ReportingEmail)},
	} {
		if err := tx.Bucket(del.bucket).Delete(del.key); err != nil {
			return err
		}
	}
	return nil
}

// recordOf copies d into its stored form, times in UTC at second precision.
func recordOf(d *Domain) *domainRecord {
	return &domainRecord{
		ID: d.ID, OrgID: d.OrgID, Name: d.Name, Status: d.Status,
		VerifiedAt: secondUTC(d.VerifiedAt), LastReportAt: secondUTC(d.LastReportAt),
		CreatedAt: d.CreatedAt, ReportingEmail: d.ReportingEmail,
		DMARCRecord: d.DMARCRecord, LastDNSRecord: d.LastDNSRecord,
		RegisteredDNSRecord: d.RegisteredDNSRecord,
	}
}

func (rec *domainRecord) domain() *Domain {
	return &Domain{
		ID: rec.ID, OrgID: rec.OrgID, Name: rec.Name, Status: rec.Status,
		VerifiedAt: rec.VerifiedAt, LastReportAt: rec.LastReportAt, CreatedAt: rec.CreatedAt,
		ReportingEmail: rec.ReportingEmail, DMARCRecord: rec.DMARCRecord, LastDNSRecord: rec.LastDNSRecord,
		RegisteredDNSRecord: rec.RegisteredDNSRecord,
	}
}

// secondUTC returns a copy of t in UTC at second precision, as the API shows
// times; nil stays nil.
func secondUTC(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	return new(t.UTC().Truncate(time.Second))
}
