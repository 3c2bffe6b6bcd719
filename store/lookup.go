package store

import (
	bolt "go.etcd.io/bbolt"
)

// Lookup answers the reads ingest makes for each report (its domain by
// name, whether it is stored already) in one read transaction instead of
// one each: a small report pays for its transactions as much as for its
// records. It is valid only inside the function given to DB.Lookup.
type Lookup struct {
	db *DB
	tx *bolt.Tx
}

// Lookup calls fn with a Lookup over one read transaction, returning fn's
// error. fn must not keep l, nor write to the store (a read transaction
// would then wait on itself when the file grows).
func (db *DB) Lookup(fn func(l *Lookup) error) error {
	return db.bolt.View(func(tx *bolt.Tx) error { return fn(&Lookup{db: db, tx: tx}) })
}

// DomainsNamed is DB.DomainsNamed inside the lookup's transaction.
func (l *Lookup) DomainsNamed(orgID, name string) ([]DomainRef, error) {
	refs, err := domainsNamed(l.tx, orgID, name)
	if err != nil {
		return nil, wrap("find domains by name", err)
	}
	return refs, nil
}

// FindDuplicate is DB.FindDuplicate inside the lookup's transaction.
func (l *Lookup) FindDuplicate(d *ReportDraft) (*Report, error) {
	rep, err := l.db.findDuplicate(l.tx, d.key)
	if err != nil {
		return nil, wrap("find duplicate report", err)
	}
	return rep, nil
}

// domainsNamed returns the domains called name of orgID, or of every
// organization when orgID is "".
func domainsNamed(tx *bolt.Tx, orgID, name string) ([]DomainRef, error) {
	var refs []DomainRef
	byName := tx.Bucket(bucketDomainsByName)
	find := func(org []byte) error {
		if id := byName.Get(domainNameKey(string(org), name)); id != nil {
			refs = append(refs, DomainRef{ID: string(id), OrgID: string(org), Name: name})
		}
		return nil
	}
	if orgID != "" {
		return refs, find([]byte(orgID))
	}
	return refs, tx.Bucket(bucketOrgs).ForEach(func(org, _ []byte) error { return find(org) })
}

// findDuplicate returns the stored report with the identity of key, a
// reportKey, or nil.
func (db *DB) findDuplicate(tx *bolt.Tx, key []byte) (*Report, error) {
	rep, _, err := db.identities(tx).storedReport(tx, key)
	return rep, err
}
