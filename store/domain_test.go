package store_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

func newDomain(orgID, name string) *store.Domain {
	addr := store.NewReportingLocal() + "@reports.test"
	return &store.Domain{OrgID: orgID, Name: name, ReportingEmail: addr, DMARCRecord: "v=DMARC1; p=none; rua=mailto:" + addr}
}

// TestCreateDomain ensures creation stamps id, time and status and enforces org, uniqueness and validity rules.
func TestCreateDomain(t *testing.T) {
	db := storetest.Open(t)
	org := storetest.MustOrganization(t, db, "acme", store.PlanUnlimited)
	other := storetest.MustOrganization(t, db, "other", store.PlanUnlimited)
	first := newDomain(org.ID, "example.com")
	first.LastDNSRecord = "v=DMARC1; p=reject"
	t.Run("OK", func(t *testing.T) {
		wantKind(t, db.CreateDomain(first), nil)
		if !store.ValidID(first.ID) || first.Status != store.DomainPending || !first.CreatedAt.Equal(storetest.Epoch()) {
			t.Errorf("domain = %+v", first)
		}
		got, err := db.FindDomain(org.ID, first.ID)
		wantKind(t, err, nil)
		if *got != *first {
			t.Errorf("stored %+v, want %+v", got, first)
		}
	})
	t.Run("OKSameNameOtherOrganization", func(t *testing.T) {
		wantKind(t, db.CreateDomain(newDomain(other.ID, "example.com")), nil)
	})
	t.Run("ErrConflictName", func(t *testing.T) {
		err := db.CreateDomain(newDomain(org.ID, "example.com"))
		wantKind(t, err, store.ErrConflict)
		if err.Error() != "domain already registered in this organization" {
			t.Errorf("message = %q", err)
		}
	})
	t.Run("ErrConflictReportingEmail", func(t *testing.T) {
		d := newDomain(other.ID, "example.org")
		d.ReportingEmail = strings.ToUpper(first.ReportingEmail)
		wantKind(t, db.CreateDomain(d), store.ErrConflict)
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		wantKind(t, db.CreateDomain(newDomain(store.NewID(), "example.net")), store.ErrNotFound)
		wantKind(t, db.CreateDomain(newDomain("", "example.net")), store.ErrNotFound)
	})
	t.Run("FailureLeavesArgument", func(t *testing.T) {
		d := newDomain(org.ID, "example.com")
		_ = db.CreateDomain(d)
		if d.ID != "" || d.Status != "" {
			t.Errorf("failed create changed its argument: %+v", d)
		}
	})
	for _, tc := range []struct {
		name string
		edit func(d *store.Domain)
	}{
		{"ErrInvalidEmptyName", func(d *store.Domain) { d.Name = "" }},
		{"ErrInvalidUpperName", func(d *store.Domain) { d.Name = "Example.com" }},
		{"ErrInvalidTrailingDot", func(d *store.Domain) { d.Name = "example.com." }},
		{"ErrInvalidSpace", func(d *store.Domain) { d.Name = "exa mple.com" }},
		{"ErrInvalidLongName", func(d *store.Domain) { d.Name = strings.Repeat("a", 250) + ".com" }},
		{"ErrInvalidEmailNoAt", func(d *store.Domain) { d.ReportingEmail = "reports.test" }},
		{"ErrInvalidEmailEmptyLocal", func(d *store.Domain) { d.ReportingEmail = "@reports.test" }},
		{"ErrInvalidEmailTwoAts", func(d *store.Domain) { d.ReportingEmail = "a@b@reports.test" }},
		{"ErrInvalidEmailEmpty", func(d *store.Domain) { d.ReportingEmail = "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDomain(org.ID, "valid.example")
			tc.edit(d)
			wantKind(t, db.CreateDomain(d), store.ErrInvalid)
		})
	}
	t.Run("ErrInvalidNil", func(t *testing.T) {
		wantKind(t, db.CreateDomain(nil), store.ErrInvalid)
	})
}

