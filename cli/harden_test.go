package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/ingest/imports"
	"github.com/dmarcd/dmarcd/internal/reportgen"
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
