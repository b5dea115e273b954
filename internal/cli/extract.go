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

// runExtract is `oke extract [-o DIR] [-json] [PACKAGES]`: it infers the
// flows' effects, checks their options, and writes DIR/oke.contract.json,
// DIR/openapi.json and an oke_contract_gen.go in each package with flows.
// Exit status: 0, 1 when a flow breaks a rule (nothing is written), 2 for a
// usage or load error.
func runExtract(_ context.Context, name string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", ".", "write oke.contract.json and openapi.json in this `DIR`")
	asJSON := fs.Bool("json", false, `print the broken rules as a JSON array of {"file","line","col","flow","rule","message"} on stdout`)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: %s [-o DIR] [-json] [PACKAGES]

Finds the flows of PACKAGES (default ./...), infers the effects of each from
its code, checks their options, and writes DIR/oke.contract.json,
DIR/openapi.json (OpenAPI 3.1) and, in each package that declares flows,
oke_contract_gen.go, which registers the contract with the app. A flow that
breaks a rule is reported as FILE:LINE:COL: flow "NAME": WHAT; FIX on stderr
and nothing is written.

From go generate, in the package that declares the flows:

  //go:generate go run github.com/okengine/oke/cmd/oke extract -o .. .

Exit status: 0; 1 when a flow breaks a rule; 2 for a usage or load error.

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
	if *asJSON {
		// The broken rules (severity "error"), then the warnings
		// (severity "warning": effects outside fx, what extract could
		// not read), which do not change the exit status.
		diags := append(append([]extract.Diagnostic{}, res.Diagnostics...), res.Warnings...)
		b, _ := json.MarshalIndent(diags, "", "  ")
		stdout.Write(append(b, '\n'))
	} else {
		for _, d := range res.Diagnostics {
			fmt.Fprintln(stderr, d)
		}
	}
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

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
