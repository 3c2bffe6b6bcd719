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

func main() { os.Exit(run()) }

// run runs the command line under a context that SIGINT and SIGTERM
// cancel and returns its exit code; its deferred calls run before main
// exits.
func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// DMARCD_CPUPROFILE=file writes a CPU profile of the command (the
	// benchmarks profile import and serve with it).
	if path := os.Getenv("DMARCD_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			defer f.Close()
			if pprof.StartCPUProfile(f) == nil {
				defer pprof.StopCPUProfile()
			}
		}
	}
	root := cli.NewRootCommand(os.Stdin, os.Stdout, os.Stderr)
	root.SetArgs(os.Args[1:])
	return cli.ExitCode(root, root.ExecuteContext(ctx))
}
