package worker

import (
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/dmarc/tlsrpt"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// storeTLSReport stores a one-policy TLS report of d over the UTC day begin.
func storeTLSReport(t *testing.T, db *store.DB, d *store.Domain, id string, begin time.Time) {
	t.Helper()
	rep := &tlsrpt.Report{OrganizationName: "Google Inc.", ReportID: id, DateBegin: begin,
		DateEnd:  begin.Add(24*time.Hour - time.Second),
		Policies: []tlsrpt.Policy{{Type: tlsrpt.PolicySTS, Domain: d.Name, SuccessfulSessions: 10}}}
	storetest.MustTLSReport(t, db, d, rep, begin.Add(25*time.Hour))
}

// storeReport stores a report of d over the UTC day begin whose one source
// fails fail of 100 messages.
func storeReport(t *testing.T, db *store.DB, d *store.Domain, ext string, begin time.Time, fail int64) {
	t.Helper()
	draft, err := db.NewReportDraft(store.Report{DomainID: d.ID, Domain: d.Name, OrgID: d.OrgID,
		OrgName: "google.com", OrgEmail: "noreply@google.com", ExternalReportID: ext,
		DateBegin: begin, DateEnd: begin.Add(24*time.Hour - time.Second), ReceivedAt: begin.Add(25 * time.Hour),
		PolicyPublished: store.PolicyPublished{Domain: d.Name, P: "none", PCT: 100}})
	if err != nil {
		t.Fatal(err)
	}
	draft.Add(&store.Record{SourceIP: "192.0.2.1", Count: 100 - fail, DKIM: "pass", SPF: "pass", HeaderFrom: d.Name})
	draft.Add(&store.Record{SourceIP: "192.0.2.1", Count: fail, DKIM: "fail", SPF: "fail", HeaderFrom: d.Name})
	draft.Finish()
	outs, err := db.NewIngester().Commit(&store.IngestBatch{Reports: []*store.ReportDraft{draft}})
	if err != nil || !outs[0].Stored {
		t.Fatalf("storing a report: %v %+v", err, outs)
	}
}

// TestRetentionDeletesWhatIsOld ensures a run deletes the reports and
// alerts older than the retention and keeps the rest, and that a zero
// retention keeps everything.
func TestRetentionDeletesWhatIsOld(t *testing.T) {
	e := newDNSEnv(t)
	d := e.domain(t, "kept.example", store.DomainActive)
	now := e.clock.Now()
	day := now.UTC().Truncate(24 * time.Hour)
	storeReport(t, e.db, d, "old", day.AddDate(0, 0, -500), 0)
	storeReport(t, e.db, d, "new", day.AddDate(0, 0, -1), 90) // raises an alert
	storeTLSReport(t, e.db, d, "old-tls", day.AddDate(0, 0, -500))
	storeTLSReport(t, e.db, d, "new-tls", day.AddDate(0, 0, -1))
	listTLS := func() int {
		l, err := e.db.ListTLSReports(e.org.ID, store.TLSFilter{Page: store.Page{Page: 1, Limit: 10}})
		if err != nil {
			t.Fatal(err)
		}
		return l.Total
	}
	list := func() int {
		_, n, err := e.db.ListReports(e.org.ID, store.ReportFilter{Page: store.Page{Page: 1, Limit: 10}})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	keep := &Retention{Store: e.db}
	if err := keep.Run(t.Context(), now); err != nil {
		t.Fatal(err)
	}
	if n, tls := list(), listTLS(); n != 2 || tls != 2 {
		t.Fatalf("zero retention left %d reports and %d TLS reports, want 2 and 2", n, tls)
	}

	r := &Retention{Store: e.db, Retention: DefaultRetention, FailureRetention: 90 * 24 * time.Hour}
	if err := r.Run(t.Context(), now); err != nil {
		t.Fatal(err)
	}
	if n := list(); n != 1 {
		t.Fatalf("retention left %d reports, want 1", n)
	}
	if n := listTLS(); n != 1 {
		t.Fatalf("retention left %d TLS reports, want 1", n)
	}
	if as := e.alerts(t); len(as) != 1 {
		t.Fatalf("a recent alert went: %d left", len(as))
	}
	// 401 days on, the alert and the other report are old too.
	if err := r.Run(t.Context(), now.AddDate(0, 0, 401)); err != nil {
		t.Fatal(err)
	}
	if n, as := list(), e.alerts(t); n != 0 || len(as) != 0 {
		t.Fatalf("401 days on: %d reports and %d alerts left", n, len(as))
	}
	if job := r.Job(); !job.AtStart || job.Every != DefaultRetentionEvery || job.Name != "retention" {
		t.Errorf("job %+v", job)
	}
}
