package vet

import (
	"go/ast"
	"go/token"
	"go/types"
)

// roles say which arguments of a call run in a step or name one.
type roles struct {
	step map[int]bool   // the argument is evaluated for a step: a step's function
	name map[int]string // the argument names a step; the value says what, for messages
}

// builtinRoles are oke's own: oke.Step runs its function in a step and every
// durable call is named. The time of oke.Sleep and oke.SleepUntil counts as
// in a step: it is saved the first time the sleep is reached and unused on
// a pick-up.
var builtinRoles = map[string]*roles{
	"Step":       {step: map[int]bool{2: true}, name: map[int]string{1: "step name of oke.Step"}},
	"Sleep":      {step: map[int]bool{2: true}, name: map[int]string{1: "step name of oke.Sleep"}},
	"SleepUntil": {step: map[int]bool{2: true}, name: map[int]string{1: "step name of oke.SleepUntil"}},
	"NewID":      {name: map[int]string{1: "step name of oke.NewID"}},
	// The timeout of a wait is saved with its deadline the first time the
	// wait is reached, as a sleep's time is.
	"AwaitSignal":     {step: map[int]bool{2: true}, name: map[int]string{1: "step name of oke.AwaitSignal"}},
	"AwaitSignalStep": {step: map[int]bool{3: true}, name: map[int]string{1: "step name of oke.AwaitSignalStep"}},
	"Claim":           {name: map[int]string{1: "claim key of oke.Claim"}},
	// oke.Go runs its function in a step of its own, at the same time as
	// the flow; every function of oke.First runs in its one step.
	"Go":    {step: map[int]bool{2: true}, name: map[int]string{1: "step name of oke.Go"}},
	"First": {step: argsFrom(2), name: map[int]string{1: "step name of oke.First"}},
	// A patch check decides once per run and saves a marker step.
	"Patched":        {name: map[int]string{1: "patch name of oke.Patched"}},
	"DeprecatePatch": {name: map[int]string{1: "patch name of oke.DeprecatePatch"}},
}

// argsFrom marks the arguments from i on (a variadic parameter's) as run in
// a step.
func argsFrom(i int) map[int]bool {
	m := map[int]bool{}
	for ; i < 64; i++ {
		m[i] = true
	}
	return m
}

// rolesOf returns the roles of a call's arguments, or nil.
func (p *pkg) rolesOf(fn *types.Func) *roles {
	if fn == nil || fn.Pkg() == nil {
		return nil
	}
	if fn.Pkg().Path() == okePath && fn.Signature().Recv() == nil {
		return builtinRoles[fn.Name()]
	}
	return p.roles[fn]
}

// computeRoles finds the package's step helpers: a function parameter that
// is only ever used inside a step (a helper that wraps oke.Step) runs in a
// step, and a string parameter used in a step name names one. Helpers of
// helpers are found by iterating to a fixed point.
func (p *pkg) computeRoles() {
	for round := 0; round < 8; round++ {
		changed := false
		for fn, d := range p.decls {
			sig := fn.Signature()
			n := sig.Params().Len()
			if sig.Variadic() {
				n--
			}
			var u *unit
			for i := 0; i < n; i++ {
				par := sig.Params().At(i)
				isFunc := false
				if _, ok := par.Type().Underlying().(*types.Signature); ok {
					isFunc = true
				}
				isString := types.Identical(par.Type().Underlying(), types.Typ[types.String])
				if !isFunc && !isString {
					continue
				}
				if u == nil {
					u = p.newUnit(d)
				}
				r := p.roles[fn]
				if isFunc && (r == nil || !r.step[i]) {
					if uses := u.uses[par]; len(uses) > 0 && u.allStepped(uses) {
						r = p.role(fn)
						r.step[i] = true
						changed = true
					}
				}
				if isString && (r == nil || r.name[i] == "") {
					for _, na := range u.names {
						if mentions(p.info, na.expr, par) {
							r = p.role(fn)
							r.name[i] = "step name passed to " + fn.Name()
							changed = true
							break
						}
					}
				}
			}
		}
		if !changed {
			return
		}
	}
}

