// Command payments runs the oke payments demo (see package app, and
// DESIGN.md section 6 for its contract). `oke serve` runs the same.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/okengine/oke/examples/payments/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop) // a second signal stops the process at once
	err := app.Main(ctx, "payments", os.Args[1:], os.Stdout, os.Stderr)
	os.Exit(app.Exit(os.Stderr, "payments", err))
}
