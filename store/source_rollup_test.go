package store_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// sumSources merges what EachSourceDay reports, by IP, and the days seen.
func sumSources(t *testing.T, db *store.DB, orgID, domainID string, from, to time.Time) (map[string]*store.SourceRollup, map[time.Time]bool) {
	t.Helper()
	out := map[string]*store.SourceRollup{}
	days := map[time.Time]bool{}
	err := db.EachSourceDay(orgID, domainID, from, to, func(day time.Time, s *store.SourceRollup) {
		days[day] = true
		if g := out[s.SourceIP]; g != nil {
			g.Merge(s)
		} else {
			out[s.SourceIP] = s
		}
	})
	if err != nil {
		t.Fatalf("EachSourceDay: %v", err)
	}
	return out, days
}

// TestSourceRollupCounts ensures the per-source roll-up counts each record
// of a stored report under its source: DMARC, aligned SPF and DKIM,
// dispositions, auth domains, first and last seen, and only inside the
// window of days asked for.
func TestSourceRollupCounts(t *testing.T) {
	e := newReportEnv(t)
	d, err := e.db.NewReportDraft(store.Report{DomainID: e.dom.ID, Domain: e.dom.Name, OrgID: e.dom.OrgID,
		OrgName: "google.com", ExternalReportID: "a", DateBegin: reportDay(3), DateEnd: reportDay(4).Add(-time.Second),
		ReceivedAt: storetest.Epoch()})
	if err != nil {
		t.Fatal(err)
	}
	cc, asn := "US", uint32(64500)
	d.Add(&store.Record{SourceIP: "192.0.2.1", Count: 10, Disposition: "none", DKIM: "pass", SPF: "fail",
		Geo:         &store.Geo{CountryCode: &cc, ASN: &asn},
		AuthResults: store.AuthResults{SPF: []store.SPFAuth{{Domain: "mcsv.net", Result: "pass"}}, DKIM: []store.DKIMAuth{{Domain: "example.com", Result: "pass"}}}})
	d.Add(&store.Record{SourceIP: "192.0.2.1", Count: 5, Disposition: "quarantine", DKIM: "fail", SPF: "fail",
		AuthResults: store.AuthResults{SPF: []store.SPFAuth{{Domain: "MCSV.net", Result: "pass"}},
			DKIM: []store.DKIMAuth{{Domain: "example.com", Result: "fail"}, {Domain: "example.com", Result: "fail"}}}})
	d.Add(&store.Record{SourceIP: "198.51.100.7", Count: 3, Disposition: "reject", DKIM: "fail", SPF: "pass"})
	e.commit(t, &store.IngestBatch{Reports: []*store.ReportDraft{d, mustDraft(t, e.db, e.dom, "b", reportDay(10), 4)}})

	got, days := sumSources(t, e.db, e.org.ID, e.dom.ID, reportDay(1), reportDay(5))
	if len(days) != 1 || !days[reportDay(3)] {
		t.Errorf("days %v, want only the 3rd", days)
	}
	if len(got) != 2 {
		t.Fatalf("%d sources, want 2: %v", len(got), got)
	}
	a := got["192.0.2.1"]
	if a.Messages != 15 || a.DMARCPass != 10 || a.DKIMAligned != 10 || a.SPFAligned != 0 ||
		a.Disposition != (store.DispositionCount{None: 10, Quarantine: 5}) {
		t.Errorf("192.0.2.1 = %+v", a)
	}
	if !a.FirstSeen.Equal(reportDay(3)) || !a.LastSeen.Equal(reportDay(4).Add(-time.Second)) {
		t.Errorf("seen %v..%v", a.FirstSeen, a.LastSeen)
	}
	if a.CountryCode == nil || *a.CountryCode != "US" || a.ASN == nil || *a.ASN != 64500 {
		t.Errorf("geo %v %v", a.CountryCode, a.ASN)
	}
	// Domains in lower case, a domain signing twice counted once, the
	// failing signature in Messages but not in Pass.
	want := map[string][2]int64{"spf mcsv.net": {15, 15}, "dkim example.com": {15, 10}}
	if len(a.Evidence) != len(want) {
		t.Errorf("evidence %+v", a.Evidence)
	}
	for _, x := range a.Evidence {
		if want[x.Kind+" "+x.Domain] != [2]int64{x.Messages, x.Pass} {
			t.Errorf("evidence %+v, want %v", x, want)
		}
	}
	b := got["198.51.100.7"]
	if b.Messages != 3 || b.SPFAligned != 3 || b.DMARCPass != 3 || b.Disposition.Reject != 3 {
		t.Errorf("198.51.100.7 = %+v", b)
	}
}

