package vet

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/ast/astutil"
)

// Reach is the shared pass that follows calls across packages: for every
// function and method of a package it records, as an analysis fact, what
// the function reaches outside steps — the clock, randomness, new ids, the
// environment, mutable package variables, timers, a select, raw I/O — and
// whether what it returns is in map order, with the chain of calls that
// leads there. The engine reads these facts at the calls of a durable
// flow, so that a helper of any depth, in any package of the build, is
// seen (rules nondetreach, rawio, selectchoice, maporder). It reports
// nothing itself.
//
// Facts are computed for the code of the modules being built (the main
// module, a workspace, a directory replace), not for the standard library
// and not for modules in the module cache: those are judged by the known
// sources (time.Now, os.Getenv, (*sql.DB).ExecContext, uuid.New…) only.
var Reach = &analysis.Analyzer{
	Name:       "okereach",
	Doc:        "record what each function reaches outside oke steps (the shared pass of oke vet's cross-package rules)",
	Run:        runReach,
	FactTypes:  []analysis.Fact{new(reachFact), new(varFact)},
	ResultType: reflect.TypeFor[*reachResult](),
}

// A hitKind is one class of what a function can reach.
type hitKind int

const (
	hitTime   hitKind = iota // time.Now, Since, Until
	hitRand                  // math/rand, crypto/rand
	hitID                    // a new UUID
	hitEnv                   // os.Getenv and kin
	hitGlobal                // a read of a mutable package variable
	hitTimer                 // time.After, Tick, NewTimer, Sleep…
	hitSelect                // a select over channels
	hitIO                    // raw network, file, process, database calls
	numHitKinds
)

// A reachHit is one thing a function reaches: what, where, and through
// which calls (from the function down, the function itself first).
type reachHit struct {
	Kind  hitKind
	What  string   // "time.Now", "os.Getenv", "(*sql.DB).ExecContext", "package variable cfg.Mode"
	At    string   // "clock.go:12": where it is
	Chain []string // "clock.Stamp", "clock.now"
}

// reachFact is what a function reaches: the first hit found of each kind,
// and Order when what it returns is in map order.
type reachFact struct {
	Hits  []reachHit
	Order *reachHit
}

func (*reachFact) AFact() {}

func (f *reachFact) String() string {
	var s []string
	for _, h := range f.Hits {
		s = append(s, h.What)
	}
	if f.Order != nil {
		s = append(s, "map order")
	}
	return "reaches(" + strings.Join(s, ", ") + ")"
}

func (f *reachFact) hit(k hitKind) *reachHit {
	for i := range f.Hits {
		if f.Hits[i].Kind == k {
			return &f.Hits[i]
		}
	}
	return nil
}

// varFact is what is known of a package-level variable: that it is
// assigned after its declaration (Mutable, where), or that it holds a
// function that reaches something (Bound).
type varFact struct {
	Mutable string // "cfg.go:20", or ""
	Bound   *reachFact
}

func (*varFact) AFact() {}

func (f *varFact) String() string {
	return fmt.Sprintf("var(mutable=%q, bound=%v)", f.Mutable, f.Bound != nil)
}

// reachResult is what the pass knows for the package under analysis: the
// facts of its own functions and variables and those of its imports.
type reachResult struct {
	funcs map[*types.Func]*reachFact
	vars  map[*types.Var]*varFact
	pass  *analysis.Pass
}

// of is the fact of fn (nil when it reaches nothing).
func (r *reachResult) of(fn *types.Func) *reachFact {
	if r == nil || fn == nil {
		return nil
	}
	fn = fn.Origin()
	if f, ok := r.funcs[fn]; ok {
		return f
	}
	var f *reachFact
	if fn.Pkg() != nil && fn.Pkg() != r.pass.Pkg {
		f = new(reachFact)
		if !r.pass.ImportObjectFact(fn, f) {
			f = nil
		}
	}
	r.funcs[fn] = f
	return f
}

