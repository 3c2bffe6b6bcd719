// Package storetest opens real store databases for tests: a file in the
// test's temporary directory, a clock the test controls, and a consistency
// check when the test ends.
package storetest

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
)

// Epoch returns the time Open pins its clock to: 2026-11-22 09:30:00 UTC.
func Epoch() time.Time { return time.Date(2026, 11, 22, 9, 30, 0, 0, time.UTC) }

// Clock is a settable clock, safe for concurrent use. Its Now method is what
// a store.DB (or anything else taking a func() time.Time) should call.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock stopped at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock by d (backwards when d < 0).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// Open returns a new database whose clock stays at Epoch. See OpenWithClock.
func Open(tb testing.TB) *store.DB {
	tb.Helper()
	return OpenWithClock(tb, NewClock(Epoch()))
}

// OpenWithClock returns a new database in tb.TempDir() whose Now is c.Now.
// When the test ends its consistency is checked (tb.Error on failure) and it
// is closed, so the test must not close it itself.
func OpenWithClock(tb testing.TB, c *Clock) *store.DB {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "dmarcd.db")
	db, err := store.Open(path, nil)
	if err != nil {
		tb.Fatalf("storetest: %v", err)
	}
	db.Now = c.Now
	tb.Cleanup(func() {
		if err := db.Check(); err != nil {
			tb.Errorf("storetest: %v", err)
		}
		if err := db.Close(); err != nil {
			tb.Errorf("storetest: %v", err)
		}
	})
	return db
}

// MustOrganization creates an organization or fails the test.
func MustOrganization(tb testing.TB, db *store.DB, name string, plan store.Plan) *store.Organization {
	tb.Helper()
	org, err := db.CreateOrganization(name, plan)
	if err != nil {
		tb.Fatalf("storetest: create organization %q: %v", name, err)
	}
	return org
}

// MustAPIKey creates a key of scope for orgID and returns it with its secret,
// or fails the test.
func MustAPIKey(tb testing.TB, db *store.DB, orgID string, scope store.Scope) (*store.APIKey, string) {
	tb.Helper()
	key, secret, err := db.CreateAPIKey(orgID, "test key", scope)
	if err != nil {
		tb.Fatalf("storetest: create API key: %v", err)
	}
	return key, secret
}

// MustDomain creates domain name for orgID with a fresh reporting address at
// reports.test and a p=none record, or fails the test.
func MustDomain(tb testing.TB, db *store.DB, orgID, name string) *store.Domain {
	tb.Helper()
	addr := store.NewReportingLocal() + "@reports.test"
	d := &store.Domain{
		OrgID: orgID, Name: name, ReportingEmail: addr,
		DMARCRecord: "v=DMARC1; p=none; rua=mailto:" + addr,
	}
	if err := db.CreateDomain(d); err != nil {
		tb.Fatalf("storetest: create domain %q: %v", name, err)
	}
	return d
}
