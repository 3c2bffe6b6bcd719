package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/ingest/imports"
	"github.com/dmarcd/dmarcd/ingest/ingesttest"
	"github.com/dmarcd/dmarcd/internal/reportgen"
	"github.com/dmarcd/dmarcd/store"
)

// TestSMTPIntake ensures reports sent by a real SMTP client are stored and
// read back through the API with their counts, statistics and geolocation;
// that the same report twice is stored once; that an unknown recipient is
// refused with 550, an oversized message with 552, and a mail without a
// report is accepted into the quarantine; and that SIGHUP reloads the geo
// databases.
func TestSMTPIntake(t *testing.T) {
	s := StartServer(t, Options{Args: append([]string{"--smtp-listen", "127.0.0.1:0", "--smtp-max-bytes", "65536"}, geoArgs()...)})
	addr := s.SMTPAddr()
	domID, email := s.CreateDomain("example.com")
	const from = "noreply-dmarc-support@google.com"
	msg, stats := ingesttest.ReportMail(from, email, 11, 40, reportgen.Options{Domain: "example.com", Begin: recentDay()})
	if err := sendMail(addr, from, []string{email}, msg); err != nil {
		t.Fatalf("sending a report: %v", err)
	}
	reps, total := s.Reports(domID)
	if total != 1 {
		t.Fatalf("%d reports listed, want 1", total)
	}
	rep := reps[0]
	if rep["record_count"] != float64(stats.Records) || rep["message_count"] != float64(stats.Messages) ||
		rep["dmarc_pass_count"] != float64(stats.DMARCPass) || rep["domain"] != "example.com" {
		t.Errorf("report = %v\nwant %d records, %d messages, %d passing", rep, stats.Records, stats.Messages, stats.DMARCPass)
	}
	id, _ := rep["id"].(string)
	full := s.Must(http.StatusOK, "GET", "/api/v1/reports/"+id, s.Key, nil)
	records, _ := full["records"].([]any)
	var sum float64
	located := 0
	for _, r := range records {
		rec := r.(map[string]any)
		sum += rec["count"].(float64)
		if slices.Contains(reportgen.GeoTestIPs(), rec["source_ip"].(string)) {
			geo, _ := rec["geo"].(map[string]any)
			if geo == nil || geo["country_code"] == nil {
				t.Errorf("record from %s not geolocated: %v", rec["source_ip"], rec["geo"])
			}
			located++
		}
	}
	if len(records) != stats.Records || sum != float64(stats.Messages) || located == 0 {
		t.Errorf("%d records summing to %v messages, %d from known addresses; want %d records, %d messages, some located",
			len(records), sum, located, stats.Records, stats.Messages)
	}
	st := s.Must(http.StatusOK, "GET", "/api/v1/reports/"+id+"/statistics", s.Key, nil)
	dm, _ := st["dmarc"].(map[string]any)
	if st["message_count"] != float64(stats.Messages) || dm["pass"] != float64(stats.DMARCPass) {
		t.Errorf("statistics = %v", st)
	}

	if err := sendMail(addr, from, []string{email}, msg); err != nil {
		t.Fatalf("sending the report again: %v", err)
	}
	if _, total := s.Reports(domID); total != 1 {
		t.Errorf("the same report twice: %d reports, want 1", total)
	}
	// The report sent again had its dates: found by its key, no scan.
	metrics := string(s.Do("GET", "/metrics", "", nil).Body)
	for _, want := range []string{"dmarcd_dedup_filter_reports 1\n", "# TYPE dmarcd_dedup_scans_total counter\ndmarcd_dedup_scans_total 0\n"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, grepLines(metrics, "dedup"))
		}
	}
	if !strings.Contains(metrics, "dmarcd_dedup_filter_bytes ") || strings.Contains(metrics, "dmarcd_dedup_filter_bytes 0\n") {
		t.Errorf("/metrics: no filter memory:\n%s", grepLines(metrics, "dedup"))
	}

	code, text := smtpReply(sendMail(addr, from, []string{"nobody@reports.dmarcd.test"}, msg))
	if code != 550 || !strings.HasPrefix(text, "5.1.1") {
		t.Errorf("unknown recipient: %d %q, want 550 5.1.1", code, text)
	}
	big := ingesttest.MailWith(from, email, reportgen.Generate(12, 400, reportgen.Options{Domain: "example.com", Begin: recentDay()}), "text/xml", "r.xml")
	code, text = smtpReply(sendMail(addr, from, []string{email}, big))
	if code != 552 || !strings.HasPrefix(text, "5.3.4") || len(big) <= 65536 {
		t.Errorf("oversized message (%d bytes): %d %q, want 552 5.3.4", len(big), code, text)
	}

	hello := []byte("From: someone@sender.test\r\nSubject: hi\r\n\r\nNo report here.\r\n")
	if err := sendMail(addr, "someone@sender.test", []string{email}, hello); err != nil {
		t.Fatalf("mail without a report: %v", err)
	}
	var q struct {
		Data  []store.QuarantineEntry `json:"data"`
		Total int                     `json:"total"`
	}
	out := MustCLI(t, "--data-dir", s.DataDir, "quarantine", "list", "--json")
	if err := json.Unmarshal([]byte(out.Stdout), &q); err != nil {
		t.Fatalf("quarantine list --json: %v\n%s", err, out.Stdout)
	}
	if q.Total != 1 || q.Data[0].Source != "smtp" || q.Data[0].Name != "someone@sender.test -> "+email {
		t.Errorf("quarantine = %+v, want the mail without a report", q)
	}
	if _, total := s.Reports(domID); total != 1 {
		t.Errorf("after refused and quarantined mail: %d reports, want 1", total)
	}

	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if entry := s.WaitLog("SIGHUP: geolocation databases reloaded"); !strings.Contains(fmt.Sprint(entry["geo"]), "GeoIP2-City") {
		t.Errorf("reload log line: %v", entry)
	}
}

