package e2e

import (
	"debug/buildinfo"
	"encoding/json"
	"strings"
	"testing"
)

// TestVersionShowsRevision ensures 'dmarcd version' and /metrics'
// dmarcd_build_info show the VCS revision stamped into the binary (built
// with -buildvcs=auto: stamped in a git clone), not just "dev".
func TestVersionShowsRevision(t *testing.T) {
	bi, err := buildinfo.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	revision := ""
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			revision = s.Value
		}
	}
	var v struct {
		Version       string `json:"version"`
		Revision      string `json:"revision"`
		SchemaVersion int    `json:"schema_version"`
	}
	out := MustCLI(t, "version", "--json")
	if err := json.Unmarshal([]byte(out.Stdout), &v); err != nil {
		t.Fatalf("version --json: %v\n%s", err, out.Stdout)
	}
	if v.Revision != revision || v.Version == "" || v.SchemaVersion == 0 {
		t.Errorf("version --json = %+v, want revision %q", v, revision)
	}
	text := MustCLI(t, "version").Stdout
	if revision != "" && !strings.Contains(text, "revision "+revision[:12]) {
		t.Errorf("dmarcd version does not show the revision %s:\n%s", revision, text)
	}
	if revision == "" {
		t.Logf("the binary carries no VCS revision (not built in a git clone); checked the fallback only")
		if !strings.Contains(text, "no VCS revision stamped") {
			t.Errorf("dmarcd version does not say the revision is unknown:\n%s", text)
		}
	}

	s := StartServer(t, Options{})
	metrics := string(s.Do("GET", "/metrics", "", nil).Body)
	if !strings.Contains(metrics, `dmarcd_build_info{version="`+v.Version+`",revision="`+revision+`"`) {
		t.Errorf("/metrics lacks dmarcd_build_info with revision %q:\n%s", revision, grepHookLines(metrics, "build_info"))
	}
}
