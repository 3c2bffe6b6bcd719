package store_test

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// dayDraft returns a finished draft of dom over day d of reportDay with n records.
func dayDraft(t *testing.T, db *store.DB, dom *store.Domain, ext string, d, n int) *store.ReportDraft {
	t.Helper()
	return draftOf(t, db, dom, ext, reportDay(d), reportDay(d).Add(24*time.Hour-time.Second), n)
}

// mustDayTotals fails t unless the day totals are the heads of the
// roll-ups, and returns how many there are.
func mustDayTotals(t *testing.T, db *store.DB, when string) int {
	t.Helper()
	n, err := db.CheckDayTotals()
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	return n
}

// TestDayTotalsFollowRollups ensures the overview's compact day totals
// equal the roll-ups' totals after ingest (a day added to twice included),
// after a domain's deletion and after retention.
func TestDayTotalsFollowRollups(t *testing.T) {
	e := newReportEnv(t)
	second := storetest.MustDomain(t, e.db, e.org.ID, "second.example")
	commitAll(t, e.ing, dayDraft(t, e.db, e.dom, "a", 2, 40), dayDraft(t, e.db, e.dom, "b", 3, 7),
		dayDraft(t, e.db, second, "c", 3, 3))
	commitAll(t, e.ing, dayDraft(t, e.db, e.dom, "a2", 2, 5), dayDraft(t, e.db, second, "d", 12, 9))
	if n := mustDayTotals(t, e.db, "after ingest"); n != 4 {
		t.Fatalf("%d day totals after ingest, want 4", n)
	}
	days, err := e.db.DomainDays(e.org.ID, reportDay(1), reportDay(12))
	if err != nil {
		t.Fatal(err)
	}
	if got := days[e.dom.ID][1]; got.Reports != 2 || got.Messages == 0 {
		t.Errorf("day 2 of %s: %+v, want two reports", e.dom.Name, got)
	}
	if _, err := e.db.DeleteReportsBefore(reportDay(10)); err != nil {
		t.Fatal(err)
	}
	if n := mustDayTotals(t, e.db, "after retention"); n != 1 {
		t.Fatalf("%d day totals after retention, want 1", n)
	}
	if err := e.db.DeleteDomain(e.org.ID, second.ID); err != nil {
		t.Fatal(err)
	}
	if n := mustDayTotals(t, e.db, "after domain deletion"); n != 0 {
		t.Fatalf("%d day totals after the domain's deletion, want 0", n)
	}
}

// TestDayTotalsMigration ensures a file of schema version 3 (no day
// totals) gets them built on Open, so that the overview shows what it
// showed before, and that a corrupt roll-up fails the migration with a
// clear error and leaves the file as it was.
func TestDayTotalsMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dmarcd.db")
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	org := storetest.MustOrganization(t, db, "acme", store.PlanUnlimited)
	dom := storetest.MustDomain(t, db, org.ID, "example.com")
	commitAll(t, db.NewIngester(), dayDraft(t, db, dom, "a", 2, 40), dayDraft(t, db, dom, "b", 3, 7))
	from, to := reportDay(1), reportDay(5)
	want, err := db.DomainDays(org.ID, from, to)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	downgrade := func(corrupt bool) {
		t.Helper()
		raw, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = raw.Update(func(tx *bolt.Tx) error {
			if tx.Bucket([]byte("report_day_totals")) != nil {
				if err := tx.DeleteBucket([]byte("report_day_totals")); err != nil {
					return err
				}
			}
			if corrupt {
				k, _ := tx.Bucket([]byte("report_rollups")).Cursor().First()
				if err := tx.Bucket([]byte("report_rollups")).Put(k, []byte{0xff}); err != nil {
					return err
				}
			}
			return store.PutSchemaVersion(tx, 3)
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := raw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	downgrade(false)
	db, err = store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := store.SchemaVersionOf(db); err != nil || v != store.SchemaVersion {
		t.Fatalf("schema version %d, %v", v, err)
	}
	if n := mustDayTotals(t, db, "after migration"); n != 2 {
		t.Fatalf("%d day totals after migration, want 2", n)
	}
	got, err := db.DomainDays(org.ID, from, to)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("after migration: %+v, %v\nwant %+v", got, err, want)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	downgrade(true)
	if db, err := store.Open(path, nil); err == nil {
		_ = db.Close()
		t.Fatal("a corrupt roll-up migrated")
	} else if !strings.Contains(err.Error(), "migrate schema 3 to 4") {
		t.Errorf("error %q does not name the migration", err)
	}
	raw, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_ = raw.View(func(tx *bolt.Tx) error {
		if tx.Bucket([]byte("report_day_totals")) != nil {
			t.Error("the failed migration left day totals behind")
		}
		return nil
	})
}