// TestImportFolder ensures 'dmarcd import' of the corpus folder goes
// through the running server, reports every input, stores what the API
// then lists, and stores nothing twice when run again.
func TestImportFolder(t *testing.T) {
	// The corpus is from 2018-2019: --retention 0 keeps it.
	s := StartServer(t, Options{Args: []string{"--smtp-listen", "", "--retention", "0"}})
	domains := map[string]string{}
	for _, name := range []string{"example.com", "example.de", "indemed.com", "borschow.com"} {
		domains[name], _ = s.CreateDomain(name)
	}
	corpus := filepath.Join("..", "testdata", "corpus", "aggregate")
	entries, err := os.ReadDir(corpus)
	if err != nil {
		t.Fatal(err)
	}
	var first imports.Summary
	out := MustCLI(t, "--data-dir", s.DataDir, "import", "--json", corpus)
	if err := json.Unmarshal([]byte(out.Stdout), &first); err != nil {
		t.Fatalf("import --json: %v\n%s", err, out.Stdout)
	}
	if first.Files != len(entries) || first.Failed != 0 || first.Imported < len(entries)/2 ||
		first.Imported+first.Duplicates+first.Quarantined < first.Inputs {
		t.Errorf("import of %d files: %+v", len(entries), first)
	}
	listed := 0
	for _, id := range domains {
		_, total := s.Reports(id)
		listed += total
	}
	if listed != first.Imported {
		t.Errorf("the API lists %d reports, the import stored %d", listed, first.Imported)
	}

	var again imports.Summary
	out = MustCLI(t, "--data-dir", s.DataDir, "import", "--json", corpus)
	if err := json.Unmarshal([]byte(out.Stdout), &again); err != nil {
		t.Fatal(err)
	}
	if again.Imported != 0 || again.Duplicates != first.Imported+first.Duplicates || again.Failed != 0 {
		t.Errorf("second import: %+v, want only the %d duplicates", again, first.Imported+first.Duplicates)
	}
	plain := MustCLI(t, "--data-dir", s.DataDir, "import", filepath.Join(corpus, "veeam.com!example.com!1530133200!1530219600.xml"))
	if !strings.Contains(plain.Stdout, "duplicate    ") || !strings.Contains(plain.Stdout, "0 failed.") {
		t.Errorf("plain import output:\n%s", plain.Stdout)
	}
}