// varOf is the fact of a package-level variable (nil when none).
func (r *reachResult) varOf(v *types.Var) *varFact {
	if r == nil || v == nil {
		return nil
	}
	if f, ok := r.vars[v]; ok {
		return f
	}
	var f *varFact
	if v.Pkg() != nil && v.Pkg() != r.pass.Pkg {
		f = new(varFact)
		if !r.pass.ImportObjectFact(v, f) {
			f = nil
		}
	}
	r.vars[v] = f
	return f
}

// ownCode reports whether the package's files are code of the build's
// modules: not in GOROOT, not in the module cache, not vendored.
func ownCode(pass *analysis.Pass) bool {
	if pass.Pkg.Path() == okePath || len(pass.Files) == 0 || pass.TypesInfo == nil {
		return false
	}
	name := pass.Fset.File(pass.Files[0].Pos()).Name()
	return !outsideModules(name)
}

var goroot, modcache = func() (string, string) {
	root := filepath.Clean(build.Default.GOROOT)
	cache := os.Getenv("GOMODCACHE")
	if cache == "" {
		gopath := strings.Split(build.Default.GOPATH, string(filepath.ListSeparator))[0]
		cache = filepath.Join(gopath, "pkg", "mod")
	}
	return root, filepath.Clean(cache)
}()

// outsideModules reports whether the file is in GOROOT, in the module
// cache or in a vendor directory: code that Reach records no facts for.
func outsideModules(file string) bool {
	file = filepath.Clean(file)
	under := func(dir string) bool {
		return dir != "" && dir != "." && strings.HasPrefix(file, dir+string(filepath.Separator))
	}
	sep := string(filepath.Separator)
	if under(goroot) || under(modcache) || strings.Contains(file, sep+"vendor"+sep) {
		return true
	}
	// A module cache set with `go env -w GOMODCACHE=…` is not in the
	// environment: its directories are still …/pkg/mod/path@version/….
	if _, rest, ok := strings.Cut(file, sep+"pkg"+sep+"mod"+sep); ok {
		for _, el := range strings.Split(filepath.Dir(rest), sep) {
			if strings.Contains(el, "@v") {
				return true
			}
		}
	}
	return false
}

func runReach(pass *analysis.Pass) (any, error) {
	r := &reachResult{funcs: map[*types.Func]*reachFact{}, vars: map[*types.Var]*varFact{}, pass: pass}
	if !ownCode(pass) {
		return r, nil
	}
	p := newPkg(pass)
	at := func(pos token.Pos) string {
		ps := pass.Fset.Position(pos)
		return fmt.Sprintf("%s:%d", filepath.Base(ps.Filename), ps.Line)
	}
	// Package variables assigned after their declaration.
	mutable := mutableVars(pass)
	for v, pos := range mutable {
		if v.Pkg() == pass.Pkg {
			r.vars[v] = &varFact{Mutable: at(pos)}
		}
	}
	// Functions: iterate to a fixed point over the package's call graph.
	var fns []*types.Func
	for fn := range p.decls {
		fns = append(fns, fn)
	}
	sort.Slice(fns, func(i, j int) bool { return fns[i].Pos() < fns[j].Pos() })
	for changed := true; changed; {
		changed = false
		for _, fn := range fns {
			f := r.funcs[fn]
			if f == nil {
				f = &reachFact{}
			}
			if p.summarize(r, fn, f, mutable, at) {
				changed = true
			}
			if len(f.Hits) > 0 || f.Order != nil {
				r.funcs[fn] = f
			}
		}
		// Variables bound to a function that reaches something.
		for v, init := range p.inits {
			if v.Parent() != pass.Pkg.Scope() {
				continue
			}
			bf := p.boundFact(r, init, at)
			if lit, ok := astutil.Unparen(init).(*ast.FuncLit); ok {
				// var save = func(…) {…}: the literal's body, as a function.
				if vf := r.vars[v]; vf != nil && vf.Bound != nil {
					bf = vf.Bound
				} else {
					bf = &reachFact{}
				}
				if p.summarizeBody(r, lit.Body, pass.Pkg.Name()+"."+v.Name(), nil, bf, mutable, at) {
					changed = true
				}
				if len(bf.Hits) == 0 {
					continue
				}
			}
			if bf == nil {
				continue
			}
			vf := r.vars[v]
			if vf == nil {
				vf = &varFact{}
				r.vars[v] = vf
			}
			if vf.Bound == nil {
				vf.Bound = bf
				changed = true
			}
		}
	}
	for _, fn := range fns {
		if f := r.funcs[fn]; f != nil {
			pass.ExportObjectFact(fn, f)
		}
	}
	for v, f := range r.vars {
		if v.Pkg() == pass.Pkg && f != nil {
			pass.ExportObjectFact(v, f)
		}
	}
	return r, nil
}

