package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/export/clickhouse/chtest"
	"github.com/dmarcd/dmarcd/ingest/ingesttest"
	"github.com/dmarcd/dmarcd/internal/reportgen"
)

// apiTotals sums what the API answers for a server's domains: reports,
// records, messages, passing and failing messages, as ClickHouse's
// queries below answer them.
func apiTotals(t *testing.T, s *Server, domainIDs ...string) [5]int64 {
	t.Helper()
	var out [5]int64
	for _, id := range domainIDs {
		for page := 1; ; page++ {
			r := s.Must(http.StatusOK, "GET", fmt.Sprintf("/api/v1/reports?limit=100&page=%d&domain_id=%s", page, id), s.Key, nil)
			data, _ := r["data"].([]any)
			for _, d := range data {
				rep := d.(map[string]any)
				out[0]++
				out[1] += int64(rep["record_count"].(float64))
				out[2] += int64(rep["message_count"].(float64))
				out[3] += int64(rep["dmarc_pass_count"].(float64))
				out[4] += int64(rep["dmarc_fail_count"].(float64))
			}
			if len(data) < 100 {
				break
			}
		}
	}
	return out
}

// chTotals is apiTotals as ClickHouse answers it after FINAL, for the
// rows where (a SQL condition).
func chTotals(ch *chtest.Server, db, where string) ([5]int64, error) {
	var out [5]int64
	q := fmt.Sprintf("SELECT (SELECT count() FROM %[1]s.aggregate_reports FINAL WHERE %[2]s), count(), sum(count), sumIf(count, dmarc = 'pass'), sumIf(count, dmarc != 'pass') FROM %[1]s.aggregate_records FINAL WHERE %[2]s", db, where)
	got, err := ch.TryQuery(q)
	if err != nil {
		return out, err
	}
	f := strings.Fields(got)
	if len(f) != 5 {
		return out, fmt.Errorf("ClickHouse answered %q", got)
	}
	for i := range f {
		out[i], _ = strconv.ParseInt(f[i], 10, 64)
	}
	return out, nil
}

