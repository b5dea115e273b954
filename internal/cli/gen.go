package cli

import (
	"context"
	"flag"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/okengine/oke/extract"
	"github.com/okengine/oke/extract/clientgen"
)

// runGen is `oke gen client …`: the code generators. (client is the only
// one so far.)
func runGen(ctx context.Context, name string, args []string, stdout, stderr io.Writer) int {
	usage := func(w io.Writer) {
		fmt.Fprintf(w, `Usage: %s client -o DIR [-pkg NAME] [-import-types | -module PATH] [PACKAGES]

Generators:

  client    write a typed Go client for the flows of PACKAGES

Run '%s client -h' for its flags.
`, name, name)
	}
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help":
		usage(stdout)
		return 0
	case "client":
		return runGenClient(ctx, name+" client", args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "%s: unknown generator %q; the one there is: client\n", name, args[0])
	return 2
}

// runGenClient is `oke gen client -o DIR [-pkg NAME] [-import-types |
// -module PATH] [PACKAGES]`: it writes DIR/oke_client_gen.go, a typed
// client of the flows of PACKAGES — standalone by default (copies of the
// types), importing the app's packages with -import-types — and, with
// -module, DIR/go.mod. Exit status: 0; 1 when a flow breaks extract's
// rules or the client cannot be generated (nothing is written); 2 for a
// usage or load error.
func runGenClient(_ context.Context, name string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "write the client's package in this `DIR` (created if needed)")
	pkg := fs.String("pkg", "", "the client package's `NAME` (default: the package already in DIR, else DIR's base name)")
	importTypes := fs.Bool("import-types", false, "use the app's own Go types where the client may import them, instead of copies: the client then depends on the app's packages and everything they import")
	copyTypes := fs.Bool("copy-types", false, "copy every input and output type into the client: the default (kept for scripts that pass it)")
	module := fs.String("module", "", "make DIR a Go module of its own with this module `PATH`: writes DIR/go.mod (a standalone client written outside any module)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: %s -o DIR [-pkg NAME] [-import-types | -module PATH] [PACKAGES]

Writes DIR/%s, a Go package with a typed client for the flows of
PACKAGES (default ./...): one method per HTTP or RPC binding, grouped by
the first part of the flow's name, on github.com/okengine/oke/client —

  api, err := paymentsclient.New("http://127.0.0.1:8080")
  ch, meta, err := api.Payments.Charge(ctx, paymentsclient.ChargeIn{Amount: 1000, Currency: "usd"})

The client stands alone: its types are copies of the flows' input and
output types (same fields, same JSON), and it imports only the standard
library and github.com/okengine/oke/client, so a program that uses it
links neither the app nor the app's dependencies. -import-types uses the
app's own types instead where the client's package may import them.
Required flows always send an Idempotency-Key; flows that ignore the
header send none. See docs/client.md.

DIR may be outside the app's module: inside another module (which needs
github.com/okengine/oke for the client package: go get
github.com/okengine/oke/client), or in no module at all with -module
PATH, which writes DIR/go.mod too (then run go mod tidy in DIR).

From go generate, in the client's package (after go get -tool
github.com/okengine/oke/cmd/oke):

  //go:generate go tool oke gen client -o . -pkg paymentsclient ../app

Name the app's packages, not the client's: the generated file is left out
while PACKAGES load, so a stale client never stops its own regeneration.

Exit status: 0; 1 when a flow breaks extract's rules or the client cannot
be generated (nothing is written); 2 for a usage or load error.

Flags:
`, name, clientgen.FileName)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	if *out == "" {
		fmt.Fprintf(stderr, "%s: -o DIR is required: the directory of the client's package, e.g. -o ./apiclient\n", name)
		return 2
	}
	dir, err := filepath.Abs(*out)
	if err != nil {
		fmt.Fprintf(stderr, "%s: -o %s: %v\n", name, *out, err)
		return 2
	}
	if *pkg == "" {
		*pkg = packageIn(dir)
	}
	if *pkg == "" {
		fmt.Fprintf(stderr, "%s: -pkg NAME is required: %s is not a Go package name; pass e.g. -pkg apiclient\n", name, filepath.Base(dir))
		return 2
	}
	if !token.IsIdentifier(*pkg) || *pkg == "main" {
		fmt.Fprintf(stderr, "%s: -pkg %q is not a Go package name: give a lower-case identifier such as apiclient (not main)\n", name, *pkg)
		return 2
	}
	if err := clientgen.CheckDir(dir, *pkg); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	if *importTypes && *copyTypes {
		fmt.Fprintf(stderr, "%s: -import-types and -copy-types contradict each other: copies are the default; pass -import-types alone to use the app's own types\n", name)
		return 2
	}
	mod, err := clientModule(dir, *module, *importTypes)
	if err != nil {
		fmt.Fprintf(stderr, "%s: -o %s: %v\n", name, *out, err)
		return 2
	}
	importPath := mod.importPath

	// A client generated before may no longer compile (a type it names
	// changed): leave its code out while the packages load.
	overlay := map[string][]byte{}
	existing := filepath.Join(dir, clientgen.FileName)
	if src, err := os.ReadFile(existing); err == nil && clientgen.IsGenerated(src) {
		overlay[existing] = []byte(clientgen.Header + "\n\npackage " + *pkg + "\n")
	}
	res, err := extract.Run(extract.Config{Patterns: fs.Args(), Overlay: overlay})
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err) // a *extract.LoadError
		return 2
	}
	if len(res.Diagnostics) > 0 {
		for _, d := range res.Diagnostics {
			fmt.Fprintln(stderr, d)
		}
		fmt.Fprintf(stderr, "%s: %d broken %s (see oke extract); nothing written\n", name, len(res.Diagnostics), plural(len(res.Diagnostics), "rule", "rules"))
		return 1
	}
	src, err := clientgen.Generate(res, clientgen.Config{Package: *pkg, ImportPath: importPath, ImportTypes: *importTypes})
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v; nothing written\n", name, err)
		return 1
	}
	written, err := clientgen.Write(dir, src)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	fmt.Fprintf(stderr, "%s: wrote %s\n", name, relToWD(written))
	if mod.writeGoMod {
		gomod, err := writeGoMod(dir, mod.importPath)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return 1
		}
		fmt.Fprintf(stderr, "%s: wrote %s (module %s); run go mod tidy in %s to add github.com/okengine/oke (the client package) and go.sum\n", name, relToWD(gomod), mod.importPath, relToWD(dir))
	} else if mod.note != "" {
		fmt.Fprintf(stderr, "%s: note: %s\n", name, mod.note)
	}
	return 0
}

// relToWD is name relative to the working directory when it can be.
func relToWD(name string) string {
	if wd, err := os.Getwd(); err == nil {
		if r, err := filepath.Rel(wd, name); err == nil {
			return r
		}
	}
	return name
}

// packageIn is the name of the package already in dir, else dir's base
// name when it is a Go package name; "" when neither.
func packageIn(dir string) string {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, n), nil, parser.PackageClauseOnly)
		if err == nil {
			return f.Name.Name
		}
	}
	base := filepath.Base(dir)
	if base == "" || !token.IsIdentifier(base) || base == "main" {
		return ""
	}
	return base
}
