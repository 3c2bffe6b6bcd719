package store_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
)

// TestIngesterTLS ensures TLS drafts are stored in the ingester's commit,
// next to the other kinds: stored, duplicates (of a stored report and
// within one commit) named by the first one's id, a deleted domain's
// report and one naming another organization's domain left out, and the statistics counting each stored report once.
func TestIngesterTLS(t *testing.T) {
	e := newFailEnv(t)
	received := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	draft := func(dom *store.Domain, id string) *store.TLSDraft {
		t.Helper()
		d, err := store.NewTLSDraft(store.TLSInput{OrgID: dom.OrgID, DomainID: dom.ID, ReceivedAt: received,
			Report: tlsReport("Google Inc.", id, 20, 100, 2, "certificate-expired", "starttls-not-supported")})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	first, again, other := draft(e.a1, "r1"), draft(e.a1, "r1"), draft(e.b1, "r1")
	stranger, err := store.NewTLSDraft(store.TLSInput{OrgID: e.orgA.ID, DomainID: e.b1.ID, ReceivedAt: received,
		Report: tlsReport("Google Inc.", "r9", 20, 1, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.ing.Commit(&store.IngestBatch{TLS: []*store.TLSDraft{first, again, other, stranger}}); err != nil {
		t.Fatal(err)
	}
	if o := first.Outcome(); !o.Stored || o.DuplicateID != "" {
		t.Fatalf("first: %+v", o)
	}
	if o := again.Outcome(); o.Stored || o.DuplicateID != first.Report().ID {
		t.Fatalf("again: %+v, first %s", o, first.Report().ID)
	}
	if o := other.Outcome(); !o.Stored {
		t.Fatalf("other organization's domain: %+v", o)
	}
	if o := stranger.Outcome(); o.Stored || !o.DomainGone {
		t.Fatalf("a report of organization A for B's domain: %+v", o)
	}
	later := draft(e.a1, "r1")
	if _, err := e.ing.Commit(&store.IngestBatch{TLS: []*store.TLSDraft{later}}); err != nil {
		t.Fatal(err)
	}
	if o := later.Outcome(); o.Stored || o.DuplicateID != first.Report().ID {
		t.Fatalf("later: %+v", o)
	}
	got, err := e.db.FindTLSReport(e.orgA.ID, first.Report().ID)
	if err != nil || got.SuccessfulSessions != 105 || len(got.Policies) != 2 || len(got.Policies[0].FailureDetails) != 2 {
		t.Fatalf("stored: %+v, %v", got, err)
	}
	st, err := e.db.TLSStatistics(e.orgA.ID, e.a1.ID, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), received)
	if err != nil || st.ReportCount != 1 || st.FailedSessions != 2 {
		t.Fatalf("statistics: %+v, %v", st, err)
	}

	gone := draft(e.a2, "r2")
	if err := e.db.DeleteDomain(e.orgA.ID, e.a2.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ing.Commit(&store.IngestBatch{TLS: []*store.TLSDraft{gone}}); err != nil {
		t.Fatal(err)
	}
	if o := gone.Outcome(); !o.DomainGone || o.Stored {
		t.Fatalf("deleted domain: %+v", o)
	}
}

// TestNewTLSDraftBad ensures a draft needs a report, a receive time and
// well-formed ids.
func TestNewTLSDraftBad(t *testing.T) {
	e := newFailEnv(t)
	r := tlsReport("G", "x", 20, 1, 0)
	now := time.Now()
	for name, in := range map[string]store.TLSInput{
		"no report":  {OrgID: e.orgA.ID, DomainID: e.a1.ID, ReceivedAt: now},
		"no time":    {OrgID: e.orgA.ID, DomainID: e.a1.ID, Report: r},
		"bad domain": {OrgID: e.orgA.ID, DomainID: "nope", Report: r, ReceivedAt: now},
		"no org":     {DomainID: e.a1.ID, Report: r, ReceivedAt: now},
	} {
		if _, err := store.NewTLSDraft(in); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

// TestDomainsByReportingLocal ensures the local part finds its domain
// whatever the case, and nothing for another local part, a prefix of one,
// or text with an '@'.
func TestDomainsByReportingLocal(t *testing.T) {
	e := newFailEnv(t)
	local, _, _ := strings.Cut(e.a1.ReportingEmail, "@")
	got, err := e.db.DomainsByReportingLocal(strings.ToUpper(local))
	if err != nil || len(got) != 1 || got[0].ID != e.a1.ID {
		t.Fatalf("got %+v, %v", got, err)
	}
	for _, bad := range []string{"", "nobody", local[:len(local)-1], e.a1.ReportingEmail, local + "@"} {
		if got, err := e.db.DomainsByReportingLocal(bad); err != nil || len(got) != 0 {
			t.Errorf("%q: %+v, %v", bad, got, err)
		}
	}
}
