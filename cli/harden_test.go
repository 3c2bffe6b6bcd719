package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/admin"
	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/ingest/imports"
	"github.com/dmarcd/dmarcd/ingest/ingesttest"
	"github.com/dmarcd/dmarcd/internal/reportgen"
	"github.com/dmarcd/dmarcd/store"
)

// TestImportCountsSkippedRecords ensures records skipped while parsing
// (an empty source IP) are counted in the import's lines, its summary and
// its JSON, not only in the log.
func TestImportCountsSkippedRecords(t *testing.T) {
	dd := "--data-dir=" + newDataDir(t)
	dir := t.TempDir()
	xml := reportgen.Generate(3, 5, reportgen.Options{Domain: "example.com"})
	n := 0
	xml = regexp.MustCompile(`<source_ip>[^<]*</source_ip>`).ReplaceAllFunc(xml, func(m []byte) []byte {
		if n++; n == 1 {
			return []byte("<source_ip></source_ip>")
		}
		return m
	})
	if err := os.WriteFile(filepath.Join(dir, "r.xml"), xml, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, nil, dd, "import", "--retention=0", dir)
	if code != 0 || !strings.Contains(out, "(1 report, 4 records, 1 record skipped)") || !strings.Contains(out, "1 record skipped as unusable") {
		t.Fatalf("import: exit %d\n%s%s", code, out, errOut)
	}
	dd2 := "--data-dir=" + newDataDir(t)
	code, out, _ = run(t, nil, dd2, "import", "--retention=0", "--json", dir)
	var sum imports.Summary
	if err := json.Unmarshal([]byte(out), &sum); err != nil || code != 0 || sum.RecordsSkipped != 1 {
		t.Fatalf("import --json: exit %d %v %+v\n%s", code, err, sum, out)
	}
}

// TestImportOfAnOldArchive ensures an import of a 2019 archive with the
// default retention (400 days) stores none of it, and the summary names
// each report as older than the retention window with the flag that keeps
// them; --retention 0 then stores them.
func TestImportOfAnOldArchive(t *testing.T) {
	dataDir := newDataDir(t)
	dd := "--data-dir=" + dataDir
	dir := t.TempDir()
	for i := range 3 {
		begin := time.Date(2019, 3, 1+i, 0, 0, 0, 0, time.UTC)
		xml := reportgen.Generate(int64(40+i), 5, reportgen.Options{Domain: "example.com", Begin: begin})
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("r%d.xml", i)), xml, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := run(t, nil, dd, "import", dir)
	for _, want := range []string{"Imported 0 aggregate reports", "Not stored: 3 reports older than the retention window (400d); --retention to keep them",
		"too old      " + filepath.Join(dir, "r0.xml"), "for example.com, 2019-03-01"} {
		if !strings.Contains(out, want) {
			t.Errorf("import output lacks %q (exit %d):\n%s%s", want, code, out, errOut)
		}
	}
	code, out, _ = run(t, nil, dd, "import", "--json", dir)
	var sum imports.Summary
	if err := json.Unmarshal([]byte(out), &sum); err != nil || code != 0 || sum.Expired != 3 || len(sum.ExpiredReports) != 3 ||
		sum.ExpiredReports[0].Window != "400d" || sum.Imported != 0 || sum.Quarantined != 0 {
		t.Fatalf("import --json: exit %d %v %+v", code, err, sum)
	}
	if code, out, _ = run(t, nil, dd, "import", "--retention", "bogus", dir); code != 2 {
		t.Errorf("--retention bogus: exit %d, want 2\n%s", code, out)
	}
	code, out, _ = run(t, nil, dd, "import", "--json", "--retention", "0", dir)
	if err := json.Unmarshal([]byte(out), &sum); err != nil || code != 0 || sum.Imported != 3 || sum.Expired != 0 {
		t.Fatalf("import --retention 0: exit %d %v %+v", code, err, sum)
	}
}

