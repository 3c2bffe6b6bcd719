package store

import (
	"slices"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
)

// Lookup answers the reads ingest makes for each report (its domain by
// name, whether it is stored already) in one read transaction instead of
// one each: a small report pays for its transactions as much as for its
// records. It is valid only inside the function given to DB.Lookup.
type Lookup struct {
	db *DB
	tx *bolt.Tx
	// names is the names version read before tx began (see nameCache).
	names uint64
}

// Lookup calls fn with a Lookup over one read transaction, returning fn's
// error. fn must not keep l, nor write to the store (a read transaction
// would then wait on itself when the file grows).
func (db *DB) Lookup(fn func(l *Lookup) error) error {
	names := db.names.ver.Load()
	return db.bolt.View(func(tx *bolt.Tx) error { return fn(&Lookup{db: db, tx: tx, names: names}) })
}

// DomainsNamed is DB.DomainsNamed inside the lookup's transaction.
func (l *Lookup) DomainsNamed(orgID, name string) ([]DomainRef, error) {
	refs, err := l.db.names.domainsNamed(l.tx, l.names, orgID, name)
	if err != nil {
		return nil, wrap("find domains by name", err)
	}
	return refs, nil
}

// nameCache remembers which domains are called a name, of an organization
// or of all: ingest asks for each report, and without --org an import
// asked every organization in turn.
//
// An answer read under version v (ver loaded before its transaction
// began) is used while the version is still v. A domain added
// or removed changes it as it writes, so that answers read before are
// stale, and again after its commit, so that answers read meanwhile from
// the old data are too.
type nameCache struct {
	// ver changes around every domain added or removed: insertDomain and
	// removeDomain add 1 as they write and 1 once the transaction commits.
	ver atomic.Uint64
	mu  sync.Mutex
	m   map[string]nameAnswer
}

// changing marks the domain names changing in tx.
func (c *nameCache) changing(tx *bolt.Tx) {
	c.ver.Add(1)
	tx.OnCommit(func() { c.ver.Add(1) })
}

type nameAnswer struct {
	ver  uint64
	refs []DomainRef
}

// maxNameCache bounds the names remembered (reports for domains nobody
// registered are answered too): past it, the cache starts over.
const maxNameCache = 10_000

// domainsNamed is domainsNamed through the cache; ver is c.ver as loaded
// before tx began. The slice returned is the caller's.
func (c *nameCache) domainsNamed(tx *bolt.Tx, ver uint64, orgID, name string) ([]DomainRef, error) {
	key := orgID + "\x00" + name
	c.mu.Lock()
	a, ok := c.m[key]
	c.mu.Unlock()
	if ok && a.ver == ver && c.ver.Load() == ver {
		return slices.Clone(a.refs), nil
	}
	refs, err := domainsNamed(tx, orgID, name)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxNameCache {
		c.m = make(map[string]nameAnswer)
	}
	c.m[key] = nameAnswer{ver: ver, refs: slices.Clone(refs)}
	c.mu.Unlock()
	return refs, nil
}

// FindDuplicate returns the stored report with the identity of d (domain,
// org_name, report id), or nil when there is none: a cheap check before
// the records of a report are parsed. Commit checks again.
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
	rep, _, err := db.identities(tx).storedReport(tx, &db.tables, key)
	return rep, err
}
