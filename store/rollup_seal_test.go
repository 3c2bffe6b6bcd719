package store_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/internal/reports"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// rollupDraft is a report of n records from sources off..off+n-1 (many
// networks, some without geolocation, DKIM and SPF evidence) on day.
func rollupDraft(t testing.TB, e *reportEnv, extID string, day time.Time, off, n int) *store.ReportDraft {
	t.Helper()
	d, err := e.db.NewReportDraft(store.Report{DomainID: e.dom.ID, Domain: e.dom.Name, OrgID: e.dom.OrgID,
		OrgName: "google.com", OrgEmail: "noreply@google.com", ExternalReportID: extID,
		DateBegin: day, DateEnd: day.Add(24*time.Hour - time.Second), ReceivedAt: storetest.Epoch(),
		PolicyPublished: store.PolicyPublished{Domain: e.dom.Name, P: "none", PCT: 100, ADKIM: "r", ASPF: "r"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := off; i < off+n; i++ {
		r := testRecord(i)
		r.SourceIP = fmt.Sprintf("10.%d.%d.%d", i%3, (i/7)%256, i%251)
		if i%5 == 0 {
			r.SourceIP = fmt.Sprintf("2001:db8::%x", i)
		}
		if i%4 > 0 {
			cc, org, asn := []string{"US", "SE", "DE"}[i%3], fmt.Sprintf("Net %d", i%6), uint32(64500+i%6)
			r.Geo = &store.Geo{CountryCode: &cc, ASN: &asn, ASOrg: &org}
		}
		r.AuthResults.SPF = []store.SPFAuth{{Domain: fmt.Sprintf("spf%d.example", i%3), Result: "pass"}}
		d.Add(r)
	}
	return d
}

// rollupReads is what the reads of the roll-ups answer for e's domain:
// the sources of every day (EachSourceDay, merged by IP per day), the
// domain's statistics, the overview's day totals and the disposition
// chart, as JSON with the ids taken out (two databases are compared).
func rollupReads(t *testing.T, e *reportEnv) string {
	t.Helper()
	from, to := reportDay(1), reportDay(30)
	perDay := map[string]map[string]*store.SourceRollup{}
	err := e.db.EachSourceDay(e.org.ID, e.dom.ID, from, to, func(day time.Time, s *store.SourceRollup) {
		m := perDay[day.Format(time.DateOnly)]
		if m == nil {
			m = map[string]*store.SourceRollup{}
			perDay[day.Format(time.DateOnly)] = m
		}
		if g := m[s.SourceIP]; g != nil {
			g.Merge(s)
		} else {
			m[s.SourceIP] = s
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := e.db.DomainStatistics(e.org.ID, e.dom.ID, from, to)
	if err != nil {
		t.Fatal(err)
	}
	totals, err := e.db.DomainDays(e.org.ID, from, to)
	if err != nil {
		t.Fatal(err)
	}
	disp, err := e.db.DomainDispositionDays(e.org.ID, e.dom.ID, from, to)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal([]any{perDay, st, totals[e.dom.ID], disp})
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(b), e.dom.ID, "DOMAIN")
}

// rollupForm is how a domain-day's roll-ups are stored: whether its day
// roll-up is sealed, how many source segments it has and whether the
// first is sealed.
type rollupForm struct {
	daySealed   bool
	segments    int
	firstSealed bool
}

func rollupForms(t *testing.T, e *reportEnv, day time.Time) rollupForm {
	t.Helper()
	key := binary.BigEndian.AppendUint32([]byte(e.dom.ID), uint32(day.Unix()/86400))
	var f rollupForm
	err := store.BoltOf(e.db).View(func(tx *bolt.Tx) error {
		if v := tx.Bucket([]byte("report_rollups")).Get(key); v != nil {
			f.daySealed = v[0] == 2
		}
		c := tx.Bucket([]byte("source_rollups")).Cursor()
		for k, v := c.Seek(key); k != nil && bytes.HasPrefix(k, key); k, v = c.Next() {
			if f.segments == 0 {
				f.firstSealed = v[0] == 4
			}
			f.segments++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestRollupsSealed ensures sealing a closed day's roll-ups changes no
// read: a database sealed as the job does (and as dmarcd compact does)
// answers as its twin that never is, after the seal, after late reports
// land on the sealed day (past the 32 segments that make ingest merge a
// day, sealed segment included), and after those are sealed again; a day
// still open stays plain, and the file stays sound.
func TestRollupsSealed(t *testing.T) {
	sealed, plain := newReportEnv(t), newReportEnv(t)
	commit := func(extID string, day time.Time, off, n int) {
		for _, e := range []*reportEnv{sealed, plain} {
			e.commit(t, &store.IngestBatch{Reports: []*store.ReportDraft{rollupDraft(t, e, extID, day, off, n)}})
		}
	}
	check := func(stage string) {
		t.Helper()
		if got, want := rollupReads(t, sealed), rollupReads(t, plain); got != want {
			t.Fatalf("%s: the sealed database reads\n%.2000s\nthe plain one\n%.2000s", stage, got, want)
		}
		if err := store.BoltOf(sealed.db).View(func(tx *bolt.Tx) error {
			for err := range tx.Check() {
				return err
			}
			return nil
		}); err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
	}
	// Day 5: 40 commits (ingest merges the day at 32 segments); day 6:
	// two reports; day 21: open when the job runs.
	for i := range 40 {
		commit(fmt.Sprint("a", i), reportDay(5), i*13, 60)
	}
	commit("b1", reportDay(6), 0, 500)
	commit("b2", reportDay(6), 250, 500)
	commit("c1", reportDay(21), 0, 50)
	check("before sealing")
	if f := rollupForms(t, sealed, reportDay(5)); f.daySealed || f.segments < 2 || f.firstSealed {
		t.Fatalf("day 5 before sealing: %+v", f)
	}

	// The periodic job: days 5 and 6 are closed, day 21 is not (it
	// started less than 36 hours before now).
	job := store.SealOptions{Now: storetest.Epoch().Add(time.Hour)}
	if _, err := sealed.db.SealRecords(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	for _, d := range []int{5, 6} {
		if f := rollupForms(t, sealed, reportDay(d)); f != (rollupForm{daySealed: true, segments: 1, firstSealed: true}) {
			t.Fatalf("day %d after sealing: %+v", d, f)
		}
	}
	if f := rollupForms(t, sealed, reportDay(21)); f.daySealed || f.firstSealed {
		t.Fatalf("open day 21 after sealing: %+v", f)
	}
	check("after sealing")

	// Late reports for the sealed day 5: a few, then past 32 segments.
	for i := range 3 {
		commit(fmt.Sprint("late", i), reportDay(5), 1000+i*7, 20)
	}
	if f := rollupForms(t, sealed, reportDay(5)); f.daySealed || f.segments != 4 || !f.firstSealed {
		t.Fatalf("day 5 after 3 late reports: %+v", f)
	}
	check("late reports on a sealed day")
	for i := range 35 {
		commit(fmt.Sprint("later", i), reportDay(5), 2000+i*3, 10)
	}
	check("past 32 segments on a sealed day")
	later := storetest.Epoch().Add(2 * time.Hour)
	job.Now = later // the late reports' arrival is quiet by now
	for i := range 2 {
		if _, err := sealed.db.SealRecords(context.Background(), job); err != nil {
			t.Fatal(err)
		}
		if f := rollupForms(t, sealed, reportDay(5)); f != (rollupForm{daySealed: true, segments: 1, firstSealed: true}) {
			t.Fatalf("day 5 sealed again (run %d): %+v", i, f)
		}
		check(fmt.Sprint("sealed again, run ", i))
	}
	// Nothing new: a run writes nothing (the transaction id stays).
	txid := func() (id int) {
		_ = store.BoltOf(sealed.db).View(func(tx *bolt.Tx) error { id = tx.ID(); return nil })
		return id
	}
	before := txid()
	if _, err := sealed.db.SealRecords(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	if after := txid(); after != before {
		t.Errorf("a run with nothing to seal wrote: transaction %d, then %d", before, after)
	}

	// dmarcd compact: every day, the open one too.
	if _, err := sealed.db.SealRecords(context.Background(), store.SealOptions{All: true}); err != nil {
		t.Fatal(err)
	}
	if f := rollupForms(t, sealed, reportDay(21)); f != (rollupForm{daySealed: true, segments: 1, firstSealed: true}) {
		t.Fatalf("day 21 after sealing all: %+v", f)
	}
	check("after sealing all")
}

// TestRollupsSealedWithoutRecords ensures the All sweep (dmarcd compact)
// seals the roll-ups of days without unsealed records, as in a file whose
// records were sealed before roll-ups were, while the periodic job leaves
// such days alone; the reads stay the same.
func TestRollupsSealedWithoutRecords(t *testing.T) {
	e := newReportEnv(t)
	for i := range 5 {
		e.commit(t, &store.IngestBatch{Reports: []*store.ReportDraft{rollupDraft(t, e, fmt.Sprint("r", i), reportDay(3+i%2), i*40, 80)}})
	}
	before := rollupReads(t, e)
	if _, err := e.db.SealRecords(context.Background(), store.SealOptions{All: true}); err != nil {
		t.Fatal(err)
	}
	// Back to the plain forms, as the file of an older binary had them.
	err := store.BoltOf(e.db).Update(func(tx *bolt.Tx) error {
		rb, sb := tx.Bucket([]byte("report_rollups")), tx.Bucket([]byte("source_rollups"))
		c := rb.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			r, err := reports.DecodeDayRollup(v)
			if err != nil {
				return err
			}
			if err := rb.Put(k, reports.AppendDayRollup(nil, r)); err != nil {
				return err
			}
		}
		c = sb.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			day := reports.DaySources{}
			if err := reports.DecodeSourceSegment(v, day.Add); err != nil {
				return err
			}
			if err := sb.Put(k, reports.AppendSourceSegment(nil, day)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	plainForm := rollupForm{daySealed: false, segments: 1, firstSealed: false}
	if f := rollupForms(t, e, reportDay(3)); f != plainForm {
		t.Fatalf("day 3 made plain: %+v", f)
	}
	if got := rollupReads(t, e); got != before {
		t.Fatalf("reads of the plain forms changed:\n%.1500s\n%.1500s", got, before)
	}
	// The periodic job looks only at days with unsealed records: none.
	if _, err := e.db.SealRecords(context.Background(), store.SealOptions{Now: storetest.Epoch().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if f := rollupForms(t, e, reportDay(3)); f != plainForm {
		t.Fatalf("day 3 after the periodic job: %+v", f)
	}
	if _, err := e.db.SealRecords(context.Background(), store.SealOptions{All: true}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []int{3, 4} {
		if f := rollupForms(t, e, reportDay(d)); f != (rollupForm{daySealed: true, segments: 1, firstSealed: true}) {
			t.Fatalf("day %d: %+v", d, f)
		}
	}
	if got := rollupReads(t, e); got != before {
		t.Fatalf("reads changed:\n%.1500s\n%.1500s", got, before)
	}
}
