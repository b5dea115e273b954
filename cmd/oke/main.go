// Command oke is the command-line tool of the oke framework. Run `oke help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/okengine/oke/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop) // a second signal stops the process at once
	os.Exit(cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr))
}
