package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/tools/go/analysis/checker"
	"golang.org/x/tools/go/packages"

	"github.com/okengine/oke/vet"
)

// runVet is `oke vet [-json] [-tests=false] [PACKAGES]`: the analyzers of
// package vet over the packages (default ./...).
//
// It drives the analyzers in-process — go/packages loads the packages and
// golang.org/x/tools/go/analysis/checker runs them — rather than executing
// `go vet -vettool` with a second binary: the oke tool then needs nothing
// else on PATH, and the output and exit codes are its own (go vet exits 1
// for findings and for errors alike; oke vet exits 1 for findings and 2 for
// usage or load errors, and -json is one list of findings with their rules).
// The analyzers follow calls across packages with analysis facts, so the
// whole build is type-checked from source; the code outside the build's
// modules (the standard library, the module cache) without its function
// bodies (see parseFile). What it gives up is go vet's caching of results
// per package. `go vet -vettool=$(which oke-vet)` (cmd/oke-vet)
// runs the same analyzers.
func runVet(ctx context.Context, name string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, `print the findings on stdout as a JSON array of {"file","line","col","rule","message"}`)
	tests := fs.Bool("tests", true, "check the packages' test files too")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: %s [-json] [-tests=false] [PACKAGES]

Checks the durable flows of PACKAGES (default ./...) against the rules of
durable steps: effects, time.Now, randomness and new UUIDs outside a step;
step names computed from time, randomness or map order; goroutines that
use fx and are not waited for; the clock, randomness, ids, the environment,
mutable package variables, timers, raw I/O and select reached outside a
step, through helpers of any package; map order kept or answered.
//oke:ignore REASON on a line (or alone on the line before) silences it.
See docs/vet.md.

Each finding is printed on stderr as FILE:LINE:COL: message. Exit status:
0 when there is none, 1 when there are findings, 2 for a usage mistake or
packages that do not load (or type-check).

The same analyzers run as a vet tool:
  go vet -vettool=$(which oke-vet) ./...

