package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/admin"
	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/ingest/imports"
	"github.com/dmarcd/dmarcd/internal/reportgen"
	"github.com/dmarcd/dmarcd/store"
)

// newDataDir makes a database with organization acme owning example.com,
// the way restore would, and closes it.
func newDataDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	db, err := (&globalOptions{DataDir: dir}).openStore(false)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	org, err := db.CreateOrganization("acme", store.PlanUnlimited)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.CreateDomain(&store.Domain{OrgID: org.ID, Name: "example.com", ReportingEmail: "abc@reports.test", DMARCRecord: "v=DMARC1; p=none"}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// reportFiles writes two reports, a gzip one under an awkward name, a
// file that is no report, and a README.md and a LICENSE that a folder
// import leaves out by their names.
func reportFiles(t *testing.T) (dir, junk string) {
	t.Helper()
	dir = t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Recent dates: older reports are outside the default retention window.
	begin := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -3)
	write("a.xml", reportgen.Generate(1, 40, reportgen.Options{Domain: "example.com", Begin: begin}))
	write("google.com!example.com!1 [copy] (2).xml.gz", reportgen.Gzip(reportgen.Generate(2, 3, reportgen.Options{Domain: "example.com", Begin: begin.AddDate(0, 0, -1)})))
	junk = write("notes.txt", []byte("these are my reports\n"))
	write("README.md", []byte("# Reports\n"))
	write("LICENSE", []byte("MIT\n"))
	return dir, junk
}

