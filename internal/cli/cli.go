// Package cli holds the commands of the oke command-line tool (cmd/oke).
// Each command parses its own flags with the standard flag package.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Version is the tool's version. Release builds set it with
// -ldflags "-X github.com/okengine/oke/internal/cli.Version=v1.2.3"; otherwise
// it comes from the module's build info, or "devel".
var Version = ""

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, name string, args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"serve", "run the payments demo API (same flags as examples/payments)", runServe},
		{"runs", "list, show, replay, cancel, resume and signal durable runs (ls, show, replay, cancel, resume, signal)", runRuns},
		{"idempotency", "show, delete and sweep Idempotency-Key rows (ls, show, delete, sweep)", runIdempotency},
		{"schedules", "list a running app's schedules (oke.Cron): next tick, last run", runSchedules},
		{"migrate", "create or update oke's tables in Postgres (-postgres DSN)", runMigrate},
		{"vet", "check durable flows for effects, clock and randomness outside steps (docs/vet.md)", runVet},
		{"extract", "infer the flows' effects, check their options, write the contract and OpenAPI", runExtract},
		{"gen", "generate code from the flows: gen client writes a typed Go client (docs/client.md)", runGen},
		{"version", "print the version of oke", runVersion},
		{"help", "show help for oke or for a command", runHelp},
	}
}

func lookup(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// ServeFunc runs `oke serve NAME ARGS…` and returns its exit code: the
// payments demo, which cmd/oke links in (this package does not import it).
type ServeFunc func(ctx context.Context, name string, args []string, stdout, stderr io.Writer) int

// Main runs the oke tool with args (without the program name) and returns
// the process exit code: 0 on success, 1 when a command fails, 2 for a
// usage mistake. ctx ends the running command (serve shuts down
// gracefully). serve runs `oke serve`; nil means the tool was built
// without the demo.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, serve ServeFunc) int {
	serveFn = serve
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help":
		usage(stdout)
		return 0
	case "-version", "--version":
		args[0] = "version"
	}
	c, ok := lookup(args[0])
	if !ok {
		fmt.Fprintf(stderr, "oke: unknown command %q\nRun 'oke help' for the list of commands.\n", args[0])
		return 2
	}
	return c.run(ctx, "oke "+c.name, args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	var b strings.Builder
	b.WriteString(`oke is the command-line tool of the oke framework: HTTP APIs whose
handlers change the world once, even when clients retry.

Usage:

  oke <command> [arguments]

Commands:

`)
	for _, c := range commands() {
		fmt.Fprintf(&b, "  %-12s %s\n", c.name, c.summary)
	}
	b.WriteString(`
Run 'oke help <command>' for more about a command.

runs and idempotency work on one of three stores: a running app's admin API
(-addr URL, default http://127.0.0.1:8080), a data folder no app holds
(-data DIR), or a Postgres database (-postgres DSN [-schema NAME]).
`)
	io.WriteString(w, b.String())
}

// serveFn is Main's serve.
var serveFn ServeFunc

func runServe(ctx context.Context, name string, args []string, stdout, stderr io.Writer) int {
	if serveFn == nil {
		fmt.Fprintf(stderr, "%s: this build of oke has no demo to serve; run go run github.com/okengine/oke/cmd/oke serve, or the demo itself: go run github.com/okengine/oke/examples/payments\n", name)
		return 1
	}
	return serveFn(ctx, name, args, stdout, stderr)
}

func runHelp(ctx context.Context, name string, args []string, stdout, stderr io.Writer) int {
	switch len(args) {
	case 0:
		usage(stdout)
		return 0
	case 1:
		c, ok := lookup(args[0])
		if !ok {
			fmt.Fprintf(stderr, "oke help: unknown command %q\nRun 'oke help' for the list of commands.\n", args[0])
			return 2
		}
		if c.name == "help" {
			fmt.Fprintln(stdout, "Usage: oke help [command]\n\nShows help for oke, or for one command.")
			return 0
		}
		// Every other command prints its usage for -h, on its stderr.
		c.run(ctx, "oke "+c.name, []string{"-h"}, stdout, stdout)
		return 0
	}
	fmt.Fprintln(stderr, "Usage: oke help [command]")
	return 2
}

// parseExit is the exit code after a flag parse error, which the flag
// package has already reported.
func parseExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}
