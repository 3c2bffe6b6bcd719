// Command dmarcd is a self-hosted DMARC monitoring service. See README.md
// and 'dmarcd --help'.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/dmarcd/dmarcd/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Execute(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
