package clickhouse_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/export/clickhouse"
	"github.com/dmarcd/dmarcd/export/clickhouse/chtest"
	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/ingest/ingesttest"
	"github.com/dmarcd/dmarcd/internal/reportgen"
	"github.com/dmarcd/dmarcd/store"
)

// shared is one ClickHouse for the tests of this package that do not stop
// it; each test writes into a database of its own.
var shared struct {
	once sync.Once
	srv  *chtest.Server
	n    int
	mu   sync.Mutex
}

// sharedServer returns the package's server and a fresh database name.
func sharedServer(t *testing.T) (*chtest.Server, string) {
	t.Helper()
	chtest.Skip(t)
	shared.once.Do(func() { shared.srv = startShared(t) })
	if shared.srv == nil {
		t.Fatal("the shared ClickHouse did not start")
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	shared.n++
	return shared.srv, fmt.Sprintf("t%d_%d", shared.n, time.Now().UnixNano()%1e6)
}

// startShared starts the shared server outside any one test's cleanup:
// TestMain stops it.
func startShared(t *testing.T) *chtest.Server {
	srv := chtest.StartCluster(&keeper{T: t}, 1, "")[0]
	return srv
}

// keeper defers cleanups to TestMain instead of the test that starts the
// shared server.
type keeper struct {
	*testing.T
}

var cleanups []func()

func (k *keeper) Cleanup(f func()) { cleanups = append(cleanups, f) }
func (k *keeper) TempDir() string {
	d, err := os.MkdirTemp("", "chtest")
	if err != nil {
		k.Fatal(err)
	}
	cleanups = append(cleanups, func() { os.RemoveAll(d) })
	return d
}

func TestMain(m *testing.M) {
	code := m.Run()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	os.Exit(code)
}

// env is a store with two organizations' domains, a pipeline, and what
// was ingested.
type env struct {
	*ingesttest.Env
	messages int64
	records  int
}

const (
	addrA = "acmeaddr@reports.test"
	addrB = "betaaddr@reports.test"
)

func newEnv(t *testing.T) *env {
	t.Helper()
	return &env{Env: ingesttest.New(t, "acme/example.com/acmeaddr", "beta/example.org/betaaddr")}
}

// ingestAggregate stores n reports of records records each for addr.
func (e *env) ingestAggregate(t *testing.T, addr string, seed0 int64, n, records int) {
	t.Helper()
	dom := e.Domains[addr]
	for i := range n {
		seed := seed0 + int64(i)
		xml := reportgen.Generate(seed, records, reportgen.Options{Domain: dom.Name})
		res, err := e.Pipeline.Ingest(context.Background(), bytes.NewReader(xml), ingest.Arrival{Source: ingest.SourceImport, Recipient: addr, Name: fmt.Sprint(seed)})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Reports) != 1 || res.Reports[0].Duplicate {
			t.Fatalf("report %d: %+v", seed, res)
		}
	}
}

// ingestFile stores a failure or TLS report file for addr.
func (e *env) ingestFile(t *testing.T, addr, path string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Pipeline.Ingest(context.Background(), bytes.NewReader(raw), ingest.Arrival{Source: ingest.SourceImport, Recipient: addr, Name: path}); err != nil {
		t.Fatal(err)
	}
}

