package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

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
	code, out, errOut := run(t, nil, dd, "import", dir)
	if code != 0 || !strings.Contains(out, "(1 report, 4 records, 1 record skipped)") || !strings.Contains(out, "1 record skipped as unusable") {
		t.Fatalf("import: exit %d\n%s%s", code, out, errOut)
	}
	dd2 := "--data-dir=" + newDataDir(t)
	code, out, _ = run(t, nil, dd2, "import", "--json", dir)
	var sum imports.Summary
	if err := json.Unmarshal([]byte(out), &sum); err != nil || code != 0 || sum.RecordsSkipped != 1 {
		t.Fatalf("import --json: exit %d %v %+v\n%s", code, err, sum, out)
	}
}
