// Package cli holds the commands of the oke command-line tool (cmd/oke).
// Each command parses its own flags with the standard flag package.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
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
		{"runs", "list, show, replay, cancel and resume durable runs (ls, show, replay, cancel, resume)", runRuns},
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

runs and idempotency read a running app's admin API (-addr URL, default
http://127.0.0.1:8080) or, while no app holds it, a data folder (-data DIR).
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

func runVersion(_ context.Context, name string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	js := fs.Bool("json", false, "print the versions as JSON")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s [-json]\n\nPrints the version of oke and of the Go toolchain that built it.\n", name)
	}
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", name, fs.Arg(0))
		return 2
	}
	if *js {
		b, _ := json.Marshal(map[string]string{"oke": version(), "go": runtime.Version(), "os": runtime.GOOS, "arch": runtime.GOARCH})
		fmt.Fprintf(stdout, "%s\n", b)
		return 0
	}
	fmt.Fprintf(stdout, "oke %s (%s %s/%s)\n", version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return 0
}

// version is Version, else what the build info says.
func version() string {
	if Version != "" {
		return Version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel (built without module support)"
	}
	return buildVersion(bi)
}

// buildVersion is the version a binary's build info gives: the main
// module's version (a release, `go install …@v1.2.3`, or the pseudo-version
// go build stamps from the git checkout), else the VCS revision it was
// built from, else "devel" and why.
func buildVersion(bi *debug.BuildInfo) string {
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, at string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "devel (no version or VCS revision in this build: it was built outside a git checkout or with -buildvcs=false; `go install github.com/okengine/oke/cmd/oke@latest` gives a release version)"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	v := "devel " + rev
	if dirty {
		v += "+dirty"
	}
	if at != "" {
		v += " (" + at + ")"
	}
	return v
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