// TestQuarantineOnceAndBulkDelete ensures a re-run import of files that
// go to the quarantine does not add them twice, and that quarantine
// delete --older-than and --all remove entries in bulk, with their bad
// combinations refused.
func TestQuarantineOnceAndBulkDelete(t *testing.T) {
	dd := "--data-dir=" + newDataDir(t)
	dir := t.TempDir()
	for i := range 3 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("junk%d.txt", i)), []byte(fmt.Sprintf("not a report %d\n", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	count := func() int {
		t.Helper()
		code, out, _ := run(t, nil, dd, "quarantine", "list", "--json")
		var list struct{ Total int }
		if err := json.Unmarshal([]byte(out), &list); err != nil || code != 0 {
			t.Fatalf("quarantine list: exit %d %v\n%s", code, err, out)
		}
		return list.Total
	}
	for range 2 {
		if code, out, errOut := run(t, nil, dd, "import", dir); code != 0 {
			t.Fatalf("import: exit %d\n%s%s", code, out, errOut)
		}
	}
	if n := count(); n != 3 {
		t.Fatalf("%d entries after importing 3 junk files twice, want 3", n)
	}
	for _, args := range [][]string{{"--all", "--older-than", "1d"}, {"--all", "someid"}, {}, {"--older-than", "soon"}} {
		if code, _, _ := run(t, nil, append([]string{dd, "quarantine", "delete"}, args...)...); code != 2 {
			t.Errorf("quarantine delete %v: exit %d, want 2", args, code)
		}
	}
	if code, out, _ := run(t, nil, dd, "quarantine", "delete", "--older-than", "1d"); code != 0 || !strings.Contains(out, "Deleted 0 quarantine entries.") {
		t.Errorf("--older-than 1d: exit %d %s", code, out)
	}
	if code, out, _ := run(t, nil, dd, "quarantine", "delete", "--all"); code != 0 || !strings.Contains(out, "Deleted 3 quarantine entries.") {
		t.Errorf("--all: exit %d %s", code, out)
	}
	if n := count(); n != 0 {
		t.Errorf("%d entries after --all", n)
	}
}

// TestCompactAndCompactedBackup ensures 'dmarcd compact' gives back the
// space of deleted data (tx.Check clean after), refuses while another
// process holds the database, and that 'backup' writes a compacted copy.
func TestCompactAndCompactedBackup(t *testing.T) {
	dataDir := newDataDir(t)
	dd := "--data-dir=" + dataDir
	g := &globalOptions{DataDir: dataDir}
	db, err := g.openStore(false)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 100 {
		raw := append([]byte(fmt.Sprintf("Subject: %d\r\n\r\n", i)), make([]byte, 100_000)...)
		item := &store.QuarantineItem{Entry: store.QuarantineEntry{Source: "import", Name: fmt.Sprint(i), Reason: "junk", Size: int64(len(raw))}, Raw: raw}
		if _, err := db.NewIngester().Commit(&store.IngestBatch{Quarantine: []*store.QuarantineItem{item}}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, item.Entry.ID)
	}
	for _, id := range ids[:50] {
		if err := db.DeleteQuarantine(id); err != nil {
			t.Fatal(err)
		}
	}
	if code, _, errOut := run(t, nil, dd, "compact"); code != 1 || !strings.Contains(errOut, "in use") {
		t.Errorf("compact while the database is held: exit %d %s", code, errOut)
	}
	db.Close()
	before := fileSize(t, g.dbPath())

	backup := filepath.Join(t.TempDir(), "b.db")
	code, out, errOut := run(t, nil, dd, "--json", "backup", backup)
	var b struct{ Bytes, BytesUncompacted int64 }
	if err := json.Unmarshal([]byte(out), &b); err != nil || code != 0 || b.Bytes != fileSize(t, backup) || b.Bytes > before*6/10 {
		t.Fatalf("backup: exit %d %v %+v (database %d bytes)\n%s%s", code, err, b, before, out, errOut)
	}
	if err := store.VerifyFile(backup); err != nil {
		t.Errorf("compacted backup: %v", err)
	}

	code, out, errOut = run(t, nil, dd, "compact")
	if code != 0 || !strings.Contains(out, "Compacted ") {
		t.Fatalf("compact: exit %d\n%s%s", code, out, errOut)
	}
	if after := fileSize(t, g.dbPath()); after > before*6/10 {
		t.Errorf("compact: %d -> %d bytes", before, after)
	}
	db, err = g.openStore(true)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Check(); err != nil {
		t.Errorf("tx.Check after compact: %v", err)
	}
	if _, total, _ := db.ListQuarantine(store.Page{Page: 1, Limit: 1}); total != 50 {
		t.Errorf("%d entries after compact, want 50", total)
	}
	if code, _, errOut := run(t, nil, "--data-dir", t.TempDir(), "compact"); code != 1 || !strings.Contains(errOut, "no database") {
		t.Errorf("compact without a database: exit %d %s", code, errOut)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestImportStopsWhenTheServerGoesAway ensures an import through the
// socket stops at once when the server goes away mid-way (here: its
// pipeline stops after the third input, as when serve shuts down), in
// either mode, saying how many inputs were imported and that re-running is
// safe, instead of a failure per remaining file; re-running then stores
// the rest, nothing twice. (admin's TestImportServerGone and
// TestHandOverServerGone drop the connection instead.)
func TestImportStopsWhenTheServerGoesAway(t *testing.T) {
	for _, mode := range []string{"read", "hand-over"} {
		t.Run(mode, func(t *testing.T) {
			// The server's pipeline stops once three inputs are stored;
			// the one it restarts with (serve) runs until the test ends.
			var stored atomic.Int32
			var env *ingesttest.Env
			env = ingesttest.NewWith(t, func(c *ingest.Config) {
				c.Logger = slog.New(&logHook{each: func(r slog.Record) {
					if r.Message == "ingested" && stored.Add(1) == 3 {
						env.Stop() // the next input finds the pipeline stopped
					}
				}})
			}, "acme/example.com/abc")
			db, dataDir := env.DB, t.TempDir()
			g := &globalOptions{DataDir: dataDir}
			serve := func(p *ingest.Pipeline) *http.Server {
				ln, err := admin.Listen(g.socketPath())
				if err != nil {
					t.Fatal(err)
				}
				srv := &http.Server{Handler: admin.Handler(&admin.Local{DB: db, Pipeline: p}, slog.New(slog.DiscardHandler))}
				go srv.Serve(ln)
				return srv
			}
			dir := t.TempDir()
			begin := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -2)
			const files = 12
			for i := range files {
				xml := reportgen.Generate(int64(100+i), 3, reportgen.Options{Domain: "example.com", Begin: begin})
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("r%02d.xml", i)), xml, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			args := []string{"--data-dir", dataDir, "import", "--jobs", "1"}
			if mode == "hand-over" {
				args = append(args, "--hand-over")
			}
			srv := serve(env.Pipeline)
			code, out, errOut := run(t, nil, append(args, dir)...)
			srv.Close()
			if code != 1 || !strings.Contains(errOut, "the server went away after 3 inputs of 12 files were imported") ||
				!strings.Contains(errOut, "run the same import again") {
				t.Errorf("import with the server gone: exit %d\n%s%s", code, out, errOut)
			}
			if strings.Count(out, "failed       ") != 0 {
				t.Errorf("a failure line per remaining file:\n%s", out)
			}
			srv = serve(runPipelineOn(t, db))
			defer srv.Close()
			code, out, errOut = run(t, nil, append(args, "--json", dir)...)
			var sum imports.Summary
			if err := json.Unmarshal([]byte(out), &sum); err != nil || code != 0 || sum.Imported+sum.Duplicates != files || sum.Duplicates != 3 {
				t.Fatalf("re-run: exit %d %v %+v\n%s", code, err, sum, errOut)
			}
			org, _ := db.FindOrganization("acme")
			if _, total, _ := db.ListReports(org.ID, store.ReportFilter{Page: store.Page{Page: 1, Limit: 1}}); total != files {
				t.Errorf("%d reports stored, want %d", total, files)
			}
		})
	}
}

// logHook is a log handler that calls each with every record, whatever
// its level, and writes nothing. each may be called concurrently.
type logHook struct{ each func(slog.Record) }

func (h *logHook) Enabled(context.Context, slog.Level) bool { return true }

func (h *logHook) Handle(_ context.Context, r slog.Record) error {
	h.each(r)
	return nil
}

func (h *logHook) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h *logHook) WithGroup(string) slog.Handler { return h }