func waitTotals(t *testing.T, what string, want [5]int64, got func() ([5]int64, error)) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var g [5]int64
	var err error
	for time.Now().Before(deadline) {
		if g, err = got(); err == nil && g == want {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: ClickHouse has %v (%v), the API %v (reports, records, messages, pass, fail)", what, g, err, want)
}

// writeReports writes n report files of records records each for domain
// (recent dates, so retention keeps them) into a new folder.
func writeReports(t *testing.T, domain string, seed0 int64, n, records int) string {
	t.Helper()
	dir := t.TempDir()
	for i := range n {
		begin := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -1-i%20)
		xml := reportgen.Generate(seed0+int64(i), records, reportgen.Options{Domain: domain, Begin: begin})
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("r%04d.xml.gz", i)), reportgen.Gzip(xml), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestClickHouseExport ensures that with --export-clickhouse the rows in
// ClickHouse equal the API's answers after SMTP intake and an import;
// that a server killed with SIGKILL in the middle of an export and
// started again ends with the same counts and no duplicate after FINAL;
// that export status and export clickhouse --since work through the
// socket; and that the password shows in no log.
func TestClickHouseExport(t *testing.T) {
	ch := chtest.Start(t)
	args := []string{"--export-clickhouse", ch.URL("dmarc")}
	env := []string{"DMARCD_CLICKHOUSE_PASSWORD=" + chtest.Password, "DMARCD_TEST_CLICKHOUSE_BATCH_ROWS=400"}
	s := StartServer(t, Options{Args: args, Env: env})
	domID, email := s.CreateDomain("example.com")
	const from = "noreply-dmarc-support@google.com"
	for seed := range int64(3) {
		msg, _ := ingesttest.ReportMail(from, email, 500+seed, 40, reportgen.Options{Domain: "example.com", Begin: recentDay()})
		if err := sendMail(s.SMTPAddr(), from, []string{email}, msg); err != nil {
			t.Fatalf("sending a report: %v", err)
		}
	}
	MustCLI(t, "--data-dir", s.DataDir, "import", writeReports(t, "example.com", 1, 20, 50))
	want := apiTotals(t, s, domID)
	if want[0] != 23 {
		t.Fatalf("the API lists %d reports, want 23", want[0])
	}
	waitTotals(t, "after intake and import", want, func() ([5]int64, error) { return chTotals(ch, "dmarc", "1") })

	var st struct {
		Running bool `json:"running"`
		Sink    struct {
			Rows      int    `json:"rows"`
			LastError string `json:"last_error"`
		} `json:"sink"`
	}
	out := MustCLI(t, "--data-dir", s.DataDir, "export", "status", "--json")
	if err := json.Unmarshal([]byte(out.Stdout), &st); err != nil || !st.Running || st.Sink.Rows == 0 || st.Sink.LastError != "" {
		t.Errorf("export status: %+v, %v\n%s", st, err, out.Stdout)
	}
	metrics := s.Do("GET", "/metrics", "", nil)
	if !strings.Contains(string(metrics.Body), "dmarcd_clickhouse_export_rows_total") {
		t.Error("/metrics shows no export rows")
	}

	// A large import, killed while its export runs (400-row batches).
	dir := writeReports(t, "example.com", 1000, 60, 500)
	MustCLI(t, "--data-dir", s.DataDir, "import", dir)
	want = apiTotals(t, s, domID)
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, err := chTotals(ch, "dmarc", "1")
		if err == nil && got[1] > 23*40 && got[1] < want[1] {
			break
		}
		if err == nil && got[1] >= want[1] || time.Now().After(deadline) {
			t.Fatalf("no moment in the middle of the export to kill it: %v of %v (%v)", got, want, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.Kill()
	s2 := StartServer(t, Options{DataDir: s.DataDir, Args: args, Env: env})
	s2.Key = s.Key
	waitTotals(t, "after the kill and restart", want, func() ([5]int64, error) { return chTotals(ch, "dmarc", "1") })
	if got := ch.Query(t, "SELECT count() - uniqExact(report_id, record_index) FROM dmarc.aggregate_records FINAL"); got != "0" {
		t.Errorf("%s duplicate record rows after FINAL", got)
	}

	out = MustCLI(t, "--data-dir", s.DataDir, "export", "clickhouse", "--since", time.Now().UTC().Format("2006-01-02"))
	if !strings.Contains(out.Stdout, "moved back") {
		t.Errorf("export clickhouse --since said:\n%s", out.Stdout)
	}
	if r := RunCLI(t, nil, "--data-dir", s.DataDir, "export", "clickhouse", "--since", "yesterday"); r.Code == 0 || !strings.Contains(r.Stderr, "YYYY-MM-DD") {
		t.Errorf("a bad --since: exit %d, %s", r.Code, r.Stderr)
	}
	waitTotals(t, "after a backfill", want, func() ([5]int64, error) { return chTotals(ch, "dmarc", "1") })
	s2.Stop()
	for _, log := range []string{s.Stderr(), s2.Stderr()} {
		if strings.Contains(log, chtest.Password) {
			t.Fatal("the ClickHouse password is in the log")
		}
	}
}

// TestClickHouseExportFlags ensures bad export flags stop serve with a
// clear error that never shows the password.
func TestClickHouseExportFlags(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("s3cr3t-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--export-clickhouse", "http://u:s3cr3t-pw@127.0.0.1:8123/"}, "password-file"},
		{[]string{"--export-clickhouse", "tcp://127.0.0.1:9000/"}, "scheme"},
		{[]string{"--export-clickhouse-password-file", pw}, "need --export-clickhouse"},
		{[]string{"--export-clickhouse", "http://127.0.0.1:8123/", "--export-clickhouse-password-file", pw + ".missing"}, "password-file"},
		{[]string{"--export-clickhouse", "http://127.0.0.1:8123/?database=x-y", "--export-clickhouse-password-file", pw}, "database"},
	} {
		r := RunCLI(t, nil, append([]string{"serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--smtp-listen", ""}, c.args...)...)
		if r.Code == 0 || !strings.Contains(r.Stderr, c.want) || strings.Contains(r.Stderr, "s3cr3t-pw") {
			t.Errorf("%v: exit %d, stderr %q; want an error about %s without the password", c.args, r.Code, r.Stderr, c.want)
		}
	}
}

// TestClickHouseFleet ensures two dmarcd nodes with different
// organizations, each exporting into its own shard of one ClickHouse
// cluster through a Distributed table, give fleet-wide answers equal to
// the sum of both nodes' APIs.
func TestClickHouseFleet(t *testing.T) {
	shards := chtest.StartCluster(t, 2, "fleet")
	env := []string{"DMARCD_CLICKHOUSE_PASSWORD=" + chtest.Password}
	var nodes []*Server
	var want [5]int64
	for i, name := range []string{"acme", "globex"} {
		s := StartServer(t, Options{Env: env, Args: []string{"--smtp-listen", "",
			"--export-clickhouse", shards[i].URL("dmarc"), "--export-clickhouse-cluster", "fleet"}})
		MustCLI(t, "--data-dir", s.DataDir, "org", "rename", "default", name)
		domID, _ := s.CreateDomain(fmt.Sprintf("%s.example", name))
		MustCLI(t, "--data-dir", s.DataDir, "import", writeReports(t, name+".example", int64(100*i), 10+5*i, 30))
		nodes = append(nodes, s)
		got := apiTotals(t, s, domID)
		for k := range want {
			want[k] += got[k]
		}
	}
	for _, sh := range shards {
		waitTotals(t, "fleet-wide", want, func() ([5]int64, error) { return chTotals(sh, "dmarc", "1") })
	}
	// Each organization's rows live on one shard only.
	byOrg := shards[0].Query(t, "SELECT org_name, count() FROM dmarc.aggregate_records FINAL GROUP BY org_name ORDER BY org_name")
	if !strings.HasPrefix(byOrg, "acme\t") || !strings.Contains(byOrg, "\nglobex\t") {
		t.Errorf("fleet rows by organization:\n%s", byOrg)
	}
	// The Distributed tables wrote every row into the shards' local tables.
	var local int64
	for _, sh := range shards {
		n, _ := strconv.ParseInt(sh.Query(t, "SELECT count() FROM dmarc.aggregate_records_local FINAL"), 10, 64)
		local += n
	}
	if local != want[1] {
		t.Errorf("%d record rows in the shards' local tables, want %d", local, want[1])
	}
}
