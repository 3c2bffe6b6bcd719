// Command dmarcd is a self-hosted DMARC monitoring service. See README.md
// and 'dmarcd --help'.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/dmarcd/dmarcd/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// DMARCD_CPUPROFILE=file writes a CPU profile of the command (the
	// benchmarks profile import and serve with it).
	if path := os.Getenv("DMARCD_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil && pprof.StartCPUProfile(f) == nil {
			defer f.Close()
			defer pprof.StopCPUProfile()
		}
	}
	code := cli.Execute(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	exit(code)
}

// exit ends the process after the deferred profile is written.
func exit(code int) {
	pprof.StopCPUProfile()
	os.Exit(code)
}