func (p *pkg) role(fn *types.Func) *roles {
	r := p.roles[fn]
	if r == nil {
		r = &roles{step: map[int]bool{}, name: map[int]string{}}
		p.roles[fn] = r
	}
	return r
}

// A unit is one function oke vet checks as a whole: a flow's function or a
// helper it calls, with the closures inside it.
type unit struct {
	p        *pkg
	node     ast.Node // *ast.FuncLit or *ast.FuncDecl
	body     *ast.BlockStmt
	steps    []span // what runs in a step
	names    []nameArg
	uses     map[types.Object][]token.Pos
	assigned map[ast.Expr]types.Object // x in `v := x`, `var v = x`, `v = x`
	taint    map[types.Object]*origin  // computed on first use (names.go)
	mapLoops []mapLoop                 // computed with taint
}

type span struct{ pos, end token.Pos }

func (s span) holds(pos token.Pos) bool { return s.pos <= pos && pos < s.end }

// A nameArg is an argument that names a step (or a claim).
type nameArg struct {
	expr  ast.Expr
	label string
}

func (p *pkg) newUnit(node ast.Node) *unit {
	u := &unit{p: p, node: node, uses: map[types.Object][]token.Pos{}, assigned: map[ast.Expr]types.Object{}}
	switch n := node.(type) {
	case *ast.FuncDecl:
		u.body = n.Body
	case *ast.FuncLit:
		u.body = n.Body
	}
	if u.body == nil {
		return u
	}
	closures := map[types.Object]*ast.FuncLit{}
	ast.Inspect(u.body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Ident:
			if obj := p.info.Uses[n]; obj != nil {
				u.uses[obj] = append(u.uses[obj], n.Pos())
			}
		case *ast.CallExpr:
			if r := p.rolesOf(p.callee(n)); r != nil {
				for i, a := range n.Args {
					if r.step[i] {
						u.steps = append(u.steps, span{a.Pos(), a.End()})
					}
					if l := r.name[i]; l != "" {
						u.names = append(u.names, nameArg{a, l})
					}
				}
			}
		case *ast.AssignStmt:
			if len(n.Lhs) == len(n.Rhs) {
				for i, l := range n.Lhs {
					if id, ok := l.(*ast.Ident); ok {
						if obj := p.info.ObjectOf(id); obj != nil {
							u.assigned[n.Rhs[i]] = obj
							if lit, ok := n.Rhs[i].(*ast.FuncLit); ok && n.Tok == token.DEFINE {
								closures[obj] = lit
							}
						}
					}
				}
			}
		case *ast.ValueSpec:
			if len(n.Names) == len(n.Values) {
				for i, id := range n.Names {
					if obj := p.info.Defs[id]; obj != nil {
						u.assigned[n.Values[i]] = obj
						if lit, ok := n.Values[i].(*ast.FuncLit); ok {
							closures[obj] = lit
						}
					}
				}
			}
		}
		return true
	})
	// A closure used only inside steps runs in a step. Closures used in
	// such a closure are found on the next round.
	for changed := true; changed; {
		changed = false
		for obj, lit := range closures {
			if uses := u.uses[obj]; len(uses) > 0 && u.allStepped(uses) {
				u.steps = append(u.steps, span{lit.Pos(), lit.End()})
				delete(closures, obj)
				changed = true
			}
		}
	}
	return u
}

// stepped reports whether the code at pos runs in a step of the unit.
func (u *unit) stepped(pos token.Pos) bool {
	for _, s := range u.steps {
		if s.holds(pos) {
			return true
		}
	}
	return false
}

func (u *unit) allStepped(ps []token.Pos) bool {
	for _, pos := range ps {
		if !u.stepped(pos) {
			return false
		}
	}
	return true
}

// inName reports whether pos is inside an argument that names a step.
func (u *unit) inName(pos token.Pos) bool {
	for _, na := range u.names {
		if na.expr.Pos() <= pos && pos < na.expr.End() {
			return true
		}
	}
	return false
}

// mentions reports whether expression x refers to obj.
func mentions(info *types.Info, x ast.Node, obj types.Object) bool {
	found := false
	ast.Inspect(x, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && info.Uses[id] == obj {
			found = true
		}
		return !found
	})
	return found
}
