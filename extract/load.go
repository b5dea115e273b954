package extract

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/tools/go/packages"
	"golang.org/x/tools/go/ssa"
)

// LoadError is returned by Run when the packages cannot be listed, parsed
// or type-checked: the tool exits 2 and writes nothing.
type LoadError struct {
	Problems []string
}

func (e *LoadError) Error() string {
	const max = 10
	p := e.Problems
	more := ""
	if len(p) > max {
		more = fmt.Sprintf("\n(and %d more)", len(p)-max)
		p = p[:max]
	}
	return "load packages: " + strings.Join(p, "\n") + more
}

// program is the loaded, type-checked and SSA-built set of packages.
//
// Loading is done in two passes, for speed: go/packages only lists the
// packages (`go list -deps`, which compiles nothing), then this file parses
// and type-checks them from source itself. Packages of the main module are
// checked in full and built to SSA; every other package is checked without
// function bodies (only its declarations, which is what the main module's
// types need), and an import that a package outside the main module does not
// use in its declarations — or that is only ever imported for its side
// effects (import _ "modernc.org/sqlite") — is not loaded at all.
type program struct {
	fset    *token.FileSet
	modRoot string // the main module's directory
	modPath string
	roots   []*pkg // the packages the patterns matched, sorted by path
	pkgs    map[string]*pkg
	ssa     *ssa.Program
	stubs   map[string]*types.Package // packages loaded for no one's types
	// deepMods are the modules of the packages read deep, longest
	// directory first.
	deepMods []*packages.Module
	// wantDeep are the packages of other modules whose functions the
	// flows call, found by the analysis: a second load reads them deep.
	wantDeep map[string]bool
	goroot   string // GOROOT/src, found on first use ("-": unknown)
}

// inMain reports whether pos is in a file of the main module.
func (prog *program) inMain(pos token.Pos) bool {
	if !pos.IsValid() {
		return false
	}
	r, err := filepath.Rel(prog.modRoot, prog.fset.Position(pos).Filename)
	return err == nil && !strings.HasPrefix(r, "..")
}

// wantBodies notes that a flow calls a function of the package path of
// another module, which this load read without bodies.
func (prog *program) wantBodies(path string) {
	p := prog.pkgs[path]
	if p == nil || p.body || p.deep || isStd(path) || p.lp.Module == nil || p.lp.Module.Path == okeModule {
		return
	}
	if prog.wantDeep == nil {
		prog.wantDeep = map[string]bool{}
	}
	prog.wantDeep[path] = true
}

type pkg struct {
	lp   *packages.Package
	path string
	body bool // in the main module: checked with bodies, built to SSA
	// deep: another module's package that the main module imports
	// directly: checked with bodies and built to SSA too, so that the
	// effects of its functions are found the way the main module's are
	// (its own imports are read without bodies). Flows and bindings are
	// looked for only in the main module.
	deep  bool
	root  bool
	files []*ast.File
	// imports needed from this package's files (import path → true); for
	// packages checked without bodies, only those its declarations use.
	needs map[string]bool
	types *types.Package
	info  *types.Info
	ssa   *ssa.Package
	errs  []string
	done  chan struct{}
}

