package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/okengine/oke/extract"
)

// runExtract is `oke extract [-check] [-o DIR] [-json] [PACKAGES]`: it
// infers the flows' effects, checks their options, and writes
// DIR/oke.contract.json, DIR/openapi.json and an oke_contract_gen.go in
// each package with flows; with -check it writes nothing and compares those
// files with what it would write. Exit status: 0, 1 when a flow breaks a
// rule (nothing is written) or, with -check, when a contract is stale, 2 for
// a usage or load error.
func runExtract(_ context.Context, name string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", ".", "write oke.contract.json and openapi.json in this `DIR`")
	asJSON := fs.Bool("json", false, `print the broken rules (and, with -check, the stale contracts) as a JSON array of {"file","line","col","flow","rule","message"} on stdout`)
	check := fs.Bool("check", false, "write nothing; exit 1 when the files in DIR and the packages' oke_contract_gen.go differ from what extract would write (a stale contract)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: %[1]s [-o DIR] [-json] [PACKAGES]
       %[1]s -check [-o DIR] [-json] [PACKAGES]

Finds the flows of PACKAGES (default ./...), infers the effects of each from
its code, checks their options, and writes DIR/oke.contract.json,
DIR/openapi.json (OpenAPI 3.1) and, in each package that declares flows,
oke_contract_gen.go, which registers the contract with the app. A flow that
breaks a rule is reported as FILE:LINE:COL: flow "NAME": WHAT; FIX on stderr
and nothing is written.

From go generate, in the package that declares the flows:

  //go:generate go tool oke extract -o .. .

(after go get -tool github.com/okengine/oke/cmd/oke; see docs/extract.md)

With -check it writes nothing: it compares the files with what it would
write, flow by flow (each flow's digest of its code, its effects, options,
bindings and schemas; not line numbers), and reports each stale flow as
FILE:LINE:COL: flow "NAME": its contract is stale (…); fix: …. Run it in CI
with the arguments of the go:generate line, from the module root, e.g.

  oke extract -check -o examples/payments ./examples/payments/app

Exit status: 0; 1 when a flow breaks a rule, or with -check when a contract
is stale or missing; 2 for a usage or load error.

Flags:
`, name)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	if *out == "" {
		fmt.Fprintf(stderr, "%s: -o needs a directory\n", name)
		return 2
	}
	res, err := extract.Run(extract.Config{Patterns: fs.Args()})
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err) // a *extract.LoadError
		return 2
	}
	for _, w := range res.Warnings {
		w.Message = "warning: " + w.Message
		fmt.Fprintln(stderr, w)
	}
	if *check {
		return checkExtract(name, res, *out, *asJSON, stdout, stderr)
	}
	printDiags(res.Diagnostics, res.Warnings, *asJSON, stdout, stderr)
	if len(res.Diagnostics) > 0 {
		fmt.Fprintf(stderr, "%s: %d broken %s; nothing written\n", name, len(res.Diagnostics), plural(len(res.Diagnostics), "rule", "rules"))
		return 1
	}
	written, err := res.Write(*out)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	wd, _ := os.Getwd()
	for _, w := range written {
		if r, err := filepath.Rel(wd, w); err == nil {
			w = r
		}
		fmt.Fprintf(stderr, "%s: wrote %s\n", name, w)
	}
	return 0
}

// checkExtract is `oke extract -check`: nothing is written; the stale
// contracts (and broken rules, which keep extract from writing a fresh one)
// are reported, with a summary line on stderr.
func checkExtract(name string, res *extract.Result, out string, asJSON bool, stdout, stderr io.Writer) int {
	stale, err := res.Check(out)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	diags := append(append([]extract.Diagnostic{}, res.Diagnostics...), stale...)
	printDiags(diags, res.Warnings, asJSON, stdout, stderr)
	n := len(res.Contract.Flows)
	switch {
	case len(res.Diagnostics) > 0:
		fmt.Fprintf(stderr, "%s: %d broken %s and %d stale %s; nothing written\n", name,
			len(res.Diagnostics), plural(len(res.Diagnostics), "rule", "rules"), len(stale), plural(len(stale), "contract", "contracts"))
		return 1
	case len(stale) > 0:
		fmt.Fprintf(stderr, "%s: %d of %d %s stale or missing in %s; nothing written\n", name,
			len(stale), n, plural(n, "flow's contract is", "flows' contracts are"), out)
		return 1
	}
	fmt.Fprintf(stderr, "%s: the contract of %d %s in %s is fresh\n", name, n, plural(n, "flow", "flows"), out)
	return 0
}

// printDiags prints diagnostics on stderr, or with asJSON as a JSON array
// on stdout: the broken rules (and stale contracts), then the warnings
// (severity "warning": effects outside fx, what extract could not read),
// which do not change the exit status. (Warnings are on stderr already.)
func printDiags(diags, warnings []extract.Diagnostic, asJSON bool, stdout, stderr io.Writer) {
	if asJSON {
		all := append(append([]extract.Diagnostic{}, diags...), warnings...)
		b, _ := json.MarshalIndent(all, "", "  ")
		stdout.Write(append(b, '\n'))
		return
	}
	for _, d := range diags {
		fmt.Fprintln(stderr, d)
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