// boundFact is what a function expression reaches (time.Now, helper,
// s.method), or nil.
func (p *pkg) boundFact(r *reachResult, x ast.Expr, at func(token.Pos) string) *reachFact {
	var obj types.Object
	switch x := astutil.Unparen(x).(type) {
	case *ast.Ident:
		obj = p.info.Uses[x]
	case *ast.SelectorExpr:
		obj = p.info.Uses[x.Sel]
	}
	fn, ok := obj.(*types.Func)
	if !ok {
		return nil
	}
	if h, ok := directFuncHit(fn); ok {
		h.At = at(x.Pos())
		return &reachFact{Hits: []reachHit{h}}
	}
	return r.of(fn)
}

// directFuncHit says whether referring to fn (calling it, or taking it as
// a value) reaches a known source: the clock, randomness, ids, timers, the
// environment.
func directFuncHit(fn *types.Func) (reachHit, bool) {
	if src, ok := nondetSource(fn); ok {
		k := map[nondetKind]hitKind{kindTime: hitTime, kindRand: hitRand, kindID: hitID}[src.kind]
		return reachHit{Kind: k, What: src.what}, true
	}
	if fn.Pkg() == nil || fn.Signature().Recv() != nil {
		return reachHit{}, false
	}
	switch fn.Pkg().Path() + "." + fn.Name() {
	case "time.After", "time.AfterFunc", "time.Tick", "time.NewTimer", "time.NewTicker", "time.Sleep":
		return reachHit{Kind: hitTimer, What: "time." + fn.Name()}, true
	case "os.Getenv", "os.LookupEnv", "os.Environ", "os.ExpandEnv", "os.Hostname", "syscall.Getenv":
		return reachHit{Kind: hitEnv, What: fn.Pkg().Name() + "." + fn.Name()}, true
	}
	return reachHit{}, false
}

// summarize adds to f what fn reaches; it reports whether f grew.
func (p *pkg) summarize(r *reachResult, fn *types.Func, f *reachFact, mutable map[*types.Var]token.Pos, at func(token.Pos) string) bool {
	d := p.decls[fn]
	grew := p.summarizeBody(r, d.Body, funcName(fn), fn, f, mutable, at)
	if f.Order == nil {
		if o := p.returnsMapOrder(r, d, at); o != nil {
			o.Chain = append([]string{funcName(fn)}, o.Chain...)
			f.Order = o
			grew = true
		}
	}
	return grew
}