// load lists, parses, type-checks and builds the packages that patterns
// match, from dir. overlay maps absolute file names to contents that replace
// the files on disk (for tests).
func load(dir string, patterns []string, env []string, overlay map[string][]byte, deep map[string]bool) (*program, error) {
	cfg := &packages.Config{
		Mode:    packages.NeedName | packages.NeedFiles | packages.NeedImports | packages.NeedDeps | packages.NeedModule,
		Dir:     dir,
		Env:     append(append(os.Environ(), env...), "CGO_ENABLED=0"),
		Overlay: overlay,
	}
	lps, err := packages.Load(cfg, patterns...)
	if err != nil {
		return nil, &LoadError{Problems: []string{err.Error()}}
	}
	if len(lps) == 0 {
		return nil, &LoadError{Problems: []string{fmt.Sprintf("no packages match %s", strings.Join(patterns, " "))}}
	}
	prog := &program{fset: token.NewFileSet(), pkgs: map[string]*pkg{}}
	var problems []string
	var main *packages.Module
	for _, lp := range lps {
		if lp.Module != nil && lp.Module.Main {
			main = lp.Module
		}
	}
	if main == nil {
		for _, lp := range lps {
			for _, e := range lp.Errors {
				problems = append(problems, e.Error())
			}
		}
		if len(problems) == 0 {
			problems = append(problems, fmt.Sprintf("%s: not in a Go module (oke extract needs a go.mod)", strings.Join(patterns, " ")))
		}
		return nil, &LoadError{Problems: problems}
	}
	prog.modRoot, prog.modPath = main.Dir, main.Path
	packages.Visit(lps, nil, func(lp *packages.Package) {
		p := &pkg{lp: lp, path: lp.PkgPath, done: make(chan struct{})}
		p.body = lp.Module != nil && lp.Module.Main
		prog.pkgs[lp.PkgPath] = p
		if p.body {
			for _, e := range lp.Errors {
				problems = append(problems, e.Error())
			}
		}
	})
	for _, lp := range lps {
		p := prog.pkgs[lp.PkgPath]
		if !p.body {
			problems = append(problems, fmt.Sprintf("%s is not in the main module %s: run oke extract from the module that declares the flows", lp.PkgPath, prog.modPath))
			continue
		}
		p.root = true
		prog.roots = append(prog.roots, p)
	}
	if len(problems) > 0 {
		return nil, &LoadError{Problems: problems}
	}
	sort.Slice(prog.roots, func(i, j int) bool { return prog.roots[i].path < prog.roots[j].path })
	prog.markDeep(deep)

	needed := prog.parseNeeded(overlay)
	for _, p := range needed {
		if p.body {
			problems = append(problems, p.errs...)
		}
	}
	if len(problems) > 0 {
		return nil, &LoadError{Problems: problems}
	}
	prog.check(needed)
	for _, p := range needed {
		if p.body {
			problems = append(problems, p.errs...)
		}
	}
	if len(problems) > 0 {
		return nil, &LoadError{Problems: problems}
	}
	prog.build(needed)
	return prog, nil
}

// parseNeeded parses the roots and, transitively, every package they need,
// in parallel. It returns the needed packages.
func (prog *program) parseNeeded(overlay map[string][]byte) []*pkg {
	var (
		mu     sync.Mutex
		wg     sync.WaitGroup
		seen   = map[*pkg]bool{}
		needed []*pkg
		sem    = make(chan struct{}, runtime.GOMAXPROCS(0))
	)
	var visit func(p *pkg)
	visit = func(p *pkg) {
		mu.Lock()
		if seen[p] {
			mu.Unlock()
			return
		}
		seen[p] = true
		needed = append(needed, p)
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			prog.parse(p, overlay)
			<-sem
			for path := range p.needs {
				if q := prog.pkgs[p.lp.Imports[path].PkgPath]; q != nil {
					visit(q)
				}
			}
		}()
	}
	for _, r := range prog.roots {
		visit(r)
	}
	wg.Wait()
	sort.Slice(needed, func(i, j int) bool { return needed[i].path < needed[j].path })
	return needed
}

// parse parses p's files and records which imports it needs.
func (prog *program) parse(p *pkg, overlay map[string][]byte) {
	p.needs = map[string]bool{}
	if p.path == "unsafe" {
		return
	}
	mode := parser.SkipObjectResolution
	if p.body {
		mode |= parser.ParseComments
	}
	bodies := p.body || p.deep
	for _, name := range p.lp.GoFiles {
		src, ok := overlay[name]
		if !ok {
			var err error
			if src, err = os.ReadFile(name); err != nil {
				p.errs = append(p.errs, err.Error())
				continue
			}
		}
		if p.body && filepath.Base(name) == GoFile && bytes.HasPrefix(src, []byte(GoHeader)) {
			// extract's own output: it only registers the contract, and
			// skipping it lets extract regenerate a file that no longer
			// compiles (after the contract types changed).
			continue
		}
		f, err := parser.ParseFile(prog.fset, name, src, mode)
		if err != nil {
			p.errs = append(p.errs, err.Error())
			if f == nil {
				continue
			}
		}
		p.files = append(p.files, f)
		used := map[string]bool{} // names used outside function bodies
		dot := false
		if !bodies {
			used = declNames(f)
		}
		for _, is := range f.Imports {
			path, err := strconv.Unquote(is.Path.Value)
			if err != nil || path == "C" {
				continue
			}
			if _, ok := p.lp.Imports[path]; !ok {
				continue
			}
			switch {
			case is.Name != nil && is.Name.Name == "_":
				continue // for its side effects only: never needed for types
			case is.Name != nil && is.Name.Name == ".":
				dot = true
			}
			if bodies || dot {
				p.needs[path] = true
				continue
			}
			name := ""
			if is.Name != nil {
				name = is.Name.Name
			} else if q := prog.pkgs[p.lp.Imports[path].PkgPath]; q != nil {
				name = q.lp.Name
			}
			if used[name] || name == "" {
				p.needs[path] = true
			}
		}
	}
}

