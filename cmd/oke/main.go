// Command oke is the command-line tool of the oke framework. Run `oke help`.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/okengine/oke/examples/payments/app"
	"github.com/okengine/oke/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop) // a second signal stops the process at once
	os.Exit(cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, serve))
}

// serve is `oke serve`: the payments demo, with its flags.
func serve(ctx context.Context, name string, args []string, stdout, stderr io.Writer) int {
	return app.Exit(stderr, name, app.Main(ctx, name, args, stdout, stderr))
}