// summarizeBody adds to f what the code of body reaches outside steps,
// seen from the function called name (self, if it is one); it reports
// whether f grew.
func (p *pkg) summarizeBody(r *reachResult, body *ast.BlockStmt, name string, self *types.Func, f *reachFact, mutable map[*types.Var]token.Pos, at func(token.Pos) string) bool {
	grew := false
	add := func(h reachHit) {
		if f.hit(h.Kind) == nil {
			f.Hits = append(f.Hits, h)
			grew = true
		}
	}
	steps := p.stepArgs(body)
	inStep := func(pos token.Pos) bool {
		for _, s := range steps {
			if s.holds(pos) {
				return true
			}
		}
		return false
	}
	writes := lhsIdents(body)
	ast.Inspect(body, func(n ast.Node) bool {
		if n == nil || inStep(n.Pos()) {
			return false
		}
		switch n := n.(type) {
		case *ast.SelectStmt:
			if what, ok := selectChoice(n); ok {
				add(reachHit{Kind: hitSelect, What: what, At: at(n.Pos()), Chain: []string{name}})
			}
		case *ast.CallExpr:
			if h, ok := p.ioHit(n); ok {
				h.At, h.Chain = at(n.Pos()), []string{name}
				add(h)
			}
		case *ast.Ident:
			switch obj := p.info.Uses[n].(type) {
			case *types.Func:
				if h, ok := directFuncHit(obj); ok {
					h.At, h.Chain = at(n.Pos()), []string{name}
					add(h)
				} else if sub := r.of(obj); sub != nil && obj.Origin() != self {
					for _, h := range sub.Hits {
						add(prefixed(h, name))
					}
				}
			case *types.Var:
				if writes[n] || obj.Parent() == nil || obj.Pkg() == nil || obj.Parent() != obj.Pkg().Scope() {
					break
				}
				if pos, ok := mutable[obj]; ok {
					add(reachHit{Kind: hitGlobal, What: "package variable " + obj.Pkg().Name() + "." + obj.Name() + " (assigned at " + at(pos) + ")", At: at(n.Pos()), Chain: []string{name}})
				} else if vf := r.varOf(obj); vf != nil {
					if vf.Mutable != "" {
						add(reachHit{Kind: hitGlobal, What: "package variable " + obj.Pkg().Name() + "." + obj.Name() + " (assigned at " + vf.Mutable + ")", At: at(n.Pos()), Chain: []string{name}})
					}
					if vf.Bound != nil {
						for _, h := range vf.Bound.Hits {
							if h.At == "" {
								h.At = at(n.Pos())
							}
							h.Chain = append([]string{name}, h.Chain...)
							add(h)
						}
					}
				}
			}
		}
		return true
	})
	return grew
}

// prefixed is hit h of a callee, seen from its caller name.
func prefixed(h reachHit, name string) reachHit {
	h.Chain = append([]string{name}, h.Chain...)
	return h
}

// stepArgs are the arguments of the calls of body that run in a step of
// oke (oke.Step's function, a sleep's time).
func (p *pkg) stepArgs(body *ast.BlockStmt) []span {
	var out []span
	if body == nil {
		return nil
	}
	ast.Inspect(body, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok {
			if fn := p.callee(call); fn != nil && fn.Pkg() != nil && fn.Pkg().Path() == okePath && fn.Signature().Recv() == nil {
				if r := builtinRoles[fn.Name()]; r != nil {
					for i, a := range call.Args {
						if r.step[i] {
							out = append(out, span{a.Pos(), a.End()})
						}
					}
				}
			}
		}
		return true
	})
	return out
}

// lhsIdents are the identifiers assigned to in body (every identifier of
// the chain x in x = …, x.f = …, pkg.V = …, x[i] = …, x++).
func lhsIdents(body ast.Node) map[*ast.Ident]bool {
	out := map[*ast.Ident]bool{}
	if body == nil {
		return out
	}
	mark := func(x ast.Expr) {
		for x != nil {
			switch e := x.(type) {
			case *ast.Ident:
				out[e] = true
				return
			case *ast.SelectorExpr:
				out[e.Sel] = true
				x = e.X
			case *ast.IndexExpr:
				x = e.X
			case *ast.StarExpr:
				x = e.X
			case *ast.ParenExpr:
				x = e.X
			default:
				return
			}
		}
	}
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for _, l := range n.Lhs {
				mark(l)
			}
		case *ast.IncDecStmt:
			mark(n.X)
		}
		return true
	})
	return out
}

