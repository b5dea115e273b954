// Command payments runs the oke payments demo (see package app, and
// DESIGN.md section 6 for its contract). `oke serve` runs the same.
//
// For profiling, OKE_PPROF=ADDR (e.g. 127.0.0.1:6060) also serves
// net/http/pprof on ADDR, a listener of its own (off unless set).
package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/okengine/oke/examples/payments/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop) // a second signal stops the process at once
	if addr := os.Getenv("OKE_PPROF"); addr != "" {
		servePprof(addr)
	}
	err := app.Main(ctx, "payments", os.Args[1:], os.Stdout, os.Stderr)
	os.Exit(app.Exit(os.Stderr, "payments", err))
}

// servePprof serves the runtime profiles on addr, apart from the demo's mux.
func servePprof(addr string) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	// Bounded like the demo's own server; the write timeout leaves room
	// for a CPU profile or trace of up to a minute and a half.
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: 30 * time.Second, WriteTimeout: 2 * time.Minute, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: 64 << 10}
	go func() {
		if err := srv.ListenAndServe(); err != nil {
			fmt.Fprintf(os.Stderr, "payments: pprof on %s: %v\n", addr, err)
		}
	}()
	fmt.Fprintf(os.Stderr, "payments: pprof on http://%s/debug/pprof/\n", addr)
}
