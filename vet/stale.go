package vet

import (
	"fmt"
	"go/ast"
	"go/token"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/tools/go/analysis"

	"github.com/okengine/oke/extract"
)

// StaleContract: a package's checked-in oke_contract_gen.go records, per
// flow, a digest of the code extract inferred its effects from; when the
// code changed since, App.Start would still decide from the old effects
// whether the flow honors Idempotency-Key.
var StaleContract = &analysis.Analyzer{
	Name: staleName,
	Doc: "report an oke_contract_gen.go whose flows' code changed since oke extract wrote it\n\n" +
		"oke extract records in oke_contract_gen.go a digest of the code each flow's effects were inferred " +
		"from; App.Start decides from those effects whether the flow honors Idempotency-Key. This analyzer " +
		"runs extract on the package (with the arguments of its //go:generate line) and reports each flow " +
		"whose digest differs, and flows added or removed since: run go generate and commit the result.",
	Run: runStale,
}

const staleName = "stalecontract"

// staleRuns caches one extract run per directory and patterns: a package
// and its test variant, or packages of one go:generate line, share it.
var staleRuns sync.Map

type staleRun struct {
	once sync.Once
	res  *extract.Result
	err  error
}

func runStale(pass *analysis.Pass) (any, error) {
	var gen *ast.File
	for _, f := range pass.Files {
		name := pass.Fset.File(f.Pos()).Name()
		if filepath.Base(name) == extract.GoFile && len(f.Comments) > 0 && f.Comments[0].List[0].Text == extract.GoHeader {
			gen = f
		}
	}
	if gen == nil {
		return nil, nil
	}
	genName := pass.Fset.File(gen.Pos()).Name()
	dir, patterns, line := generateArgs(pass, filepath.Dir(genName))
	v, _ := staleRuns.LoadOrStore(dir+"\x00"+strings.Join(patterns, "\x00"), &staleRun{})
	run := v.(*staleRun)
	run.once.Do(func() { run.res, run.err = extract.Run(extract.Config{Dir: dir, Patterns: patterns}) })
	if run.err != nil {
		return nil, fmt.Errorf("stalecontract: extract %s (in %s): %w", strings.Join(patterns, " "), dir, run.err)
	}
	fix := "fix: run go generate in " + filepath.Base(filepath.Dir(genName)) + " (" + line + ") and commit the result"

	now := map[string]extract.Flow{}
	for _, f := range run.res.Contract.Flows {
		now[f.Name] = f
	}
	recorded := genFlows(gen)
	files := map[string]*ast.File{} // this package's files by absolute name
	for _, f := range pass.Files {
		files[pass.Fset.File(f.Pos()).Name()] = f
	}
	// at returns the position of flow f's constructor when it is in this
	// package, else def.
	at := func(f extract.Flow, def token.Pos) (token.Pos, bool) {
		file, ln := splitSource(f.Source)
		af := files[filepath.Join(run.res.ModuleRoot(), filepath.FromSlash(file))]
		if af == nil {
			return def, false
		}
		tf := pass.Fset.File(af.Pos())
		if ln < 1 || ln > tf.LineCount() {
			return def, true
		}
		pos := tf.LineStart(ln)
		ast.Inspect(af, func(n ast.Node) bool { // the constructor call on that line
			if c, ok := n.(*ast.CallExpr); ok && tf.Line(c.Pos()) == ln {
				if sel, ok := c.Fun.(*ast.SelectorExpr); ok && strings.HasPrefix(sel.Sel.Name, "New") {
					pos = c.Pos()
					return false
				}
			}
			return pos == tf.LineStart(ln)
		})
		return pos, true
	}
	for _, r := range recorded {
		f, ok := now[r.name]
		switch {
		case !ok:
			pass.Report(analysis.Diagnostic{Pos: r.pos, Category: staleName, Message: fmt.Sprintf(
				"flow %q is in %s, but oke extract no longer finds it (removed or renamed), so its contract is stale; %s",
				r.name, extract.GoFile, fix)})
		case r.digest != f.Digest:
			pos, _ := at(f, r.pos)
			why := "the code it was inferred from changed"
			if r.digest == "" {
				why = "it records no digest (written by an older oke extract)"
			}
			pass.Report(analysis.Diagnostic{Pos: pos, Category: staleName, Message: fmt.Sprintf(
				"flow %q: its contract in %s is stale: %s, so App.Start would decide from effects inferred from other code whether it honors Idempotency-Key; %s",
				r.name, extract.GoFile, why, fix)})
		}
	}
	seen := map[string]bool{}
	for _, r := range recorded {
		seen[r.name] = true
	}
	var missing []extract.Flow
	for _, f := range run.res.Contract.Flows {
		if !seen[f.Name] {
			missing = append(missing, f)
		}
	}
	sort.Slice(missing, func(i, j int) bool { return missing[i].Name < missing[j].Name })
	for _, f := range missing {
		pos, here := at(f, gen.Name.Pos())
		if !here {
			continue // a flow of another package of the go:generate line
		}
		pass.Report(analysis.Diagnostic{Pos: pos, Category: staleName, Message: fmt.Sprintf(
			"flow %q is not in %s, so App.Start uses the run-time rule for it (declared effects, else assume it writes); %s",
			f.Name, extract.GoFile, fix)})
	}
	return nil, nil
}

// recordedFlow is one entry of a generated file.
type recordedFlow struct {
	name, digest string
	pos          token.Pos
}

// genFlows returns the named entries of a generated oke_contract_gen.go.
func genFlows(f *ast.File) []recordedFlow {
	var out []recordedFlow
	for _, g := range extract.GeneratedFlows(f) {
		if g.Name != "" {
			out = append(out, recordedFlow{name: g.Name, digest: g.Digest, pos: g.Pos})
		}
	}
	return out
}

// generateArgs finds the package's //go:generate line that runs oke extract
// and returns the directory it runs in (the file's), its package patterns
// (default "."), and the line for the fix. Without one, extract runs on the
// package's directory alone.
func generateArgs(pass *analysis.Pass, pkgDir string) (dir string, patterns []string, line string) {
	for _, f := range pass.Files {
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				text, ok := strings.CutPrefix(c.Text, "//go:generate ")
				if !ok {
					continue
				}
				args := strings.Fields(text)
				i := indexOf(args, "extract")
				if i < 1 || !strings.HasSuffix(args[i-1], "oke") && !strings.HasSuffix(args[i-1], "cmd/oke") {
					continue
				}
				var pats []string
				for j := i + 1; j < len(args); j++ {
					a := args[j]
					switch {
					case a == "-o" || a == "--o":
						j++ // its value
					case strings.HasPrefix(a, "-"):
					default:
						pats = append(pats, a)
					}
				}
				if len(pats) == 0 {
					pats = []string{"./..."}
				}
				return filepath.Dir(pass.Fset.File(f.Pos()).Name()), pats, "//go:generate " + text
			}
		}
	}
	return pkgDir, []string{"."}, "oke extract, with the -o of the contract, in the package's directory"
}

func indexOf(ss []string, s string) int {
	for i, x := range ss {
		if x == s {
			return i
		}
	}
	return -1
}

// splitSource splits "FILE:LINE".
func splitSource(s string) (string, int) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return s, 0
	}
	n, err := strconv.Atoi(s[i+1:])
	if err != nil {
		return s, 0
	}
	return s[:i], n
}
