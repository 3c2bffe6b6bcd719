package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/internal/reportgen"
)

// TestReportsCommands ensures an admin reads reports without curl: list
// (table and --json, pages by cursor), show with records, stats per
// domain, and clear errors for an unknown domain or report.
func TestReportsCommands(t *testing.T) {
	dir := newDataDir(t) // acme owns example.com
	dd := "--data-dir=" + dir
	files := t.TempDir()
	now := time.Now().UTC().Truncate(24 * time.Hour)
	for i := int64(1); i <= 3; i++ {
		data := reportgen.Generate(i, 4, reportgen.Options{Domain: "example.com", Begin: now.Add(-time.Duration(i) * 24 * time.Hour)})
		if err := os.WriteFile(filepath.Join(files, "r"+string(rune('0'+i))+".xml"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if code, out, errOut := run(t, nil, dd, "import", files); code != 0 {
		t.Fatalf("import: %s %s", out, errOut)
	}
	code, out, errOut := run(t, nil, dd, "reports", "list")
	if code != 0 || strings.Count(out, "example.com") != 3 || !strings.Contains(out, "3 of 3 reports of organization acme") {
		t.Fatalf("reports list: %d\n%s%s", code, out, errOut)
	}
	var page struct {
		Reports []struct {
			ID string `json:"id"`
		} `json:"reports"`
		Total      int     `json:"total"`
		NextCursor *string `json:"next_cursor"`
	}
	code, out, _ = run(t, nil, dd, "reports", "list", "--json", "--limit", "2", "--domain", "Example.COM")
	if code != 0 || json.Unmarshal([]byte(out), &page) != nil || len(page.Reports) != 2 || page.Total != 3 || page.NextCursor == nil {
		t.Fatalf("list --json --limit 2: %d %s", code, out)
	}
	id := page.Reports[0].ID
	code, out, _ = run(t, nil, dd, "reports", "list", "--json", "--limit", "2", "--cursor", *page.NextCursor)
	if code != 0 || json.Unmarshal([]byte(out), &page) != nil || len(page.Reports) != 1 || page.Reports[0].ID == id || page.NextCursor != nil {
		t.Errorf("second page: %d %s", code, out)
	}
	code, out, errOut = run(t, nil, dd, "reports", "show", strings.ToUpper(id))
	if code != 0 || !strings.Contains(out, "Report "+id) || !strings.Contains(out, "SOURCE IP") || strings.Count(out, "\n") < 10 {
		t.Errorf("show: %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = run(t, nil, dd, "reports", "stats", "--days", "7")
	if code != 0 || !strings.Contains(out, "example.com") || !strings.Contains(out, "PASS RATE") {
		t.Errorf("stats: %d\n%s%s", code, out, errOut)
	}
	var stats struct {
		Domains []struct {
			Name       string `json:"name"`
			Statistics struct {
				ReportCount int `json:"report_count"`
			} `json:"statistics"`
		} `json:"domains"`
	}
	code, out, _ = run(t, nil, dd, "reports", "stats", "--json", "--domain", "example.com")
	if code != 0 || json.Unmarshal([]byte(out), &stats) != nil || len(stats.Domains) != 1 || stats.Domains[0].Statistics.ReportCount != 3 {
		t.Errorf("stats --json: %d %s", code, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"reports", "list", "--domain", "nope.example"}, "has no domain nope.example"},
		{[]string{"reports", "show", "00000000-0000-7000-8000-000000000000"}, "dmarcd reports list shows the ids"},
		{[]string{"reports", "list", "--org", "nobody"}, "not found"},
		{[]string{"reports", "stats", "--days", "0"}, "days must be 1 to 366"},
	} {
		if code, _, errOut := run(t, nil, append([]string{dd}, c.args...)...); code != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: %d %s", c.args, code, errOut)
		}
	}
	run(t, nil, dd, "org", "create", "globex")
	if code, _, errOut := run(t, nil, dd, "reports", "list"); code != 1 || !strings.Contains(errOut, "choose one with --org") {
		t.Errorf("two organizations without --org: %d %s", code, errOut)
	}
}