// declNames returns the identifiers used as X in X.Sel outside function
// bodies: the imports a package checked without bodies needs.
func declNames(f *ast.File) map[string]bool {
	used := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncDecl:
			if n.Recv != nil {
				ast.Inspect(n.Recv, func(n ast.Node) bool { return markSel(used, n) })
			}
			if n.Type != nil {
				ast.Inspect(n.Type, func(n ast.Node) bool { return markSel(used, n) })
			}
			return false
		case *ast.FuncLit:
			ast.Inspect(n.Type, func(n ast.Node) bool { return markSel(used, n) })
			return false
		}
		return markSel(used, n)
	})
	return used
}

func markSel(used map[string]bool, n ast.Node) bool {
	if s, ok := n.(*ast.SelectorExpr); ok {
		if id, ok := s.X.(*ast.Ident); ok {
			used[id.Name] = true
		}
	}
	return true
}

// check type-checks the needed packages, in parallel, each after the
// packages it imports.
func (prog *program) check(needed []*pkg) {
	stubs := map[string]*types.Package{}
	var stubMu sync.Mutex
	stub := func(q *pkg) *types.Package {
		stubMu.Lock()
		defer stubMu.Unlock()
		if s, ok := stubs[q.path]; ok {
			return s
		}
		s := types.NewPackage(q.path, q.lp.Name)
		s.MarkComplete()
		stubs[q.path] = s
		return s
	}
	isNeeded := map[*pkg]bool{}
	for _, p := range needed {
		isNeeded[p] = true
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for _, p := range needed {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(p.done)
			for path := range p.needs {
				if q := prog.pkgs[p.lp.Imports[path].PkgPath]; q != nil && isNeeded[q] {
					<-q.done
				}
			}
			sem <- struct{}{}
			defer func() { <-sem }()
			if p.path == "unsafe" {
				p.types = types.Unsafe
				return
			}
			conf := types.Config{
				IgnoreFuncBodies: !p.body && !p.deep,
				FakeImportC:      true,
				Error: func(err error) {
					if len(p.errs) < 20 {
						p.errs = append(p.errs, err.Error())
					}
				},
				Importer: importerFunc(func(path string) (*types.Package, error) {
					ip, ok := p.lp.Imports[path]
					if !ok {
						return nil, fmt.Errorf("%s: no package for import %q", p.path, path)
					}
					q := prog.pkgs[ip.PkgPath]
					if q == nil {
						return nil, fmt.Errorf("%s: no package for import %q", p.path, path)
					}
					if isNeeded[q] {
						if p.needs[path] {
							<-q.done // already closed: waited for above
							return q.types, nil
						}
						select { // not used by p's declarations: never wait
						case <-q.done:
							return q.types, nil
						default:
						}
					}
					return stub(q), nil
				}),
			}
			if m := p.lp.Module; m != nil && m.GoVersion != "" {
				conf.GoVersion = "go" + m.GoVersion
			}
			if p.body || p.deep {
				p.info = &types.Info{
					Types:        map[ast.Expr]types.TypeAndValue{},
					Defs:         map[*ast.Ident]types.Object{},
					Uses:         map[*ast.Ident]types.Object{},
					Implicits:    map[ast.Node]types.Object{},
					Selections:   map[*ast.SelectorExpr]*types.Selection{},
					Scopes:       map[ast.Node]*types.Scope{},
					Instances:    map[*ast.Ident]types.Instance{},
					FileVersions: map[*ast.File]string{},
				}
			}
			p.types, _ = conf.Check(p.path, prog.fset, p.files, p.info)
			if !p.body {
				if p.deep && len(p.errs) > 0 {
					p.deep = false // ill-typed here: read without bodies
				}
				p.errs = nil // best effort outside the main module
			}
		}()
	}
	wg.Wait()
	prog.stubs = stubs
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }

