package cli

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/dmarcd/dmarcd/internal/duration"
)

// durationVar defines a duration flag that also takes days ("400d"): every
// duration flag of dmarcd goes through here (TestDurationFlagsTakeDays).
func durationVar(f *pflag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	f.Var(duration.NewValue(p, def), name, usage)
}

// durationSliceVar is durationVar for a comma-separated list.
func durationSliceVar(f *pflag.FlagSet, p *[]time.Duration, name string, def []time.Duration, usage string) {
	f.Var(duration.NewSliceValue(p, def), name, usage)
}
