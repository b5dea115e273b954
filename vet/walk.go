package vet

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/cfg"
)

// maxDepth is how many calls deep the checks follow fx into helpers of the
// same package.
const maxDepth = 2

// A checker holds the findings of one package.
type checker struct {
	p        *pkg
	findings []finding
	seen     map[string]bool
	sites    map[siteKey]*siteFinding
	units    map[ast.Node]*unit
	cfgs     map[ast.Node]*cfg.CFG
	rangeX   map[ast.Expr]bool // what the range statements of the bodies in cfgs range over
	rx       *reachState       // the cross-package rules' state (reachcheck.go)
}

// A siteFinding gathers what the calls outside a step of a flow reach: it is
// reported once, at the call, with the first thing found and how many more.
type siteKey struct {
	rule string
	pos  token.Pos
}

type siteFinding struct {
	flow, call, what, through, at, why string
	more                               int
}

func runEngine(pass *analysis.Pass) (any, error) {
	p := newPkg(pass)
	c := &checker{p: p, seen: map[string]bool{}, sites: map[siteKey]*siteFinding{},
		units: map[ast.Node]*unit{}, cfgs: map[ast.Node]*cfg.CFG{}, rangeX: map[ast.Expr]bool{}}
	if r, ok := pass.ResultOf[Reach].(*reachResult); ok {
		c.rx = &reachState{r: r, mutable: mutableVars(pass), units: map[*unit]*reachUnit{}}
	}
	var durable []*flow
	for _, fl := range p.flows() {
		if fl.durable && fl.fn != nil {
			durable = append(durable, fl)
		}
	}
	if len(durable) > 0 {
		p.computeRoles()
	}
	for _, fl := range durable {
		fr := &frame{c: c, flow: fl, u: c.unit(fl.fn), visiting: map[*types.Func]bool{}}
		if d, ok := fl.fn.(*ast.FuncDecl); ok {
			if fn, ok := p.info.Defs[d.Name].(*types.Func); ok {
				fr.visiting[fn] = true
			}
		}
		fr.walk()
	}
	for k, s := range c.sites {
		through := ""
		if s.through != "" {
			through = " (through " + s.through + ")"
		}
		more := ""
		if s.more > 0 {
			more = fmt.Sprintf(" (and %d more)", s.more)
		}
		c.add(k.rule, k.pos, fmt.Sprintf(`call of %s outside a step in durable flow %q reaches %s at %s%s%s: %s; move the call into oke.Step(ctx, "name", …)`,
			s.call, s.flow, s.what, s.at, through, more, s.why))
	}
	ig, bare := collectIgnores(pass)
	c.findings = append(c.findings, bare...)
	sort.SliceStable(c.findings, func(i, j int) bool { return c.findings[i].pos < c.findings[j].pos })
	return &result{findings: c.findings, ignores: ig}, nil
}

func (c *checker) unit(n ast.Node) *unit {
	u := c.units[n]
	if u == nil {
		u = c.p.newUnit(n)
		c.units[n] = u
	}
	return u
}

// add records a finding, once per rule and position.
func (c *checker) add(rule string, pos token.Pos, msg string) {
	k := fmt.Sprint(rule, pos)
	if c.seen[k] {
		return
	}
	c.seen[k] = true
	c.findings = append(c.findings, finding{rule, pos, msg})
}

// A frame is one unit being checked for one flow, reached from the flow's
// function through chain.
type frame struct {
	c        *checker
	flow     *flow
	u        *unit
	depth    int
	chain    []string      // the calls followed from the flow's function
	site     *ast.CallExpr // at depth > 0: the call in the flow's function that led here
	inStep   bool          // the unit was called from inside a step
	visiting map[*types.Func]bool
}

