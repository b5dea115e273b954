package vet

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"strings"

	"golang.org/x/tools/go/ast/astutil"
)

// reachState is what the cross-package rules (nondetreach, rawio,
// selectchoice, maporder) keep per package: the facts of Reach, and per
// unit the identifiers called and assigned.
type reachState struct {
	r       *reachResult
	mutable map[*types.Var]token.Pos // package variables this package assigns after their declaration
	units   map[*unit]*reachUnit
}

type reachUnit struct {
	called map[*ast.Ident]*ast.CallExpr // the function identifiers of calls
	writes map[*ast.Ident]bool          // identifiers assigned to
}

func (c *checker) reachUnit(u *unit) *reachUnit {
	if ru := c.rx.units[u]; ru != nil {
		return ru
	}
	ru := &reachUnit{called: map[*ast.Ident]*ast.CallExpr{}, writes: lhsIdents(u.body)}
	if u.body != nil {
		ast.Inspect(u.body, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if id := funIdent(call.Fun); id != nil {
					ru.called[id] = call
				}
			}
			return true
		})
	}
	c.rx.units[u] = ru
	return ru
}

// funIdent is the identifier that names the function of a call: F in F(),
// pkg.F(), x.M(), F[T]().
func funIdent(x ast.Expr) *ast.Ident {
	switch x := astutil.Unparen(x).(type) {
	case *ast.Ident:
		return x
	case *ast.SelectorExpr:
		return x.Sel
	case *ast.IndexExpr:
		return funIdent(x.X)
	case *ast.IndexListExpr:
		return funIdent(x.X)
	}
	return nil
}

// The rule of each kind of hit, and what to say.
var hitRules = [numHitKinds]struct{ rule, why, fix string }{
	hitTime:   {"nondetreach", "the value changes on every pick-up", `move the call into oke.Step(ctx, "name", …), or take the time in a step and pass it in`},
	hitRand:   {"nondetreach", "it draws another value on every pick-up", `move the call into oke.Step(ctx, "name", …), which saves its result`},
	hitID:     {"nondetreach", "the id changes on every pick-up, so later steps would create things under another id", `draw the id with oke.NewID(ctx, "name") and pass it in, or move the call into oke.Step(ctx, "name", …)`},
	hitEnv:    {"nondetreach", "the environment can differ on the next pick-up (another process, another deploy)", "read it once at start-up and keep it in the server the flow is built from, or pass it in the flow's input"},
	hitGlobal: {"nondetreach", "it can change between pick-ups, and a new process starts again from its initial value", `pass the value in the flow's input, or read it in oke.Step(ctx, "name", …) so that the value is saved`},
	hitTimer:  {"nondetreach", "a timer does not survive a pick-up: it starts again from zero, and the wait is not saved", `wait with oke.Sleep(ctx, "name", d) or oke.SleepUntil, which are durable`},
	hitSelect: {"selectchoice", "which ready case runs is chosen at random, so a pick-up may take another branch than the first attempt did", `make the choice in oke.Step(ctx, "name", …) so that it is saved, or wait on one channel`},
	hitIO:     {"rawio", "a raw call oke cannot see: it runs again on every pick-up, and its answer may differ", `move it into oke.Step(ctx, "name", …), and send it through fx there (fx.Store, fx.HTTPClient, fx.Raw) so that oke knows what it does`},
}

