package cli

import (
	"strconv"

	"github.com/dmarcd/dmarcd/internal/buildinfo"
	"github.com/dmarcd/dmarcd/metrics"
)

// registerBuildInfo adds dmarcd_build_info: 1, labelled with the build.
func registerBuildInfo(reg *metrics.Registry) {
	in := buildinfo.Read(Version)
	reg.Info("dmarcd_build_info", "The running dmarcd build: version, VCS revision and time, Go version.",
		"version", in.Version, "revision", in.Revision, "revision_time", in.Time,
		"modified", strconv.FormatBool(in.Modified), "goversion", in.GoVersion)
}
