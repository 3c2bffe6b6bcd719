package buildinfo

import (
	"runtime/debug"
	"testing"
)

// TestFromBuildInfo ensures the VCS settings the toolchain stamps are read
// and the version falls back from ldflags to the module version to "dev".
func TestFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123"},
		{Key: "vcs.time", Value: "2026-11-20T10:00:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}}
	in := fromBuildInfo(bi, "")
	want := "dev (revision 0123456789ab, 2026-11-20T10:00:00Z, modified, go1.26.8)"
	if got := in.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if in := fromBuildInfo(bi, "v1.2.3"); in.Version != "v1.2.3" {
		t.Errorf("ldflags version ignored: %q", in.Version)
	}
	bi.Main.Version = "v0.9.0"
	if in := fromBuildInfo(bi, ""); in.Version != "v0.9.0" {
		t.Errorf("module version ignored: %q", in.Version)
	}
	if in := fromBuildInfo(&debug.BuildInfo{GoVersion: "go1.26.8"}, ""); in.String() != "dev (no VCS revision stamped, go1.26.8)" {
		t.Errorf("unstamped: %q", in.String())
	}
	if in := fromBuildInfo(nil, ""); in.Version != "dev" || in.GoVersion == "" {
		t.Errorf("no build info: %+v", in)
	}
}