// mutableVars are the package-level variables (of any package) that the
// package assigns outside their declaration and outside start-up code —
// init functions, func main of package main, TestMain of a test file —
// with one such assignment. What start-up sets (var db *sql.DB, opened in
// main) is set again the same way by the next process.
func mutableVars(pass *analysis.Pass) map[*types.Var]token.Pos {
	out := map[*types.Var]token.Pos{}
	info := pass.TypesInfo
	pkgVar := func(x ast.Expr) *types.Var {
		var id *ast.Ident
		for id == nil {
			switch e := x.(type) {
			case *ast.Ident:
				id = e
			case *ast.SelectorExpr:
				if pn, ok := e.X.(*ast.Ident); ok {
					if _, ok := info.Uses[pn].(*types.PkgName); ok {
						id = e.Sel
						continue
					}
				}
				x = e.X
			case *ast.IndexExpr:
				x = e.X
			case *ast.StarExpr:
				x = e.X
			case *ast.ParenExpr:
				x = e.X
			default:
				return nil
			}
		}
		v, ok := info.Uses[id].(*types.Var)
		if !ok || v.Pkg() == nil || v.Parent() != v.Pkg().Scope() {
			return nil
		}
		return v
	}
	for _, f := range pass.Files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil || startup(pass, f, fd) {
				continue
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				var lhs []ast.Expr
				switch n := n.(type) {
				case *ast.AssignStmt:
					lhs = n.Lhs
				case *ast.IncDecStmt:
					lhs = []ast.Expr{n.X}
				case *ast.RangeStmt:
					if n.Tok == token.ASSIGN {
						lhs = []ast.Expr{n.Key, n.Value}
					}
				}
				for _, l := range lhs {
					if l == nil {
						continue
					}
					if v := pkgVar(l); v != nil {
						if _, ok := out[v]; !ok {
							out[v] = l.Pos()
						}
					}
				}
				return true
			})
		}
	}
	return out
}

// startup reports whether fd is start-up code: an init function, func main
// of package main, TestMain in a test file.
func startup(pass *analysis.Pass, f *ast.File, fd *ast.FuncDecl) bool {
	if fd.Recv != nil {
		return false
	}
	switch fd.Name.Name {
	case "init":
		return true
	case "main":
		return pass.Pkg.Name() == "main"
	case "TestMain":
		return strings.HasSuffix(pass.Fset.File(f.Pos()).Name(), "_test.go")
	}
	return false
}

// funcName is how messages name a function: pkg.F, pkg.T.M.
func funcName(fn *types.Func) string {
	name := fn.Name()
	if recv := fn.Signature().Recv(); recv != nil {
		t := recv.Type()
		if p, ok := t.(*types.Pointer); ok {
			t = p.Elem()
		}
		if n, ok := types.Unalias(t).(*types.Named); ok {
			name = n.Obj().Name() + "." + name
		}
	}
	if fn.Pkg() != nil {
		name = fn.Pkg().Name() + "." + name
	}
	return name
}

// selectChoice says whether a select chooses between ready cases: two or
// more communication cases, or one and a default.
func selectChoice(s *ast.SelectStmt) (string, bool) {
	comms, def := 0, false
	for _, c := range s.Body.List {
		if cc, ok := c.(*ast.CommClause); ok {
			if cc.Comm == nil {
				def = true
			} else {
				comms++
			}
		}
	}
	switch {
	case comms >= 2:
		return fmt.Sprintf("a select over %d channels", comms), true
	case comms == 1 && def:
		return "a select with a default", true
	}
	return "", false
}

// OutsideModules reports whether file is code that Reach records no facts
// for: in GOROOT, in the module cache, or vendored. A driver that loads a
// whole build from source (as `oke vet` does, so that facts flow across
// the build's own packages) may parse such files without function bodies:
// only their declarations are used.
func OutsideModules(file string) bool { return outsideModules(file) }