// TestDomainPlanLimits ensures each plan's domain count is enforced per organization.
func TestDomainPlanLimits(t *testing.T) {
	for _, tc := range []struct {
		plan store.Plan
		max  int
	}{
		{store.PlanStarter, 3},
		{store.PlanBusiness, 50},
	} {
		t.Run(string(tc.plan), func(t *testing.T) {
			db := storetest.Open(t)
			org := storetest.MustOrganization(t, db, "acme", tc.plan)
			other := storetest.MustOrganization(t, db, "other", tc.plan)
			storetest.MustDomain(t, db, other.ID, "other.example")
			for i := range tc.max {
				storetest.MustDomain(t, db, org.ID, fmt.Sprintf("d%d.example", i))
			}
			err := db.CreateDomain(newDomain(org.ID, "one-more.example"))
			wantKind(t, err, store.ErrLimit)
			if want := fmt.Sprintf("plan limit of %d domains reached", tc.max); err.Error() != want {
				t.Errorf("message = %q, want %q", err, want)
			}
			if err := db.DeleteDomain(org.ID, mustFirstDomain(t, db, org.ID).ID); err != nil {
				t.Fatal(err)
			}
			wantKind(t, db.CreateDomain(newDomain(org.ID, "one-more.example")), nil)
		})
	}
	t.Run(string(store.PlanUnlimited), func(t *testing.T) {
		db := storetest.Open(t)
		org := storetest.MustOrganization(t, db, "acme", store.PlanUnlimited)
		for i := range 60 {
			storetest.MustDomain(t, db, org.ID, fmt.Sprintf("d%d.example", i))
		}
	})
	t.Run("Downgrade", func(t *testing.T) {
		db := storetest.Open(t)
		org := storetest.MustOrganization(t, db, "acme", store.PlanBusiness)
		for i := range 4 {
			storetest.MustDomain(t, db, org.ID, fmt.Sprintf("d%d.example", i))
		}
		if _, err := db.SetOrganizationPlan(org.ID, store.PlanStarter); err != nil {
			t.Fatal(err)
		}
		wantKind(t, db.CreateDomain(newDomain(org.ID, "x.example")), store.ErrLimit)
		if _, total, _ := db.ListDomains(org.ID, store.Page{Page: 1, Limit: 10}); total != 4 {
			t.Errorf("total after downgrade = %d, want 4", total)
		}
	})
}

func mustFirstDomain(tb testing.TB, db *store.DB, orgID string) *store.Domain {
	tb.Helper()
	ds, _, err := db.ListDomains(orgID, store.Page{Page: 1, Limit: 1})
	if err != nil || len(ds) != 1 {
		tb.Fatalf("ListDomains = %v, %v", ds, err)
	}
	return ds[0]
}

// TestFindDomain ensures domains are found within their organization only.
func TestFindDomain(t *testing.T) {
	db := storetest.Open(t)
	org := storetest.MustOrganization(t, db, "acme", store.PlanStarter)
	other := storetest.MustOrganization(t, db, "other", store.PlanStarter)
	d := storetest.MustDomain(t, db, org.ID, "example.com")
	t.Run("OK", func(t *testing.T) {
		got, err := db.FindDomain(org.ID, d.ID)
		wantKind(t, err, nil)
		if *got != *d {
			t.Errorf("got %+v, want %+v", got, d)
		}
	})
	for _, tc := range []struct{ name, org, id string }{
		{"ErrNotFoundOtherOrganization", other.ID, d.ID},
		{"ErrNotFoundUnknown", org.ID, store.NewID()},
		{"ErrNotFoundMalformed", org.ID, "../" + d.ID},
		{"ErrNotFoundUppercase", org.ID, strings.ToUpper(d.ID)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := db.FindDomain(tc.org, tc.id)
			wantKind(t, err, store.ErrNotFound)
			if err.Error() != "domain not found" {
				t.Errorf("message = %q", err)
			}
		})
	}
	t.Run("OKByID", func(t *testing.T) {
		got, err := db.FindDomainByID(d.ID)
		wantKind(t, err, nil)
		if got.OrgID != org.ID || got.Name != "example.com" {
			t.Errorf("got %+v", got)
		}
	})
	t.Run("ErrNotFoundByID", func(t *testing.T) {
		_, err := db.FindDomainByID(store.NewID())
		wantKind(t, err, store.ErrNotFound)
	})
	t.Run("OKByReportingEmail", func(t *testing.T) {
		for _, addr := range []string{d.ReportingEmail, strings.ToUpper(d.ReportingEmail)} {
			got, err := db.FindDomainByReportingEmail(addr)
			wantKind(t, err, nil)
			if got.ID != d.ID {
				t.Errorf("FindDomainByReportingEmail(%q) = %+v", addr, got)
			}
		}
	})
	t.Run("ErrNotFoundByReportingEmail", func(t *testing.T) {
		_, err := db.FindDomainByReportingEmail("nobody@reports.test")
		wantKind(t, err, store.ErrNotFound)
	})
}