// storeCounts sums what the store holds, as the API answers it: reports,
// records, messages, and messages by DMARC result, per organization.
func (e *env) storeCounts(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, org := range e.Orgs {
		reps, _, err := e.DB.ListReports(org.ID, store.ReportFilter{Page: store.Page{Page: 1, Limit: 1000}})
		if err != nil {
			t.Fatal(err)
		}
		var recs, msgs, pass, fail int64
		for _, r := range reps {
			if err := e.DB.ReportRecords(org.ID, r.ID, func(rec *store.Record) error {
				recs++
				msgs += rec.Count
				if rec.DMARC == "pass" {
					pass += rec.Count
				} else {
					fail += rec.Count
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		out[name] = fmt.Sprintf("%d\t%d\t%d\t%d\t%d", len(reps), recs, msgs, pass, fail)
	}
	return out
}

// chCounts is storeCounts as ClickHouse answers it, after FINAL.
func chCounts(t *testing.T, srv *chtest.Server, db, table string, orgs map[string]*store.Organization) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, org := range orgs {
		reps, err1 := srv.TryQuery(fmt.Sprintf("SELECT count() FROM %s.aggregate_reports%s FINAL WHERE org_id = '%s'", db, table, org.ID))
		recs, err2 := srv.TryQuery(fmt.Sprintf("SELECT count(), sum(count), sumIf(count, dmarc = 'pass'), sumIf(count, dmarc != 'pass') FROM %s.aggregate_records%s FINAL WHERE org_id = '%s'", db, table, org.ID))
		out[name] = reps + "\t" + recs
		if err1 != nil || err2 != nil {
			out[name] = fmt.Sprint(err1, err2)
		}
	}
	return out
}

func newSink(t *testing.T, db *store.DB, srv *chtest.Server, database string, tweak func(*clickhouse.Config)) *clickhouse.Sink {
	t.Helper()
	ep, err := clickhouse.ParseEndpoint(srv.URL(database), chtest.Password, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg := clickhouse.Config{Store: db, Endpoint: ep, Settle: time.Millisecond, MinBackoff: 20 * time.Millisecond,
		MaxBackoff: 100 * time.Millisecond, FlushEvery: 20 * time.Millisecond, Log: slog.New(slog.DiscardHandler)}
	if tweak != nil {
		tweak(&cfg)
	}
	s, err := clickhouse.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// run runs s until the test ends.
func run(t *testing.T, s *clickhouse.Sink) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// waitEqual waits until got() equals want.
func waitEqual(t *testing.T, what string, want map[string]string, got func() map[string]string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var g map[string]string
	for time.Now().Before(deadline) {
		g = got()
		if fmt.Sprint(g) == fmt.Sprint(want) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: ClickHouse has %v, want %v", what, g, want)
}

// TestExportMatchesStore ensures the rows in ClickHouse equal the store's
// answers (reports, records, messages, per-result counts per
// organization), that failure and TLS reports with their details arrive,
// that replays (a restarted sink, a backfill) add no row after FINAL, and
// that Exported opens once the cursor has passed a report.
func TestExportMatchesStore(t *testing.T) {
	srv, database := sharedServer(t)
	e := newEnv(t)
	e.ingestAggregate(t, addrA, 1, 4, 60)
	e.ingestAggregate(t, addrB, 100, 3, 45)
	e.ingestFile(t, addrA, "../../testdata/failure/opendmarc.eml")
	e.ingestFile(t, addrA, "../../dmarc/tlsrpt/testdata/google.json")
	want := e.storeCounts(t)
	if want["acme"] == want["beta"] {
		t.Fatal("both organizations have the same counts: the test could not tell them apart")
	}

	s := newSink(t, e.DB, srv, database, func(c *clickhouse.Config) { c.BatchRows = 70 }) // several batches, one report across two
	for range 3 {
		if _, err := s.Pass(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	got := chCounts(t, srv, database, "", e.Orgs)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ClickHouse %v, store %v", got, want)
	}
	raw := srv.Query(t, "SELECT count() FROM "+database+".aggregate_records")
	if n, _ := strconv.Atoi(raw); n != 4*60+3*45 {
		t.Errorf("%d record rows before FINAL, want %d: replays within one sink", n, 4*60+3*45)
	}
	if got := srv.Query(t, "SELECT count(), any(org_name) FROM "+database+".failure_reports FINAL"); got != "1\tacme" {
		t.Errorf("failure reports: %q", got)
	}
	if got := srv.Query(t, "SELECT count(), sum(failed_sessions) FROM "+database+".tls_reports FINAL"); !strings.HasPrefix(got, "1\t") {
		t.Errorf("TLS reports: %q", got)
	}
	det, err := e.DB.ListTLSReports(e.Orgs["acme"].ID, store.TLSFilter{Page: store.Page{Page: 1, Limit: 10}})
	if err != nil || len(det.Reports) != 1 {
		t.Fatalf("TLS reports in the store: %+v, %v", det, err)
	}
	full, _ := e.DB.FindTLSReport(e.Orgs["acme"].ID, det.Reports[0].ID)
	nd := 0
	for _, p := range full.Policies {
		nd += len(p.FailureDetails)
	}
	if got := srv.Query(t, "SELECT count() FROM "+database+".tls_failure_details FINAL WHERE domain = 'example.com'"); got != strconv.Itoa(nd) || nd == 0 {
		t.Errorf("TLS failure details: %s rows, store has %d", got, nd)
	}
	// A record's columns as the store has them.
	rep := e.Reports(t, addrB)[0]
	var first *store.Record
	_ = e.DB.ReportRecords(rep.OrgID, rep.ID, func(r *store.Record) error {
		if first == nil {
			first = r
		}
		return nil
	})
	var dkim []string
	for _, d := range first.AuthResults.DKIM {
		dkim = append(dkim, "'"+d.Domain+"'")
	}
	wantRow := strings.Join([]string{first.SourceIP, rep.DateBegin.UTC().Format("2006-01-02 15:04:05"), rep.DateBegin.UTC().Format("2006-01-02"),
		"example.org", "beta", rep.OrgName, first.HeaderFrom, "[" + strings.Join(dkim, ",") + "]", strconv.FormatInt(first.Count, 10), first.DMARC}, "\t")
	gotRow := srv.Query(t, fmt.Sprintf("SELECT source_ip, toString(date_begin), toString(day), domain, org_name, reporter, header_from, dkim_domains, count, dmarc FROM %s.aggregate_records FINAL WHERE report_id = '%s' AND record_index = 0", database, rep.ID))
	if gotRow != wantRow {
		t.Errorf("record 0 of %s in ClickHouse:\n%s\nin the store:\n%s", rep.ID, gotRow, wantRow)
	}
	st := s.Status()
	if st.Rows == 0 || st.LastError != "" || st.Cursor.Aggregate == "" || st.LagSeconds != 0 {
		t.Errorf("status %+v", st)
	}
	reps := e.Reports(t, addrA)
	for _, r := range reps {
		if !s.Exported(r.ID) {
			t.Errorf("report %s not Exported after its export", r.ID)
		}
	}
	if s.Exported(store.NewID()) {
		t.Error("a report made after the export counts as Exported")
	}

	// A restarted sink and a backfill replay rows: FINAL collapses them.
	s2 := newSink(t, e.DB, srv, database, nil)
	if _, err := s2.Rewind(time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if s2.Exported(reps[0].ID) {
		t.Error("a report counts as Exported after a rewind, before its replay")
	}
	if _, err := s2.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := chCounts(t, srv, database, "", e.Orgs); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the replay ClickHouse %v, store %v", got, want)
	}
	raw = srv.Query(t, "SELECT count() FROM "+database+".aggregate_records")
	if n, _ := strconv.Atoi(raw); n < 2*(4*60+3*45) {
		t.Errorf("%d rows before FINAL after a backfill: the backfill sent nothing again", n)
	}
	if !s2.Exported(reps[0].ID) {
		t.Error("not Exported after the backfill")
	}
}

// TestBacklogDrains ensures reports stored while ClickHouse is down are
// exported once it is back, the error shows meanwhile, and nothing is
// lost or doubled.
func TestBacklogDrains(t *testing.T) {
	srv := chtest.Start(t)
	e := newEnv(t)
	e.ingestAggregate(t, addrA, 1, 2, 30)
	s := newSink(t, e.DB, srv, "drain", nil)
	run(t, s)
	waitEqual(t, "first export", e.storeCounts(t), func() map[string]string { return chCounts(t, srv, "drain", "", e.Orgs) })

	srv.Stop()
	e.ingestAggregate(t, addrA, 50, 3, 20)
	e.ingestAggregate(t, addrB, 60, 2, 20)
	deadline := time.Now().Add(10 * time.Second)
	for s.Status().LastError == "" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	st := s.Status()
	if st.LastError == "" || st.Errors == 0 {
		t.Fatalf("no error while ClickHouse is down: %+v", st)
	}
	if strings.Contains(st.LastError, chtest.Password) {
		t.Fatal("the password is in the error")
	}
	srv.Restart(t)
	waitEqual(t, "backlog", e.storeCounts(t), func() map[string]string { return chCounts(t, srv, "drain", "", e.Orgs) })
}

// TestEndpoint ensures bad URLs are refused with a clear reason, and the
// password shows in no string nor error.
func TestEndpoint(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"ftp://host/", "scheme"},
		{"http:///?database=x", "host"},
		{"http://u:pw@host:8123/", "password"},
		{"http://host:8123/db", "path"},
		{"http://host:8123/?database=a;drop", "database"},
		{"http://host:8123/?user=x", "parameter"},
		{"::", "parse"},
	} {
		_, err := clickhouse.ParseEndpoint(c.url, "pw", "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error about %s", c.url, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), ":pw@") {
			t.Errorf("%q: the password is in the error %v", c.url, err)
		}
	}
	if _, err := clickhouse.ParseEndpoint("http://host/", "", "bad-name"); err == nil {
		t.Error("a bad cluster name was accepted")
	}
	ep, err := clickhouse.ParseEndpoint("https://ops@ch.internal:8443/?database=dmarc", "hunter2", "")
	if err != nil {
		t.Fatal(err)
	}
	if s := ep.String(); s != "https://ops@ch.internal:8443/?database=dmarc" || strings.Contains(fmt.Sprintf("%v %+v", ep, ep), "hunter2") {
		t.Errorf("endpoint shows as %q / %+v", s, ep)
	}
}

// TestWrongPassword ensures a refused login is an error that names the
// server's reason without the password.
func TestWrongPassword(t *testing.T) {
	srv, database := sharedServer(t)
	e := newEnv(t)
	ep, err := clickhouse.ParseEndpoint(srv.URL(database), "not-the-"+chtest.Password, "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := clickhouse.New(clickhouse.Config{Store: e.DB, Endpoint: ep, MinBackoff: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for s.Status().LastError == "" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	msg := s.Status().LastError
	if msg == "" || strings.Contains(msg, chtest.Password) || !strings.Contains(msg, "HTTP") {
		t.Errorf("last error %q", msg)
	}
}
