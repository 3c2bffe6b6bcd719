package store

import (
	"errors"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestNameCacheFollowsDomains ensures the cached answer to "which domains
// are called this" changes as domains are added and removed, including an
// answer read from a transaction that began before a domain was added and
// recorded after it committed.
func TestNameCacheFollowsDomains(t *testing.T) {
	db, orgID := openFailureDB(t)
	named := func(org string) int {
		t.Helper()
		var n int
		err := db.Lookup(func(l *Lookup) error {
			refs, err := l.DomainsNamed(org, "example.org")
			n = len(refs)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := named(""); n != 0 {
		t.Fatalf("%d domains called example.org before any", n)
	}
	// An answer read from a transaction that began before the domain was
	// added, recorded after it committed, under the version of its start.
	// (A read transaction held open here would block the commit's remap.)
	ver := db.names.ver.Load()
	dom := &Domain{OrgID: orgID, Name: "example.org", ReportingEmail: "r@reports.test", DMARCRecord: "v=DMARC1; p=none"}
	if err := db.CreateDomain(dom); err != nil {
		t.Fatal(err)
	}
	db.names.m["\x00example.org"] = nameAnswer{ver: ver}
	if n := named(""); n != 1 {
		t.Fatalf("%d domains called example.org after it was added, want 1", n)
	}
	if n := named(orgID); n != 1 {
		t.Fatalf("%d domains called example.org in its organization, want 1", n)
	}
	// Answered from the cache: the answer is the caller's to change.
	err := db.Lookup(func(l *Lookup) error {
		refs, _ := l.DomainsNamed("", "example.org")
		refs[0].ID = "changed"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	refs, err := db.DomainsNamed("", "example.org")
	if err != nil || len(refs) != 1 || refs[0].ID != dom.ID {
		t.Fatalf("DomainsNamed after a caller changed its answer: %v, %v", refs, err)
	}
	if err := db.DeleteDomain(orgID, dom.ID); err != nil {
		t.Fatal(err)
	}
	if n := named(""); n != 0 {
		t.Fatalf("%d domains called example.org after it was deleted", n)
	}
	// A rolled-back add changes nothing but the version.
	_ = db.bolt.Update(func(tx *bolt.Tx) error {
		db.names.changing(tx)
		return errors.New("roll back")
	})
	if n := named(""); n != 0 {
		t.Fatalf("%d domains after a rolled-back change", n)
	}
}