// TestDomainJSON ensures the API encoding hides OrgID and LastDNSRecord and shows unset times as null.
func TestDomainJSON(t *testing.T) {
	db := storetest.Open(t)
	org := storetest.MustOrganization(t, db, "acme", store.PlanStarter)
	d := newDomain(org.ID, "example.com")
	d.LastDNSRecord = "v=DMARC1; p=secretive"
	if err := db.CreateDomain(d); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	if strings.Contains(s, org.ID) || strings.Contains(s, "secretive") || !strings.Contains(s, `"verified_at":null`) ||
		!strings.Contains(s, `"created_at":"2026-11-22T09:30:00Z"`) {
		t.Errorf("JSON = %s", s)
	}
	got, err := db.FindDomainByID(d.ID)
	wantKind(t, err, nil)
	if got.LastDNSRecord != d.LastDNSRecord || got.OrgID != org.ID {
		t.Errorf("stored form lost OrgID or LastDNSRecord: %+v", got)
	}
}

// TestListDomains ensures pages come newest first with the organization's total, and a page past the end is empty.
func TestListDomains(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch())
	db := storetest.OpenWithClock(t, clock)
	org := storetest.MustOrganization(t, db, "acme", store.PlanUnlimited)
	other := storetest.MustOrganization(t, db, "other", store.PlanUnlimited)
	var newestFirst []string
	for i := range 7 {
		if i%3 == 0 { // several domains share a second: the id breaks the tie
			clock.Advance(time.Minute)
		}
		d := storetest.MustDomain(t, db, org.ID, fmt.Sprintf("d%d.example", i))
		newestFirst = append([]string{d.Name}, newestFirst...)
		storetest.MustDomain(t, db, other.ID, fmt.Sprintf("o%d.example", i))
	}
	for _, tc := range []struct {
		name string
		page store.Page
		want []string
	}{
		{"OKFirstPage", store.Page{Page: 1, Limit: 3}, newestFirst[0:3]},
		{"OKMiddlePage", store.Page{Page: 2, Limit: 3}, newestFirst[3:6]},
		{"OKLastPartialPage", store.Page{Page: 3, Limit: 3}, newestFirst[6:7]},
		{"OKAllInOne", store.Page{Page: 1, Limit: 100}, newestFirst},
		{"OKPastEnd", store.Page{Page: 4, Limit: 3}, nil},
		{"OKFarPastEnd", store.Page{Page: 1 << 62, Limit: 100}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds, total, err := db.ListDomains(org.ID, tc.page)
			wantKind(t, err, nil)
			if total != 7 {
				t.Errorf("total = %d, want 7", total)
			}
			if ds == nil {
				t.Error("domains = nil, want a non-nil slice")
			}
			var got []string
			for _, d := range ds {
				got = append(got, d.Name)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("names = %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("OKEmptyOrganization", func(t *testing.T) {
		empty := storetest.MustOrganization(t, db, "empty", store.PlanStarter)
		ds, total, err := db.ListDomains(empty.ID, store.Page{Page: 1, Limit: 20})
		wantKind(t, err, nil)
		if len(ds) != 0 || total != 0 {
			t.Errorf("got %d domains, total %d", len(ds), total)
		}
	})
	for _, p := range []store.Page{{Page: 0, Limit: 1}, {Page: 1, Limit: 0}, {Page: -1, Limit: 5}} {
		t.Run("ErrInvalid", func(t *testing.T) {
			_, _, err := db.ListDomains(org.ID, p)
			wantKind(t, err, store.ErrInvalid)
		})
	}
	t.Run("ErrNotFound", func(t *testing.T) {
		_, _, err := db.ListDomains(store.NewID(), store.Page{Page: 1, Limit: 1})
		wantKind(t, err, store.ErrNotFound)
	})
	t.Run("AllDomains", func(t *testing.T) {
		all, err := db.AllDomains()
		wantKind(t, err, nil)
		if len(all) != 14 {
			t.Errorf("AllDomains returned %d, want 14", len(all))
		}
	})
}

// TestUpdateDomain ensures mutable fields change, immutable ones are restored, and fn's error aborts.
func TestUpdateDomain(t *testing.T) {
	db := storetest.Open(t)
	org := storetest.MustOrganization(t, db, "acme", store.PlanStarter)
	other := storetest.MustOrganization(t, db, "other", store.PlanStarter)
	d := storetest.MustDomain(t, db, org.ID, "example.com")
	verified := time.Date(2026, 11, 22, 10, 0, 0, 123, time.FixedZone("CET", 3600))
	t.Run("OK", func(t *testing.T) {
		got, err := db.UpdateDomain(org.ID, d.ID, func(x *store.Domain) error {
			x.Status = store.DomainActive
			x.VerifiedAt = &verified
			x.LastReportAt = &verified
			x.DMARCRecord = "v=DMARC1; p=reject"
			x.LastDNSRecord = "v=DMARC1; p=quarantine"
			// Immutable: these must be undone.
			x.ID, x.OrgID, x.Name = store.NewID(), other.ID, "evil.example"
			x.ReportingEmail, x.CreatedAt = "x@evil.example", time.Unix(0, 0)
			return nil
		})
		wantKind(t, err, nil)
		stored, err := db.FindDomain(org.ID, d.ID)
		wantKind(t, err, nil)
		for _, x := range []*store.Domain{got, stored} {
			if x.ID != d.ID || x.OrgID != org.ID || x.Name != d.Name || x.ReportingEmail != d.ReportingEmail ||
				!x.CreatedAt.Equal(d.CreatedAt) {
				t.Errorf("immutable fields changed: %+v", x)
			}
			if x.Status != store.DomainActive || x.DMARCRecord != "v=DMARC1; p=reject" ||
				x.LastDNSRecord != "v=DMARC1; p=quarantine" ||
				x.VerifiedAt == nil || x.VerifiedAt.Format(time.RFC3339Nano) != "2026-11-22T09:00:00Z" ||
				x.LastReportAt == nil || !x.LastReportAt.Equal(*x.VerifiedAt) {
				t.Errorf("mutable fields not stored: %+v", x)
			}
		}
		// The indexes still point at the unchanged name and address.
		if _, err := db.FindDomainByReportingEmail(d.ReportingEmail); err != nil {
			t.Errorf("lookup by reporting email after update: %v", err)
		}
		wantKind(t, db.CreateDomain(newDomain(org.ID, "example.com")), store.ErrConflict)
	})
	t.Run("ErrFromFn", func(t *testing.T) {
		sentinel := errors.New("changed my mind")
		_, err := db.UpdateDomain(org.ID, d.ID, func(x *store.Domain) error {
			x.Status = store.DomainInactive
			return sentinel
		})
		if err != sentinel {
			t.Errorf("err = %v, want fn's error as is", err)
		}
		if got, _ := db.FindDomain(org.ID, d.ID); got.Status != store.DomainActive {
			t.Errorf("status = %q after aborted update", got.Status)
		}
	})
	t.Run("ErrInvalidStatus", func(t *testing.T) {
		_, err := db.UpdateDomain(org.ID, d.ID, func(x *store.Domain) error {
			x.Status = "verified"
			return nil
		})
		wantKind(t, err, store.ErrInvalid)
	})
	t.Run("ErrInvalidNilFn", func(t *testing.T) {
		_, err := db.UpdateDomain(org.ID, d.ID, nil)
		wantKind(t, err, store.ErrInvalid)
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		called := false
		_, err := db.UpdateDomain(other.ID, d.ID, func(*store.Domain) error { called = true; return nil })
		wantKind(t, err, store.ErrNotFound)
		if called {
			t.Error("fn called for another organization's domain")
		}
	})
}

// TestDeleteDomain ensures deletion removes the domain, its index entries
// and everything DeleteDomain's cascade list names (aggregate reports with
// records and roll-ups, failure reports with headers and counts, alerts,
// the source index), and nothing of another domain.
func TestDeleteDomain(t *testing.T) {
	e := newAlertEnv(t)
	db, org := e.db, e.orgA
	d := e.domA
	keep := storetest.MustDomain(t, db, org.ID, "example.org")
	fillDomain(t, e, d)
	fillDomain(t, e, keep)
	if got := domainRows(t, db, d.ID); len(got) < 10 {
		t.Fatalf("the domain left only %d rows before the delete: %v", len(got), got)
	}
	keepRows := domainRows(t, db, keep.ID)
	t.Run("ErrNotFoundOtherOrganization", func(t *testing.T) {
		wantKind(t, db.DeleteDomain(e.orgB.ID, d.ID), store.ErrNotFound)
	})
	t.Run("OK", func(t *testing.T) {
		wantKind(t, db.DeleteDomain(org.ID, d.ID), nil)
		_, err := db.FindDomainByID(d.ID)
		wantKind(t, err, store.ErrNotFound)
		_, err = db.FindDomainByReportingEmail(d.ReportingEmail)
		wantKind(t, err, store.ErrNotFound)
		if left := domainRows(t, db, d.ID); len(left) != 0 {
			t.Errorf("rows of the deleted domain left: %v", left)
		}
		if got := domainRows(t, db, keep.ID); !slices.Equal(got, keepRows) {
			t.Errorf("the other domain's rows changed:\n%v\nwant\n%v", got, keepRows)
		}
		if _, total, _ := db.ListDomains(org.ID, store.Page{Page: 1, Limit: 10}); total != 1 {
			t.Errorf("total = %d, want 1", total)
		}
		// The name and address are free again.
		again := newDomain(org.ID, "alpha.example")
		again.ReportingEmail = d.ReportingEmail
		wantKind(t, db.CreateDomain(again), nil)
	})
	t.Run("ErrNotFoundTwice", func(t *testing.T) {
		wantKind(t, db.DeleteDomain(org.ID, d.ID), store.ErrNotFound)
	})
	t.Run("ErrCascadeAborts", func(t *testing.T) {
		// A damaged alert of the domain fails the alert cascade, after
		// the report cascades ran: nothing of the delete may remain.
		as, _, err := db.ListAlerts(org.ID, store.AlertFilter{DomainID: keep.ID, Page: store.Page{Page: 1, Limit: 1}})
		if err != nil || len(as) == 0 {
			t.Fatalf("no alert of the domain to damage: %v", err)
		}
		key, good := []byte(as[0].ID), []byte(nil)
		setAlertRow := func(v []byte) {
			if err := store.BoltOf(db).Update(func(tx *bolt.Tx) error {
				good = bytes.Clone(tx.Bucket([]byte("alerts")).Get(key))
				return tx.Bucket([]byte("alerts")).Put(key, v)
			}); err != nil {
				t.Fatal(err)
			}
		}
		setAlertRow([]byte("{damaged"))
		damaged := domainRows(t, db, keep.ID)
		if err := db.DeleteDomain(org.ID, keep.ID); err == nil || !strings.Contains(err.Error(), "decode alert") {
			t.Fatalf("err = %v, want the alert cascade's error", err)
		}
		if _, err := db.FindDomain(org.ID, keep.ID); err != nil {
			t.Errorf("domain gone after a failed cascade: %v", err)
		}
		if got := domainRows(t, db, keep.ID); !slices.Equal(got, damaged) {
			t.Errorf("a failed delete changed rows:\n%v\nwant\n%v", got, damaged)
		}
		setAlertRow(good)
		wantKind(t, db.DeleteDomain(org.ID, keep.ID), nil)
		if left := domainRows(t, db, keep.ID); len(left) != 0 {
			t.Errorf("rows left after the repaired delete: %v", left)
		}
	})
}

// fillDomain gives dom some of everything kept per domain: two aggregate
// reports (the second failing, so alerts and new sources), and a failure
// report with headers (an alert too).
func fillDomain(t *testing.T, e *alertEnv, dom *store.Domain) {
	t.Helper()
	e.ingest(t, dom, e.yesterday().AddDate(0, 0, -1), src{"192.0.2.1", 90, 0})
	e.ingest(t, dom, e.yesterday(), src{"192.0.2.1", 10, 0}, src{"198.51.100.7", 0, 40})
	f, err := store.NewFailureDraft(&store.FailureReportDetail{
		FailureReport: &store.FailureReport{DomainID: dom.ID, Domain: dom.Name, OrgID: dom.OrgID,
			ReceivedAt: e.clock.Now(), ArrivalDate: e.clock.Now().Add(-time.Hour), SourceIP: new("198.51.100.7"),
			AuthFailure: []string{"dmarc"}, MessageID: new(store.NewID() + "@example.net")},
		Headers: []store.FailureHeader{{Name: "From", Value: "x@" + dom.Name}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.ing.Commit(&store.IngestBatch{Failures: []*store.FailureDraft{f}}); err != nil || !f.Outcome().Stored {
		t.Fatalf("storing a failure report: %v %+v", err, f.Outcome())
	}
}

// domainRows lists, as "bucket key", every row of the file whose key or
// value holds the domain id (as text or as its 16 bytes) or the id of one
// of its reports, failure reports or alerts, except the domain itself and
// the alert dedup entries, which expire by day on their own.
func domainRows(t *testing.T, db *store.DB, domainID string) []string {
	t.Helper()
	ids := [][]byte{[]byte(domainID), uuidBytes(t, domainID)}
	var rows []string
	err := store.BoltOf(db).View(func(tx *bolt.Tx) error {
		// First the ids of what the domain owns, from the rows naming it.
		owned := map[string]bool{}
		for _, b := range []string{"reports_by_domain", "failure_reports_by_domain", "alerts_by_domain"} {
			c := tx.Bucket([]byte(b)).Cursor()
			for k, v := c.Seek([]byte(domainID)); k != nil && bytes.HasPrefix(k, []byte(domainID)); k, v = c.Next() {
				for _, id := range uuidRE.FindAll(append(bytes.Clone(k[len(domainID):]), v...), -1) {
					owned[string(id)] = true
				}
			}
		}
		for id := range owned {
			ids = append(ids, []byte(id), uuidBytes(t, id))
		}
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			if string(name) == "alert_dedup" {
				return nil
			}
			return b.ForEach(func(k, v []byte) error {
				if string(name) == "domains" && string(k) == domainID {
					return nil
				}
				for _, id := range ids {
					if bytes.Contains(k, id) || bytes.Contains(v, id) {
						rows = append(rows, fmt.Sprintf("%s %x", name, k))
						break
					}
				}
				return nil
			})
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(rows)
	return rows
}

var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// uuidBytes is the 16-byte form of a text id.
func uuidBytes(t *testing.T, id string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(id, "-", ""))
	if err != nil || len(b) != 16 {
		t.Fatalf("id %q is not a UUID", id)
	}
	return b
}

// BenchmarkListDomains measures one page of an organization with 50 domains.
func BenchmarkListDomains(b *testing.B) {
	db := storetest.Open(b)
	org := storetest.MustOrganization(b, db, "acme", store.PlanBusiness)
	for i := range 50 {
		storetest.MustDomain(b, db, org.ID, fmt.Sprintf("d%d.example", i))
	}
	b.ReportAllocs()
	for b.Loop() {
		ds, total, err := db.ListDomains(org.ID, store.Page{Page: 1, Limit: 20})
		if err != nil || len(ds) != 20 || total != 50 {
			b.Fatalf("ListDomains = %d domains, total %d, %v", len(ds), total, err)
		}
	}
}
