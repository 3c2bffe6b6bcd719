// Package buildinfo tells which build of dmarcd is running: the release
// version set at link time, else the module version, and the VCS revision
// and commit time the Go toolchain stamps into binaries built from a
// checkout (go build; not go run or go test).
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Info describes one build. Empty fields are unknown.
type Info struct {
	// Version is the release version ("v1.2.3"), or "dev".
	Version string `json:"version"`
	// Revision is the VCS commit the binary was built from.
	Revision string `json:"revision"`
	// Time is the commit's time, RFC 3339.
	Time string `json:"revision_time"`
	// Modified says the work tree had uncommitted changes.
	Modified bool `json:"modified"`
	// GoVersion is the toolchain that built the binary.
	GoVersion string `json:"go_version"`
}

// Read returns the running binary's build information; ldflagsVersion,
// when set, wins over the module version.
func Read(ldflagsVersion string) Info {
	bi, _ := debug.ReadBuildInfo()
	return fromBuildInfo(bi, ldflagsVersion)
}

func fromBuildInfo(bi *debug.BuildInfo, ldflagsVersion string) Info {
	in := Info{Version: ldflagsVersion, GoVersion: runtime.Version()}
	if bi == nil {
		if in.Version == "" {
			in.Version = "dev"
		}
		return in
	}
	if bi.GoVersion != "" {
		in.GoVersion = bi.GoVersion
	}
	if in.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		in.Version = bi.Main.Version
	}
	if in.Version == "" {
		in.Version = "dev"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.time":
			in.Time = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// ShortRevision is the first 12 characters of Revision.
func (in Info) ShortRevision() string {
	if len(in.Revision) > 12 {
		return in.Revision[:12]
	}
	return in.Revision
}

// String is one line: "v1.2.3 (revision 0123456789ab, 2026-11-20T10:00:00Z, modified, go1.26.8)".
func (in Info) String() string {
	s := in.Version + " ("
	if in.Revision != "" {
		s += "revision " + in.ShortRevision() + ", "
		if in.Time != "" {
			s += in.Time + ", "
		}
		if in.Modified {
			s += "modified, "
		}
	} else {
		s += "no VCS revision stamped, "
	}
	return s + in.GoVersion + ")"
}