func (f *frame) walk() {
	if f.u.body == nil {
		return
	}
	f.checkOrder()
	ast.Inspect(f.u.body, func(n ast.Node) bool {
		f.reach(n)
		switch n := n.(type) {
		case *ast.GoStmt:
			f.checkGo(n)
		case *ast.CallExpr:
			f.checkCall(n)
		case *ast.SelectorExpr:
			if f.checkSource(n.Sel, n.Pos()) {
				return false
			}
		case *ast.Ident:
			f.checkSource(n, n.Pos())
		}
		return true
	})
}

func (f *frame) stepped(pos token.Pos) bool { return f.inStep || f.u.stepped(pos) }

// where names the flow, and at depth > 0 the calls that led here.
func (f *frame) where() string {
	s := fmt.Sprintf("durable flow %q", f.flow.name)
	if len(f.chain) > 0 {
		s += " (reached through " + strings.Join(f.chain, " → ") + ")"
	}
	return s
}

func (f *frame) at(pos token.Pos) string {
	p := f.c.p.pass.Fset.Position(pos)
	return fmt.Sprintf("%s:%d", filepath.Base(p.Filename), p.Line)
}

// outside records something that must not happen outside a step: at the
// flow's own code where it is, else at the call that led to it.
func (f *frame) outside(rule string, pos token.Pos, what, why, fix string) {
	if f.depth == 0 {
		f.c.add(rule, pos, fmt.Sprintf("%s outside a step in durable flow %q: %s; %s", what, f.flow.name, why, fix))
		return
	}
	k := siteKey{rule, f.site.Pos()}
	if s := f.c.sites[k]; s != nil {
		s.more++
		return
	}
	through := ""
	if len(f.chain) > 1 {
		through = strings.Join(f.chain, " → ")
	}
	f.c.sites[k] = &siteFinding{flow: f.flow.name, call: f.chain[0], what: what, through: through, at: f.at(pos), why: why}
}

// checkSource reports a nondeterministic value drawn outside a step (rule
// nondetoutsidestep); in a step name it is rule nondetstepname's.
func (f *frame) checkSource(id *ast.Ident, pos token.Pos) bool {
	src, ok := nondetSource(f.c.p.info.Uses[id])
	if !ok {
		return false
	}
	if f.stepped(pos) || f.u.inName(pos) {
		return true
	}
	why, fix := "the value changes on every pick-up", `draw it in oke.Step(ctx, "now", …)`
	switch {
	case src.kind == kindTime && src.what != "time.Now":
		fix = `take the time in oke.Step(ctx, "now", …) and compute from the saved value`
	case src.kind == kindRand:
		why, fix = "it draws another value on every pick-up", `draw it in oke.Step(ctx, "name", …)`
	case src.kind == kindID:
		why, fix = "the id changes on every pick-up, so later steps would create things under another id", `draw it with oke.NewID(ctx, "name"), which saves it`
	}
	f.outside("nondetoutsidestep", pos, src.what, why, fix)
	return true
}

func (f *frame) checkCall(call *ast.CallExpr) {
	p := f.c.p
	fn := p.callee(call)
	if !f.stepped(call.Pos()) {
		if e, ok := f.effectOf(call, fn); ok {
			f.outside("effectoutsidestep", call.Pos(), e.what, e.why, e.fix)
		}
	}
	if r := p.rolesOf(fn); r != nil {
		for i, a := range call.Args {
			if l := r.name[i]; l != "" {
				f.checkName(call, a, l)
			}
		}
	}
	if fn != nil && fn.Name() == "Go" && fn.Signature().Recv() != nil && isGroup(fn.Signature().Recv().Type()) {
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
			f.checkLaunch(call, call.Args, []group{{key: exprKey(sel.X), wait: true}})
		}
	}
	f.follow(call, fn)
}