// build creates the SSA program: every needed package (and stub), with
// code for the main module's.
func (prog *program) build(needed []*pkg) {
	prog.ssa = ssa.NewProgram(prog.fset, ssa.InstantiateGenerics)
	created := map[*types.Package]bool{}
	var create func(tp *types.Package)
	create = func(tp *types.Package) {
		if created[tp] {
			return
		}
		created[tp] = true
		for _, imp := range tp.Imports() {
			create(imp)
		}
		if p := prog.pkgs[tp.Path()]; p != nil && p.types == tp && (p.body || p.deep) {
			p.ssa = prog.ssa.CreatePackage(tp, p.files, p.info, true)
			return
		}
		prog.ssa.CreatePackage(tp, nil, nil, true)
	}
	for _, p := range needed {
		create(p.types)
	}
	prog.ssa.Build()
}

// sortedBodyPkgs returns the main module's loaded packages, by path.
func (prog *program) sortedBodyPkgs() []*pkg {
	var out []*pkg
	for _, p := range prog.pkgs {
		if p.body && p.ssa != nil {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}

// rel returns file relative to the module root, with forward slashes; a
// file of another module's package read deep is MODULE@VERSION/FILE, so
// that the contract does not depend on where the module cache is.
func (prog *program) rel(file string) string {
	if r, err := filepath.Rel(prog.modRoot, file); err == nil && !strings.HasPrefix(r, "..") {
		return filepath.ToSlash(r)
	}
	if prog.goroot == "" {
		prog.goroot = prog.findGoroot()
	}
	if r, err := filepath.Rel(prog.goroot, file); prog.goroot != "-" && err == nil && !strings.HasPrefix(r, "..") {
		return filepath.ToSlash(r) // the standard library's: net/dial.go
	}
	for _, m := range prog.deepMods {
		if r, err := filepath.Rel(m.Dir, file); err == nil && !strings.HasPrefix(r, "..") {
			v := m.Path
			if m.Version != "" {
				v += "@" + m.Version
			}
			return v + "/" + filepath.ToSlash(r)
		}
	}
	return filepath.ToSlash(file)
}

// findGoroot returns the directory of the standard library's sources
// (GOROOT/src), from a standard package's files; "-" if none is loaded.
func (prog *program) findGoroot() string {
	for path, p := range prog.pkgs {
		if !isStd(path) || len(p.lp.GoFiles) == 0 {
			continue
		}
		dir := filepath.Dir(p.lp.GoFiles[0])
		if strings.HasSuffix(filepath.ToSlash(dir), "/"+path) {
			return dir[:len(dir)-len(path)-1]
		}
	}
	return "-"
}

// sortedCodePkgs returns the packages whose code extract reads: the main
// module's and those read deep, by path.
func (prog *program) sortedCodePkgs() []*pkg {
	var out []*pkg
	for _, p := range prog.pkgs {
		if (p.body || p.deep) && p.ssa != nil {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}

// markDeep marks the packages of other modules named in deep (those whose
// functions a flow calls, found by a first pass) to be read with their
// bodies. The standard library (classified by its table) and oke's own
// module (its API is the table of api.go) are never read deep.
func (prog *program) markDeep(deep map[string]bool) {
	seenMod := map[string]bool{}
	paths := make([]string, 0, len(deep))
	for path := range deep {
		paths = append(paths, path)
	}
	sort.Strings(paths)
	for _, path := range paths {
		q := prog.pkgs[path]
		if q == nil || q.body || q.lp.Module == nil || isStd(q.path) || q.lp.Module.Path == okeModule || q.lp.Module.Dir == "" {
			continue
		}
		q.deep = true
		if !seenMod[q.lp.Module.Dir] {
			seenMod[q.lp.Module.Dir] = true
			prog.deepMods = append(prog.deepMods, q.lp.Module)
		}
	}
	sort.Slice(prog.deepMods, func(i, j int) bool { return len(prog.deepMods[i].Dir) > len(prog.deepMods[j].Dir) })
}

// okeModule is the path of oke's own module.
const okeModule = "github.com/okengine/oke"

// position returns the module-relative position of pos.
func (prog *program) position(pos token.Pos) token.Position {
	p := prog.fset.Position(pos)
	p.Filename = prog.rel(p.Filename)
	return p
}