// TestImportOffline ensures import and quarantine work on the database file
// with no server running: plain lines and a summary, --json, duplicates on
// a re-run, exit code 1 for a failure, and every quarantine operation.
func TestImportOffline(t *testing.T) {
	dd := "--data-dir=" + newDataDir(t)
	files, junk := reportFiles(t)

	code, out, errOut := run(t, nil, dd, "import", files)
	if code != 0 {
		t.Fatalf("import: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"imported     " + filepath.Join(files, "a.xml") + " (1 report, 40 records)",
		"quarantined  " + junk, "Imported 2 aggregate reports (43 records) from 3 inputs; 0 duplicates, 1 quarantined, 0 failed.",
		"Skipped 2 files that are no report by their names", "  " + filepath.Join(files, "LICENSE") + ": not a report by its name",
		"  " + filepath.Join(files, "README.md") + ": not a report by its name"} {
		if !strings.Contains(out, want) {
			t.Errorf("import output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "quarantined  "+filepath.Join(files, "README.md")) {
		t.Errorf("README.md quarantined:\n%s", out)
	}

	code, out, _ = run(t, nil, dd, "import", "--json", "--org", "ACME", files, filepath.Join(files, "missing.xml"))
	var sum imports.Summary
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("import --json: %v\n%s", err, out)
	}
	if code != 1 || sum.Imported != 0 || sum.Duplicates != 2 || sum.Failed != 1 || sum.Failures[0].File != filepath.Join(files, "missing.xml") {
		t.Errorf("re-run with a missing file: exit %d, %+v", code, sum)
	}
	if code, _, errOut := run(t, nil, dd, "import", "--org", "globex", files); code != 1 || !strings.Contains(errOut, "not found") {
		t.Errorf("unknown --org: exit %d %s", code, errOut)
	}

	code, out, _ = run(t, nil, dd, "quarantine", "list", "--json")
	var list struct {
		Data  []store.QuarantineEntry
		Total int
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil || code != 0 || list.Total != 2 {
		t.Fatalf("quarantine list --json: exit %d %v\n%s", code, err, out)
	}
	id := list.Data[0].ID
	if code, out, _ := run(t, nil, dd, "quarantine", "list"); code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "notes.txt") {
		t.Errorf("quarantine list:\n%s", out)
	}
	// The newest entry is the --org ACME run's: its organization by name.
	if list.Data[0].OrgID == "" {
		t.Fatalf("newest entry has no organization: %+v", list.Data[0])
	}
	if code, out, _ := run(t, nil, dd, "quarantine", "show", id); code != 0 || !strings.Contains(out, "Reason:") || !strings.Contains(out, junk) ||
		!strings.Contains(out, "Organization: acme ("+list.Data[0].OrgID+")") {
		t.Errorf("quarantine show:\n%s", out)
	}
	if strings.Contains(out, "dmarc: ") || strings.Contains(out, "no DMARC report found") {
		t.Errorf("quarantine reason repeats itself or names a package:\n%s", out)
	}
	code, out, errOut = run(t, nil, dd, "quarantine", "show", id, "--raw")
	if code != 0 || out != "these are my reports\n" || !strings.Contains(errOut, id) {
		t.Errorf("show --raw: stdout %q, stderr %q", out, errOut)
	}
	if code, out, errOut := run(t, nil, dd, "quarantine", "retry", id); code != 1 || !strings.Contains(errOut, "stays quarantined") {
		t.Errorf("retry of junk: exit %d, want 1\n%s%s", code, out, errOut)
	}
	if code, out, _ := run(t, nil, dd, "quarantine", "delete", id); code != 0 || !strings.Contains(out, "Deleted") {
		t.Errorf("delete: exit %d\n%s", code, out)
	}
	if code, _, errOut := run(t, nil, dd, "quarantine", "show", id); code != 1 || !strings.Contains(errOut, "not found") {
		t.Errorf("show after delete: exit %d %s", code, errOut)
	}
	if code, _, _ := run(t, nil, dd, "quarantine", "list", "--limit", "0"); code != 2 {
		t.Errorf("--limit 0: exit %d, want 2", code)
	}
}

// TestImportOfflineGeolocates ensures an offline import with --geoip-*
// geolocates the sources the test databases know, and that a corrupt
// database is a clear error before anything is imported.
func TestImportOfflineGeolocates(t *testing.T) {
	dataDir := newDataDir(t)
	dd := "--data-dir=" + dataDir
	files, _ := reportFiles(t)
	geoDir := filepath.Join("..", "testdata", "geo")
	broken := filepath.Join(geoDir, "broken", "GeoIP2-City-Test-Invalid-Node-Count.mmdb")
	if code, _, errOut := run(t, nil, dd, "import", "--geoip-city", broken, files); code != 1 || !strings.Contains(errOut, "GeoIP2-City-Test-Invalid-Node-Count.mmdb") {
		t.Fatalf("corrupt city database: exit %d %s", code, errOut)
	}
	code, out, errOut := run(t, nil, dd, "import", "--geoip-city", filepath.Join(geoDir, "GeoIP2-City-Test.mmdb"),
		"--geoip-asn", filepath.Join(geoDir, "GeoLite2-ASN-Test.mmdb"), filepath.Join(files, "a.xml"))
	if code != 0 {
		t.Fatalf("import: exit %d\n%s%s", code, out, errOut)
	}
	db, err := (&globalOptions{DataDir: dataDir}).openStore(true)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	org, _ := db.FindOrganization("acme")
	reps, _, err := db.ListReports(org.ID, store.ReportFilter{Page: store.Page{Page: 1, Limit: 10}})
	if err != nil || len(reps) != 1 {
		t.Fatalf("reports: %v %d", err, len(reps))
	}
	located := 0
	err = db.ReportRecords(org.ID, reps[0].ID, func(r *store.Record) error {
		if slices.Contains(reportgen.GeoTestIPs(), r.SourceIP) {
			if r.Geo == nil || r.Geo.CountryCode == nil {
				t.Errorf("%s not geolocated: %+v", r.SourceIP, r.Geo)
			}
			located++
		}
		return nil
	})
	if err != nil || located == 0 {
		t.Fatalf("records: %v; %d from the test databases' addresses, want some", err, located)
	}
}

// TestImportThroughSocket ensures import goes through a running server's
// socket: the test holds the database file, so an offline fallback could
// not open it. The server reads the files itself (the same user, the same
// files), or, with --hand-over, gets them open; the outcome is the same.
func TestImportThroughSocket(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
		mode  string // in the server's log
	}{
		{"the server reads the files", nil, "read"},
		{"files handed over", []string{"--hand-over"}, "hand-over"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dataDir, g, db, p := runningPipeline(t)
			ln, err := admin.Listen(g.socketPath())
			if err != nil {
				t.Fatal(err)
			}
			var modes sync.Map // of the server's import lines
			log := slog.New(&logHook{each: func(r slog.Record) {
				r.Attrs(func(a slog.Attr) bool {
					if a.Key == "mode" {
						modes.Store(a.Value.String(), true)
					}
					return true
				})
			}})
			srv := &http.Server{Handler: admin.Handler(&admin.Local{DB: db, Pipeline: p}, log)}
			go srv.Serve(ln)
			defer srv.Close()

			files, junk := reportFiles(t)
			args := append([]string{"--data-dir", dataDir, "import", "--org", "acme", "--jobs", "2"}, tc.flags...)
			code, out, errOut := run(t, nil, append(args, files)...)
			if code != 0 || !strings.Contains(out, "Imported 2 aggregate reports") {
				t.Fatalf("import through the socket: exit %d\n%s%s", code, out, errOut)
			}
			if !strings.Contains(out, "  "+filepath.Join(files, "README.md")+": not a report") {
				t.Errorf("import through the socket does not name the README it left out:\n%s", out)
			}
			if _, ok := modes.Load(tc.mode); !ok {
				t.Errorf("the server logged no import of mode %s", tc.mode)
			}
			entries, _, err := db.ListQuarantine(store.Page{Page: 1, Limit: 10})
			if err != nil || len(entries) != 1 || entries[0].Name != junk {
				t.Fatalf("quarantine after import: %v %+v", err, entries)
			}
			var raw bytes.Buffer
			code, out, _ = run(t, nil, "--data-dir", dataDir, "quarantine", "show", entries[0].ID, "--raw", "--json")
			var shown struct {
				ID        string `json:"id"`
				RawBase64 []byte `json:"raw_base64"`
			}
			if code != 0 || json.Unmarshal([]byte(out), &shown) != nil || shown.ID != entries[0].ID {
				t.Fatalf("show --raw --json: exit %d\n%s", code, out)
			}
			raw.Write(shown.RawBase64)
			if raw.String() != "these are my reports\n" {
				t.Errorf("raw bytes over the socket: %q", raw.String())
			}
		})
	}
}