// TestSourceRollupSegments ensures many commits to one day keep every
// count while the day's segments are merged, and that the day stays
// bounded (the merge happens).
func TestSourceRollupSegments(t *testing.T) {
	e := newReportEnv(t)
	const commits = 100
	for i := range commits {
		e.commit(t, &store.IngestBatch{Reports: []*store.ReportDraft{mustDraft(t, e.db, e.dom, fmt.Sprint("r", i), reportDay(5), 10)}})
	}
	got, _ := sumSources(t, e.db, e.org.ID, e.dom.ID, reportDay(5), reportDay(5))
	var msgs int64
	for _, s := range got {
		msgs += s.Messages
	}
	// mustDraft's 10 records carry counts 1..5, 1..5: 30 messages.
	if msgs != commits*30 || len(got) != 10 {
		t.Errorf("%d messages from %d sources, want %d from 10", msgs, len(got), commits*30)
	}
	calls := 0
	_ = e.db.EachSourceDay(e.org.ID, e.dom.ID, reportDay(5), reportDay(5), func(time.Time, *store.SourceRollup) { calls++ })
	if calls > 10*32 {
		t.Errorf("%d source entries for one day: segments are not merged", calls)
	}
}

// TestSourceRollupTenant ensures another organization's domain is not
// found and bad ranges are refused.
func TestSourceRollupTenant(t *testing.T) {
	e := newReportEnv(t)
	other := storetest.MustOrganization(t, e.db, "other", store.PlanUnlimited)
	err := e.db.EachSourceDay(other.ID, e.dom.ID, reportDay(1), reportDay(2), func(time.Time, *store.SourceRollup) {})
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("other org: %v, want ErrNotFound", err)
	}
	err = e.db.EachSourceDay(e.org.ID, e.dom.ID, reportDay(2), reportDay(1), func(time.Time, *store.SourceRollup) {})
	if !errors.Is(err, store.ErrInvalid) {
		t.Errorf("reversed range: %v, want ErrInvalid", err)
	}
}

// TestPendingSources ensures committed days queue their IPs for reverse
// DNS, that handled days leave the queue, and that a day touched again in
// between stays.
func TestPendingSources(t *testing.T) {
	e := newReportEnv(t)
	e.commit(t, &store.IngestBatch{Reports: []*store.ReportDraft{mustDraft(t, e.db, e.dom, "a", reportDay(5), 3)}})
	p, err := e.db.PendingSourceIPs(100)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(p.IPs) != "[192.0.2.0 192.0.2.1 192.0.2.2]" {
		t.Errorf("pending %v", p.IPs)
	}
	e.commit(t, &store.IngestBatch{Reports: []*store.ReportDraft{mustDraft(t, e.db, e.dom, "b", reportDay(5), 5)}})
	if err := e.db.DonePendingSources(p); err != nil {
		t.Fatal(err)
	}
	p, _ = e.db.PendingSourceIPs(100)
	if len(p.IPs) != 5 {
		t.Errorf("after a new commit to the day: pending %v, want its 5 IPs", p.IPs)
	}
	_ = e.db.DonePendingSources(p)
	if p, _ = e.db.PendingSourceIPs(100); len(p.IPs) != 0 {
		t.Errorf("after done: pending %v", p.IPs)
	}
}