// reach checks node n of the frame's unit for the cross-package rules.
func (f *frame) reach(n ast.Node) {
	if n == nil || f.c.rx == nil {
		return
	}
	c := f.c
	switch n := n.(type) {
	case *ast.SelectStmt:
		if f.stepped(n.Pos()) {
			return
		}
		if what, ok := selectChoice(n); ok {
			f.hit(n.Pos(), what, reachHit{Kind: hitSelect, What: what, At: f.at(n.Pos())}, true)
		}
	case *ast.CallExpr:
		if f.stepped(n.Pos()) {
			return
		}
		if h, ok := c.p.ioHit(n); ok {
			h.At = f.at(n.Pos())
			f.hit(n.Pos(), h.What, h, true)
		}
	case *ast.Ident:
		if f.stepped(n.Pos()) {
			return
		}
		ru := c.reachUnit(f.u)
		switch obj := c.p.info.Uses[n].(type) {
		case *types.Func:
			call := ru.called[n]
			if h, ok := directFuncHit(obj); ok {
				if h.Kind == hitTimer || h.Kind == hitEnv { // the clock, randomness and ids are nondetoutsidestep's
					h.At = f.at(n.Pos())
					f.hit(n.Pos(), h.What, h, true)
				}
				return
			}
			fn := obj.Origin()
			if f.visiting[fn] || call != nil && f.follows(call, fn) {
				return // its code is checked where it is, for this flow
			}
			fact := c.rx.r.of(fn)
			if fact == nil {
				return
			}
			subject := "call of " + funcName(fn)
			if call == nil {
				subject = "function value " + funcName(fn)
				if obj.Signature().Recv() != nil {
					subject = "method value " + funcName(fn)
				}
			}
			pos := n.Pos()
			if call != nil {
				pos = call.Pos()
			}
			f.hits(pos, subject, fact.Hits)
		case *types.Var:
			if ru.writes[n] || obj.Pkg() == nil || obj.Parent() != obj.Pkg().Scope() {
				return
			}
			name := obj.Pkg().Name() + "." + obj.Name()
			vf := c.rx.r.varOf(obj)
			mut := ""
			if pos, ok := c.rx.mutable[obj]; ok {
				mut = f.at(pos)
			} else if vf != nil {
				mut = vf.Mutable
			}
			if mut != "" {
				what := "package variable " + name + " (assigned at " + mut + ")"
				f.hit(n.Pos(), "read of package variable "+name, reachHit{Kind: hitGlobal, What: what, At: f.at(n.Pos())}, true)
				return
			}
			if vf != nil && vf.Bound != nil {
				f.hits(n.Pos(), "function variable "+name, vf.Bound.Hits)
			}
		}
	}
}

// follows reports whether the engine follows the call into fn (a helper of
// the package that gets fx, not too deep): then what fn does is checked in
// fn's own code, for this flow, and its fact is not used.
func (f *frame) follows(call *ast.CallExpr, fn *types.Func) bool {
	p := f.c.p
	if f.depth >= maxDepth || fn.Pkg() != p.pass.Pkg || p.decls[fn] == nil {
		return false
	}
	for _, a := range call.Args {
		if isFxHandle(p.info.TypeOf(a)) {
			return true
		}
	}
	return false
}

// hits reports, for each rule, the first of hits.
func (f *frame) hits(pos token.Pos, subject string, hits []reachHit) {
	done := map[string]bool{}
	for _, h := range hits {
		rule := hitRules[h.Kind].rule
		if done[rule] {
			continue
		}
		done[rule] = true
		f.hit(pos, subject, h, false)
	}
}

// hit reports one thing reached outside a step: in the flow's own code at
// pos; in a helper the engine follows, at the flow's call of it. Direct
// says the subject is the hit itself (os.Getenv here), not a call that
// reaches it.
func (f *frame) hit(pos token.Pos, subject string, h reachHit, direct bool) {
	k := hitRules[h.Kind]
	chain := append(append([]string(nil), f.chain...), h.Chain...)
	if f.depth > 0 {
		pos, subject, direct = f.site.Pos(), "call of "+f.chain[0], false
	}
	if direct {
		f.c.add(k.rule, pos, fmt.Sprintf("%s outside a step in durable flow %q: %s; %s", subject, f.flow.name, k.why, k.fix))
		return
	}
	through := ""
	if len(chain) > 0 {
		through = " (through " + strings.Join(chain, " → ") + ")"
	}
	f.c.add(k.rule, pos, fmt.Sprintf("%s outside a step in durable flow %q reaches %s at %s%s: %s; %s",
		subject, f.flow.name, h.What, h.At, through, k.why, k.fix))
}

// checkOrder reports map order that flows, outside a step, into something
// kept or answered (rule maporder).
func (f *frame) checkOrder() {
	if f.c.rx == nil || f.u.body == nil {
		return
	}
	_, uses := f.c.p.orderOf(f.c.rx.r, f.u.body, f.stepped, f.at)
	for _, u := range uses {
		pos, where := u.pos, ""
		if f.depth > 0 {
			pos, where = f.site.Pos(), " (in "+strings.Join(f.chain, " → ")+", at "+f.at(u.pos)+")"
		}
		f.c.add("maporder", pos, fmt.Sprintf("map order outside a step in durable flow %q%s: %s: the order changes from one pick-up to the next, so what is saved or answered differs; range over sorted keys (for _, k := range slices.Sorted(maps.Keys(m))), or sort the result",
			f.flow.name, where, u.msg))
	}
}
