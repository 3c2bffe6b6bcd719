// Package storetest opens real store databases for tests: a file in the
// test's temporary directory, a clock the test controls, and a consistency
// check when the test ends.
package storetest

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/dmarc/tlsrpt"
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
	return OpenWithOptions(tb, c, nil)
}

// OpenWithOptions is OpenWithClock opening the file with opts (NoSync, for
// a benchmark that fills it with thousands of commits).
func OpenWithOptions(tb testing.TB, c *Clock, opts *store.Options) *store.DB {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "dmarcd.db")
	db, err := store.Open(path, opts)
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

// MustTLSReport stores rep for domain d, received at received, through
// the ingest commit as package ingest does, and returns the id of the
// report stored, or of the one already stored under its identity (dup
// set). Anything else fails the test.
func MustTLSReport(tb testing.TB, db *store.DB, d *store.Domain, rep *tlsrpt.Report, received time.Time) (id string, dup bool) {
	tb.Helper()
	draft, err := store.NewTLSDraft(store.TLSInput{OrgID: d.OrgID, DomainID: d.ID, Report: rep, ReceivedAt: received})
	if err != nil {
		tb.Fatalf("storetest: TLS report: %v", err)
	}
	if _, err := db.NewIngester().Commit(&store.IngestBatch{TLS: []*store.TLSDraft{draft}}); err != nil {
		tb.Fatalf("storetest: commit TLS report: %v", err)
	}
	switch o := draft.Outcome(); {
	case o.Stored:
		return draft.Report().ID, false
	case o.DuplicateID != "":
		return o.DuplicateID, true
	}
	tb.Fatalf("storetest: TLS report of domain %s not stored: %+v", d.ID, draft.Outcome())
	return "", false
}

// Alert returns alert id of organization orgID as ListAlerts shows it, or
// nil when the organization has no such alert.
func Alert(tb testing.TB, db *store.DB, orgID, id string) *store.Alert {
	tb.Helper()
	alerts, _, err := db.ListAlerts(orgID, store.AlertFilter{Page: store.Page{Page: 1, Limit: math.MaxInt32}})
	if err != nil {
		tb.Fatalf("storetest: list alerts: %v", err)
	}
	for _, a := range alerts {
		if a.ID == id {
			return a
		}
	}
	return nil
}

// APIKey returns key id of organization orgID as ListAPIKeys shows it,
// revoked or not, or nil when the organization has no such key.
func APIKey(tb testing.TB, db *store.DB, orgID, id string) *store.APIKey {
	tb.Helper()
	keys, err := db.ListAPIKeys(orgID)
	if err != nil {
		tb.Fatalf("storetest: list API keys: %v", err)
	}
	for _, k := range keys {
		if k.ID == id {
			return k
		}
	}
	return nil
}

// QuarantineBytes returns the bytes the quarantine keeps, summed over its
// entries as FindQuarantine returns them.
func QuarantineBytes(tb testing.TB, db *store.DB) int64 {
	tb.Helper()
	entries, _, err := db.ListQuarantine(store.Page{Page: 1, Limit: math.MaxInt32})
	if err != nil {
		tb.Fatalf("storetest: list quarantine: %v", err)
	}
	var n int64
	for _, e := range entries {
		_, raw, err := db.FindQuarantine(e.ID)
		if err != nil {
			tb.Fatalf("storetest: quarantine entry %s: %v", e.ID, err)
		}
		n += int64(len(raw))
	}
	return n
}

// Keys returns the keys of bucket (a name of store/schema.go), read from
// a consistent copy of the file made by Backup, so that tests of other
// packages can check what a cascade or a crash left without a handle on
// the store's bbolt file.
func Keys(tb testing.TB, db *store.DB, bucket string) [][]byte {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "copy.db")
	f, err := os.Create(path)
	if err != nil {
		tb.Fatalf("storetest: %v", err)
	}
	_, err = db.Backup(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		tb.Fatalf("storetest: copy the database: %v", err)
	}
	copied, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		tb.Fatalf("storetest: open the copy: %v", err)
	}
	defer func() { _ = copied.Close() }()
	var keys [][]byte
	err = copied.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucket))
		if b == nil {
			return fmt.Errorf("no bucket %s", bucket)
		}
		return b.ForEach(func(k, _ []byte) error {
			keys = append(keys, bytes.Clone(k))
			return nil
		})
	})
	if err != nil {
		tb.Fatalf("storetest: %v", err)
	}
	return keys
}

// MustAccount creates the account of email or fails the test.
func MustAccount(tb testing.TB, db *store.DB, email string) *store.Account {
	tb.Helper()
	acc, err := db.CreateAccount(email)
	if err != nil {
		tb.Fatalf("storetest: create account %q: %v", email, err)
	}
	return acc
}

// MustMember creates the account of email (when it has none) and makes it
// an accepted member of orgID with role ("owner", "admin" or "viewer"),
// as single sign-on with its verified email would (every membership of
// the account is accepted), or fails the test.
func MustMember(tb testing.TB, db *store.DB, orgID, email, role string) (*store.Account, *store.Membership) {
	tb.Helper()
	acc, err := db.FindAccountByEmail(email)
	if err != nil {
		acc = MustAccount(tb, db, email)
	}
	m, err := db.AddMembership(orgID, acc.ID, role)
	if err != nil {
		tb.Fatalf("storetest: add member %q: %v", email, err)
	}
	if _, err := db.UseAccountInvitations(acc.ID, time.Now()); err != nil {
		tb.Fatalf("storetest: accept member %q: %v", email, err)
	}
	m, err = db.FindMembership(orgID, acc.ID)
	if err != nil {
		tb.Fatal(err)
	}
	return acc, m
}