// TestRDNSCache ensures entries round-trip and malformed ones are refused.
func TestRDNSCache(t *testing.T) {
	db := storetest.Open(t)
	at := storetest.Epoch()
	in := []store.RDNSEntry{
		{IP: "192.0.2.1", Status: store.RDNSConfirmed, Hostname: "mail.example.com", CheckedAt: at},
		{IP: "2001:db8::1", Status: store.RDNSTemporary, CheckedAt: at, Failures: 3},
	}
	if err := db.PutRDNS(in); err != nil {
		t.Fatal(err)
	}
	got, err := db.GetRDNS([]string{"192.0.2.1", "2001:db8::1", "192.0.2.9"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["192.0.2.1"].Hostname != "mail.example.com" || !got["192.0.2.1"].CheckedAt.Equal(at) ||
		got["2001:db8::1"].Failures != 3 || got["2001:db8::1"].Status != store.RDNSTemporary {
		t.Errorf("got %+v", got)
	}
	if err := db.PutRDNS([]store.RDNSEntry{{IP: "192.0.2.1"}}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("no status: %v", err)
	}
}

// TestSourceRollupCapsDistinctSources ensures a report with more distinct
// sources than a draft keeps (16,384) folds the smallest into the row of
// other sources: the big ones stay by IP, no source is queued twice for
// reverse DNS, the other row is not, and the totals stay exact.
func TestSourceRollupCapsDistinctSources(t *testing.T) {
	e := newReportEnv(t)
	d, err := e.db.NewReportDraft(store.Report{DomainID: e.dom.ID, Domain: e.dom.Name, OrgID: e.dom.OrgID,
		OrgName: "google.com", ExternalReportID: "big", DateBegin: reportDay(3), DateEnd: reportDay(4).Add(-time.Second),
		ReceivedAt: storetest.Epoch()})
	if err != nil {
		t.Fatal(err)
	}
	const n = 40_000
	var total, pass int64
	cc := "US"
	for i := range n {
		r := &store.Record{SourceIP: fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255), Count: 1, Disposition: "none",
			DKIM: "pass", SPF: "fail", Geo: &store.Geo{CountryCode: &cc}}
		if i%100 == 0 {
			r.Count = 1000 // the big ones
		}
		if i%3 == 0 {
			r.DKIM = "fail"
		}
		total += r.Count
		pass += ifPass(r.DKIM == "pass", r.Count)
		d.Add(r)
	}
	e.commit(t, &store.IngestBatch{Reports: []*store.ReportDraft{d}})
	got, _ := sumSources(t, e.db, e.org.ID, e.dom.ID, reportDay(3), reportDay(3))
	var sumN, sumPass int64
	for _, s := range got {
		sumN += s.Messages
		sumPass += s.DMARCPass
	}
	if sumN != total || sumPass != pass {
		t.Errorf("totals %d/%d, want %d/%d", sumPass, sumN, pass, total)
	}
	other := got[store.OtherSources]
	if other == nil || other.CountryCode != nil || len(got) > 16<<10+1 || len(got) < 8<<10 {
		t.Fatalf("%d sources kept, other row %+v", len(got), other)
	}
	for i := 0; i < n; i += 100 {
		if s := got[fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)]; s == nil || s.Messages != 1000 {
			t.Fatalf("big source %d: %+v", i, s)
		}
	}
	p, err := e.db.PendingSourceIPs(10)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.IPs) != len(got)-1 || p.IPs[0] == store.OtherSources {
		t.Errorf("%d pending IPs for %d sources, first %q", len(p.IPs), len(got), p.IPs[0])
	}
}

func ifPass(ok bool, n int64) int64 {
	if ok {
		return n
	}
	return 0
}

// TestSourceRollupSameDayReports ensures a commit of several reports of
// one day counts each once.
func TestSourceRollupSameDayReports(t *testing.T) {
	a := newReportEnv(t)
	drafts := []*store.ReportDraft{mustDraft(t, a.db, a.dom, "x", reportDay(5), 30), mustDraft(t, a.db, a.dom, "y", reportDay(5), 20),
		mustDraft(t, a.db, a.dom, "z", reportDay(5), 10)}
	a.commit(t, &store.IngestBatch{Reports: drafts})
	got, _ := sumSources(t, a.db, a.org.ID, a.dom.ID, reportDay(5), reportDay(5))
	var msgs int64
	for _, s := range got {
		msgs += s.Messages
	}
	// testRecord counts 1..5 in turn: 30 records carry 90 messages.
	if msgs != 90+60+30 || len(got) != 30 {
		t.Errorf("%d messages from %d sources, want 180 from 30", msgs, len(got))
	}
}