// TestKillDuringImport ensures a server killed with SIGKILL in the middle
// of an import leaves every report fully stored or absent and a database
// that passes its check, and that the import can simply be run again.
func TestKillDuringImport(t *testing.T) {
	const reports, records = 300, 20
	dir := t.TempDir()
	for i := range reports {
		// Recent dates: reports older than the retention (400 days) would be
		// deleted when the server starts again.
		begin := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -1-i%30)
		xml := reportgen.Generate(int64(1000+i), records, reportgen.Options{Domain: "example.com", Begin: begin})
		name, data := fmt.Sprintf("r%03d.xml", i), xml
		switch i % 3 {
		case 1:
			name, data = name+".gz", reportgen.Gzip(xml)
		case 2:
			name, data = fmt.Sprintf("r%03d.zip", i), reportgen.Zip("r.xml", xml)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := StartServer(t, Options{Args: []string{"--smtp-listen", "", "--rate-limit", "100000"}})
	domID, _ := s.CreateDomain("example.com")
	key := s.Key

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Two inputs in flight: each batch the client sends holds one or two
	// reports, so the kill after 30 of them lands mid-way (with the
	// default 1,024 in flight the first answer came only once all 300 were
	// stored, and the import had nothing left to lose).
	imp := exec.CommandContext(ctx, binary, "--data-dir", s.DataDir, "import", "--jobs", "2", dir)
	stdout, err := imp.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := imp.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	for n := 0; n < 30 && sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "imported") {
			n++
		}
	}
	s.Kill()
	for sc.Scan() {
	}
	if err := imp.Wait(); err == nil {
		t.Error("the import whose server was killed exited 0")
	}
	CheckDatabase(t, s.DataDir)
	checkReportsWhole(t, s.DataDir, records)

	s2 := StartServer(t, Options{DataDir: s.DataDir, Args: []string{"--smtp-listen", "", "--rate-limit", "100000"}})
	s2.Key = key
	var sum imports.Summary
	out := MustCLI(t, "--data-dir", s.DataDir, "import", "--json", dir)
	if err := json.Unmarshal([]byte(out.Stdout), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Failed != 0 || sum.Imported+sum.Duplicates != reports || sum.Duplicates < 30 {
		t.Errorf("re-run after the kill: %+v, want %d reports, at least 30 of them duplicates", sum, reports)
	}
	if _, total := s2.Reports(domID); total != reports {
		t.Errorf("%d reports after the re-run, want %d", total, reports)
	}
}

// checkReportsWhole opens the database of a dead server and checks that
// every report it lists has all its records, and statistics that match.
func checkReportsWhole(t *testing.T, dataDir string, records int) {
	t.Helper()
	db, err := store.Open(filepath.Join(dataDir, "dmarcd.db"), &store.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	org, err := db.FindOrganization("default")
	if err != nil {
		t.Fatal(err)
	}
	for page := 1; ; page++ {
		reps, _, err := db.ListReports(org.ID, store.ReportFilter{Page: store.Page{Page: page, Limit: 100}})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range reps {
			n, messages := 0, int64(0)
			if err := db.ReportRecords(org.ID, r.ID, func(rec *store.Record) error {
				n++
				messages += rec.Count
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			st, err := db.ReportStatistics(org.ID, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if n != records || r.RecordCount != records || messages != r.MessageCount || st.MessageCount != messages {
				t.Errorf("report %s: %d records read, record_count %d, messages %d/%d/%d; want %d whole records",
					r.ID, n, r.RecordCount, messages, r.MessageCount, st.MessageCount, records)
			}
		}
		if len(reps) < 100 {
			return
		}
	}
}

// TestDemo ensures 'serve --demo' shows a newcomer a domain with reports
// at once, and that starting again with --demo adds nothing.
func TestDemo(t *testing.T) {
	s := StartServer(t, Options{Args: []string{"--demo", "--smtp-listen", ""}})
	list := s.Must(http.StatusOK, "GET", "/api/v1/domains", s.Key, nil)
	data, _ := list["data"].([]any)
	if len(data) != 1 || data[0].(map[string]any)["name"] != "demo.dmarcd.test" {
		t.Fatalf("domains after --demo: %v", list)
	}
	id := data[0].(map[string]any)["id"].(string)
	_, first := s.Reports(id)
	if first == 0 {
		t.Fatal("--demo loaded no reports")
	}
	key := s.Key
	s.Stop()
	s2 := StartServer(t, Options{DataDir: s.DataDir, Args: []string{"--demo", "--smtp-listen", ""}})
	s2.Key = key
	if _, again := s2.Reports(id); again != first {
		t.Errorf("second start with --demo: %d reports, want still %d", again, first)
	}
}

// recentDay is a report day within every retention window: the server
// leaves out older reports however they come (SMTP and IMAP too).
func recentDay() time.Time { return time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -3) }