Flags:
`, name)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	patterns := fs.Args()
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	findings, err := vetPackages(ctx, patterns, *tests)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	if *asJSON {
		if findings == nil {
			findings = []finding{}
		}
		b, err := json.MarshalIndent(findings, "", "  ")
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return 2
		}
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		for _, f := range findings {
			fmt.Fprintf(stderr, "%s:%d:%d: %s\n", f.File, f.Line, f.Col, f.Message)
		}
	}
	if len(findings) > 0 {
		return 1
	}
	return 0
}

// A finding is one diagnostic of oke vet.
type finding struct {
	File    string `json:"file"` // relative to the current directory when inside it
	Line    int    `json:"line"`
	Col     int    `json:"col"`
	Rule    string `json:"rule"` // the analyzer's name, e.g. "effectoutsidestep"
	Message string `json:"message"`
}

// loadMode is what the analyzers need of the packages they check and of
// their dependencies: the analyzers follow calls across packages through
// analysis facts (vet.Reach), which are computed from each dependency's
// syntax. Dependencies outside the build's modules (the standard library,
// the module cache) are parsed without function bodies (parseFile): the
// analyzers record no facts for them and need only their declarations.
const loadMode = packages.NeedName | packages.NeedFiles | packages.NeedCompiledGoFiles | packages.NeedImports |
	packages.NeedTypes | packages.NeedTypesSizes | packages.NeedSyntax | packages.NeedTypesInfo | packages.NeedModule |
	packages.NeedDeps

// parseFile parses a file for the analyzers; the function bodies of code
// outside the build's modules are dropped, which makes type-checking the
// whole build from source affordable.
func parseFile(fset *token.FileSet, filename string, src []byte) (*ast.File, error) {
	f, err := parser.ParseFile(fset, filename, src, parser.AllErrors|parser.ParseComments|parser.SkipObjectResolution)
	if f != nil && vet.OutsideModules(filename) {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				fd.Body = nil
			}
		}
	}
	return f, err
}

// bodiless reports whether the package was parsed without function
// bodies: its type errors (imports used only in the bodies) are not its
// own.
func bodiless(p *packages.Package) bool {
	return len(p.GoFiles) > 0 && vet.OutsideModules(p.GoFiles[0])
}

// vetPackages loads the packages and runs the analyzers on them. Problems
// loading or type-checking a package are an error: the analyzers would see
// too little to be trusted.
func vetPackages(ctx context.Context, patterns []string, tests bool) ([]finding, error) {
	pkgs, err := packages.Load(&packages.Config{Context: ctx, Mode: loadMode, Tests: tests, ParseFile: parseFile}, patterns...)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", strings.Join(patterns, " "), err)
	}
	var problems []string
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		own := p.Errors[:0]
		for _, e := range p.Errors {
			if e.Kind == packages.TypeError && bodiless(p) {
				continue // from the bodies dropped by parseFile
			}
			own = append(own, e)
			problems = append(problems, e.Error())
		}
		p.Errors = own
		// Ill-typed means: it, or a dependency, has errors of its own
		// (the imports are visited first).
		p.IllTyped = len(own) > 0
		for _, imp := range p.Imports {
			p.IllTyped = p.IllTyped || imp.IllTyped
		}
	})
	if len(problems) > 0 {
		slices.Sort(problems)
		problems = slices.Compact(problems)
		return nil, fmt.Errorf("the packages do not load:\n\t%s\nfix them (go build, go vet) and run oke vet again", strings.Join(problems, "\n\t"))
	}
	pkgs = vettable(pkgs)
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("%s matched no packages", strings.Join(patterns, " "))
	}
	g, err := checker.Analyze(vet.Analyzers, pkgs, nil)
	if err != nil {
		return nil, err
	}
	cwd, _ := os.Getwd()
	seen := map[finding]bool{}
	var out []finding
	var errs []error
	for _, act := range g.Roots {
		if act.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", act, act.Err))
			continue
		}
		for _, d := range act.Diagnostics {
			p := act.Package.Fset.Position(d.Pos)
			f := finding{File: relative(cwd, p.Filename), Line: p.Line, Col: p.Column, Rule: act.Analyzer.Name, Message: d.Message}
			if !seen[f] { // a file of a package and of its test variant
				seen[f] = true
				out = append(out, f)
			}
		}
	}
	if len(errs) > 0 {
		// Say what failed, not every analyzer that needed it.
		var causes []error
		for act := range g.All() {
			if act.Err != nil && !strings.HasPrefix(act.Err.Error(), "failed prerequisites") {
				causes = append(causes, fmt.Errorf("%s: %w", act, act.Err))
			}
		}
		if len(causes) > 0 {
			errs = causes
		}
		return nil, errors.Join(errs...)
	}
	slices.SortFunc(out, func(a, b finding) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col),
			cmp.Compare(a.Rule, b.Rule), cmp.Compare(a.Message, b.Message))
	})
	return out, nil
}

// vettable drops the packages another one covers: a package whose test
// variant ("p [p.test]") is loaded too, and the generated test mains.
func vettable(pkgs []*packages.Package) []*packages.Package {
	hasVariant := map[string]bool{}
	for _, p := range pkgs {
		if p.ForTest != "" && p.PkgPath == p.ForTest {
			hasVariant[p.PkgPath] = true
		}
	}
	var out []*packages.Package
	for _, p := range pkgs {
		if p.ForTest == "" && hasVariant[p.PkgPath] || p.Name == "main" && strings.HasSuffix(p.ID, ".test") {
			continue
		}
		out = append(out, p)
	}
	return out
}

// relative is file relative to dir when it is inside dir.
func relative(dir, file string) string {
	if dir == "" {
		return file
	}
	rel, err := filepath.Rel(dir, file)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return file
	}
	return rel
}