// runningPipeline opens a new data directory's store and runs an ingest
// pipeline on it until the test ends, as serve does.
func runningPipeline(t *testing.T) (string, *globalOptions, *store.DB, *ingest.Pipeline) {
	t.Helper()
	return runningPipelineWith(t, ingest.Config{})
}

// runningPipelineWith is runningPipeline with the pipeline's settings
// from cfg (its Store is set here).
func runningPipelineWith(t *testing.T, cfg ingest.Config) (string, *globalOptions, *store.DB, *ingest.Pipeline) {
	t.Helper()
	dataDir := newDataDir(t)
	g := &globalOptions{DataDir: dataDir}
	db, err := g.openStore(false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return dataDir, g, db, runPipelineOn(t, db, cfg)
}

// runPipelineOn runs an ingest pipeline over db, with the settings of cfg
// (its Store is set here), until the test ends.
func runPipelineOn(t *testing.T, db *store.DB, cfg ...ingest.Config) *ingest.Pipeline {
	t.Helper()
	var c ingest.Config
	if len(cfg) > 0 {
		c = cfg[0]
	}
	c.Store = db
	p, err := ingest.New(c)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return p
}

// TestImportSaysDifferentContent ensures an import names a report whose
// reporter, report id and domain are stored already with other content as
// a duplicate with different content, on its line and in the summary.
func TestImportSaysDifferentContent(t *testing.T) {
	dd := "--data-dir=" + newDataDir(t)
	dir := t.TempDir()
	o := reportgen.Options{Domain: "example.com", ReportID: "r-1", Begin: time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -3)}
	first, second := filepath.Join(dir, "first.xml"), filepath.Join(t.TempDir(), "second.xml")
	if err := os.WriteFile(first, reportgen.Generate(1, 4, o), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(second, reportgen.Generate(1, 5, o), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := run(t, nil, dd, "import", first); code != 0 {
		t.Fatalf("import: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := run(t, nil, dd, "import", first, second)
	if code != 0 {
		t.Fatalf("import: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"duplicate    " + first + " (1 duplicate)",
		"differs      " + second + " (1 duplicate with different content, not stored)",
		"Not stored: 1 duplicate with different content"} {
		if !strings.Contains(out, want) {
			t.Errorf("import output lacks %q:\n%s", want, out)
		}
	}
}

// TestImportRetentionWithServer ensures --retention given to an import
// that a running server stores is honoured when it is the server's, and
// refused, naming the server's, when it is not (issue 24: the flag was
// silently ignored).
func TestImportRetentionWithServer(t *testing.T) {
	dataDir, g, db, p := runningPipelineWith(t, ingest.Config{Retention: 400 * 24 * time.Hour, FailureRetention: 90 * 24 * time.Hour})
	ln, err := admin.Listen(g.socketPath())
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: admin.Handler(&admin.Local{DB: db, Pipeline: p}, slog.New(slog.DiscardHandler))}
	go srv.Serve(ln)
	defer srv.Close()
	files, _ := reportFiles(t)
	for _, tc := range []struct {
		flags []string
		code  int
		say   string
	}{
		{[]string{"--retention", "30d"}, 2, "--retention 400d"},
		{[]string{"--failure-retention", "0"}, 2, "--failure-retention 90d"},
		{[]string{"--retention", "400d", "--failure-retention", "90d"}, 0, "Imported"},
		{nil, 0, "Imported"},
	} {
		args := append([]string{"--data-dir", dataDir, "import"}, tc.flags...)
		code, out, errOut := run(t, nil, append(args, files)...)
		if code != tc.code || !strings.Contains(out+errOut, tc.say) {
			t.Errorf("import %v: exit %d, want %d saying %q\n%s%s", tc.flags, code, tc.code, tc.say, out, errOut)
		}
	}
}

// TestQuarantineRetryAll ensures 'quarantine retry --all' retries every
// entry, removes those that now yield a report, keeps the others with
// their reason (a report older than the retention window among them,
// which a single retry also keeps, exit 1), and says how many of each.
func TestQuarantineRetryAll(t *testing.T) {
	dataDir := newDataDir(t)
	dd := "--data-dir=" + dataDir
	dir := t.TempDir()
	recent := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -3)
	files := map[string][]byte{
		"late.xml":  reportgen.Generate(1, 3, reportgen.Options{Domain: "late.example", Begin: recent}),
		"old.xml":   reportgen.Generate(2, 3, reportgen.Options{Domain: "late.example", Begin: time.Date(2019, 3, 1, 0, 0, 0, 0, time.UTC)}),
		"notes.txt": []byte("no report here\n"),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if code, out, errOut := run(t, nil, dd, "import", dir); code != 0 || !strings.Contains(out, "3 quarantined") {
		t.Fatalf("import: exit %d\n%s%s", code, out, errOut)
	}
	db, err := (&globalOptions{DataDir: dataDir}).openStore(false)
	if err != nil {
		t.Fatal(err)
	}
	orgs, _ := db.ListOrganizations()
	if err := db.CreateDomain(&store.Domain{OrgID: orgs[0].ID, Name: "late.example", ReportingEmail: "late@reports.test", DMARCRecord: "v=DMARC1; p=none"}); err != nil {
		t.Fatal(err)
	}
	entries, _, _ := db.ListQuarantine(store.Page{Page: 1, Limit: 10})
	db.Close()
	var oldID string
	for _, e := range entries {
		if strings.HasSuffix(e.Name, "old.xml") {
			oldID = e.ID
		}
	}
	if code, out, errOut := run(t, nil, dd, "quarantine", "retry", oldID); code != 1 || strings.Contains(out, "removed") ||
		!strings.Contains(errOut, "older than the retention window") {
		t.Errorf("retry of a 2019 report: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := run(t, nil, dd, "quarantine", "retry", "--all")
	if code != 0 || !strings.Contains(out, "Retried 3 entries: 1 removed (their reports stored or already there), 2 stay quarantined, 0 failed.") ||
		!strings.Contains(out, "stays        "+oldID+": ") {
		t.Errorf("retry --all: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ := run(t, nil, dd, "quarantine", "list", "--json"); code != 0 || strings.Count(out, `"id"`) != 2 {
		t.Errorf("after retry --all:\n%s", out)
	}
	if code, _, _ := run(t, nil, dd, "quarantine", "retry", "--all", oldID); code != 2 {
		t.Errorf("retry --all with an ID: exit %d, want 2", code)
	}
}

// TestImportSummaryWording ensures the summary of an import reads well: a
// report left out for its age whose reporter has no name says so without
// a gap ("from  for"), and import --help names the TLS reports it takes.
func TestImportSummaryWording(t *testing.T) {
	dd := "--data-dir=" + newDataDir(t)
	dir := t.TempDir()
	old := reportgen.Generate(7, 2, reportgen.Options{Domain: "example.com", OrgName: "placeholder.example",
		Begin: time.Now().UTC().AddDate(-3, 0, 0)})
	old = bytes.Replace(old, []byte("<org_name>placeholder.example</org_name>"), []byte("<org_name></org_name>"), 1)
	file := filepath.Join(dir, "old.xml")
	if err := os.WriteFile(file, old, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, nil, dd, "import", file)
	if code != 0 || !strings.Contains(out, "older than the retention window") {
		t.Fatalf("import: exit %d\n%s%s", code, out, errOut)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(strings.TrimLeft(line, " "), "  ") && strings.Contains(line, "report") && !strings.HasPrefix(line, "too old") {
			t.Errorf("a gap in %q", line)
		}
	}
	if !strings.Contains(out, "by an unnamed reporter") {
		t.Errorf("the expired report's reporter is not said to be unnamed:\n%s", out)
	}
	_, help, _ := run(t, nil, "import", "--help")
	if !strings.Contains(help, "SMTP TLS reports (RFC 8460)") {
		t.Errorf("import --help does not name TLS reports:\n%s", help)
	}
	_, root, _ := run(t, nil, "--help")
	if !regexp.MustCompile(`(?m)^\s+import\s.*TLS`).MatchString(root) {
		t.Errorf("the root help's import line does not name TLS reports:\n%s", root)
	}
}