// effectOf says whether call is an effect, and which.
func (f *frame) effectOf(call *ast.CallExpr, fn *types.Func) (effect, bool) {
	if recv, ok := okeMethod(fn); ok {
		switch recv {
		case "Fx":
			e, ok := fxEffects[fn.Name()]
			if ok && fn.Name() == "HTTPClient" && f.onlyUsedInSteps(call) {
				return effect{}, false
			}
			return e, ok
		case "Store", "Tx":
			switch fn.Name() {
			case "Exec", "Query", "QueryRow":
				if len(call.Args) >= 2 {
					return storeEffect(f.c.p.info, recv, fn.Name(), call.Args[1])
				}
			}
		}
		return effect{}, false
	}
	if fn != nil && fn.Pkg() != nil && fn.Pkg().Path() == okePath && fn.Signature().Recv() == nil {
		e, ok := okeEffects[fn.Name()]
		return e, ok
	}
	return effect{}, false
}

// onlyUsedInSteps reports whether x's value is kept in a variable that is
// only used inside steps (a client taken outside a step and used inside
// one).
func (f *frame) onlyUsedInSteps(x ast.Expr) bool {
	obj := f.u.assigned[x]
	if obj == nil {
		return false
	}
	uses := f.u.uses[obj]
	if len(uses) == 0 {
		return false
	}
	for _, pos := range uses {
		if !f.stepped(pos) {
			return false
		}
	}
	return true
}

// checkName reports a step name computed from something nondeterministic
// (rule nondetstepname).
func (f *frame) checkName(call *ast.CallExpr, x ast.Expr, label string) {
	claim := strings.HasPrefix(label, "claim key")
	o := f.u.originOf(x, !claim)
	loop := false
	if o == nil && !claim {
		o, loop = f.u.loopOrigin(call.Pos()), true
	}
	if o == nil {
		return
	}
	var why, fix string
	switch {
	case loop:
		f.c.add("nondetstepname", x.Pos(), fmt.Sprintf("%s in %s is taken inside a range over a map (%s): %s; %s",
			label, f.where(), f.at(o.pos),
			"the steps come in map order, which changes from one pick-up to the next, so each gets back the result another one saved, or the run fails (StepMismatchError)",
			"range over sorted keys (for _, k := range slices.Sorted(maps.Keys(m)))"))
		return
	case o.kind == kindMapOrder:
		why = "map order changes from one pick-up to the next, so the steps come in another order than the journal saved them and the run fails (StepMismatchError)"
		fix = "range over sorted keys (for _, k := range slices.Sorted(maps.Keys(m)))"
	case claim:
		why = "it differs on every pick-up, so the claim stops no duplicate run"
		fix = `build the key from the input ("order:"+in.OrderID)`
	default:
		why = "it differs on every pick-up, so the run never finds the step it saved and runs it again"
		fix = "name the step with a constant, the input, or a loop index over a slice"
	}
	f.c.add("nondetstepname", x.Pos(), fmt.Sprintf("%s in %s comes from %s (%s): %s; %s",
		label, f.where(), o.what, f.at(o.pos), why, fix))
}

// follow checks a same-package function that the call passes fx, a Store or
// a Tx to, with what it does counted at this call.
func (f *frame) follow(call *ast.CallExpr, fn *types.Func) {
	p := f.c.p
	if f.depth >= maxDepth || fn == nil || fn.Pkg() != p.pass.Pkg || f.visiting[fn] {
		return
	}
	d := p.decls[fn]
	if d == nil {
		return
	}
	passes := false
	for _, a := range call.Args {
		passes = passes || isFxHandle(p.info.TypeOf(a))
	}
	if !passes {
		return
	}
	sub := &frame{c: f.c, flow: f.flow, u: f.c.unit(d), depth: f.depth + 1,
		chain: append(append([]string(nil), f.chain...), types.ExprString(call.Fun)),
		site:  f.site, inStep: f.stepped(call.Pos()), visiting: map[*types.Func]bool{fn: true}}
	if sub.site == nil {
		sub.site = call
	}
	for k := range f.visiting {
		sub.visiting[k] = true
	}
	sub.walk()
}
