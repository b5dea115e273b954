package vet

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"

	"golang.org/x/tools/go/ast/astutil"
	"golang.org/x/tools/go/cfg"
)

// A group is what a goroutine can be waited for with: a sync.WaitGroup or
// errgroup.Group (wait: joined by key.Wait()) or a channel it closes or
// sends on (joined by a receive from key).
type group struct {
	key  string // the expression, as written: "wg", "s.wg", "done"
	wait bool
}

// checkGo checks a go statement (rule fxgoroutine).
func (f *frame) checkGo(g *ast.GoStmt) {
	if !f.usesFx(g.Call) {
		return
	}
	f.checkJoined(g, f.groupsOf(g.Call))
}

// checkLaunch checks a goroutine started by group.Go(fn) (sync.WaitGroup,
// errgroup.Group): it is joined by the group's Wait.
func (f *frame) checkLaunch(call *ast.CallExpr, args []ast.Expr, groups []group) {
	uses := false
	for _, a := range args {
		uses = uses || f.usesFx(a)
	}
	if uses {
		f.checkJoined(call, groups)
	}
}

// usesFx reports whether n refers to a variable holding fx, a *oke.Store or
// a *oke.Tx (a parameter, a captured variable, a field).
func (f *frame) usesFx(n ast.Node) bool {
	found := false
	ast.Inspect(n, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok {
			if v, ok := f.c.p.info.Uses[id].(*types.Var); ok && isFxHandle(v.Type()) {
				found = true
			}
		}
		return !found
	})
	return found
}

// groupsOf finds what a goroutine can be waited for with: the WaitGroups
// its function literal calls Done on, the channels it closes or sends on,
// and the *sync.WaitGroup and channel arguments it is started with.
func (f *frame) groupsOf(call *ast.CallExpr) []group {
	info := f.c.p.info
	var gs []group
	if lit, ok := astutil.Unparen(call.Fun).(*ast.FuncLit); ok {
		ast.Inspect(lit.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Done" && isNamed(info.TypeOf(sel.X), "sync", "WaitGroup") {
					gs = append(gs, group{exprKey(sel.X), true})
				}
				if id, ok := n.Fun.(*ast.Ident); ok && len(n.Args) == 1 {
					if b, ok := info.Uses[id].(*types.Builtin); ok && b.Name() == "close" {
						gs = append(gs, group{exprKey(n.Args[0]), false})
					}
				}
			case *ast.SendStmt:
				gs = append(gs, group{exprKey(n.Chan), false})
			}
			return true
		})
	}
	for _, a := range call.Args {
		t := info.TypeOf(a)
		if isNamed(t, "sync", "WaitGroup") {
			gs = append(gs, group{exprKey(a), true})
		} else if t != nil {
			if _, ok := t.Underlying().(*types.Chan); ok {
				gs = append(gs, group{exprKey(a), false})
			}
		}
	}
	return gs
}

// exprKey is how a group is recognized: its expression without &, * and
// parentheses.
func exprKey(x ast.Expr) string {
	for {
		switch e := x.(type) {
		case *ast.ParenExpr:
			x = e.X
		case *ast.StarExpr:
			x = e.X
		case *ast.UnaryExpr:
			if e.Op != token.AND {
				return types.ExprString(x)
			}
			x = e.X
		default:
			return types.ExprString(x)
		}
	}
}

// checkJoined reports the goroutine started at launch unless, in the
// function that starts it, every path from the launch to a return passes a
// wait on one of its groups (or a deferred wait registered before it).
func (f *frame) checkJoined(launch ast.Node, groups []group) {
	ok, g, ret := f.joined(launch, groups)
	if ok {
		return
	}
	why := "its effects can happen after that, outside every step and after the run's outcome is saved, and again on every pick-up"
	fix := `wait for it before every return (sync.WaitGroup.Wait, errgroup.Group.Wait), or do the work in oke.Step(ctx, "name", …)`
	var what string
	switch {
	case g == nil:
		what = "nothing waits for it before the function returns"
	case g.wait:
		what = fmt.Sprintf("the return at %s is reached without %s.Wait()", f.at(ret), g.key)
	default:
		what = fmt.Sprintf("the return at %s is reached without a receive from %s", f.at(ret), g.key)
	}
	f.c.add("fxgoroutine", launch.Pos(), fmt.Sprintf("goroutine in %s uses fx, and %s: %s; %s", f.where(), what, why, fix))
}

// joined reports whether the goroutine is waited for; if not, it returns
// its first group (nil if it has none) and a return reached without
// waiting.
func (f *frame) joined(launch ast.Node, groups []group) (bool, *group, token.Pos) {
	file := f.c.p.fileOf(launch.Pos())
	if file == nil {
		return true, nil, token.NoPos // not in the package's files: nothing to say
	}
	var body *ast.BlockStmt
	path, _ := astutil.PathEnclosingInterval(file, launch.Pos(), launch.End())
	for _, n := range path {
		if lit, ok := n.(*ast.FuncLit); ok {
			body = lit.Body
			break
		}
		if d, ok := n.(*ast.FuncDecl); ok {
			body = d.Body
			break
		}
	}
	if body == nil {
		return true, nil, token.NoPos
	}
	if len(groups) == 0 {
		return false, nil, token.NoPos
	}
	g := f.c.cfg(body)
	lb, li := locate(g, launch)
	if lb == nil {
		return true, nil, token.NoPos // unreachable code: it never starts
	}
	var first token.Pos
	for i := range groups {
		gr := &groups[i]
		// A deferred wait registered on every path to the launch waits at
		// every return after it.
		deferred := func(b *cfg.Block, n ast.Node) bool {
			_, ok := n.(*ast.DeferStmt)
			return ok && f.joins(n, gr)
		}
		if search(g.Blocks[0], 0, deferred, func(n ast.Node) bool { return n == lb.Nodes[li] }) == nil {
			return true, nil, token.NoPos
		}
		wait := func(_ *cfg.Block, n ast.Node) bool { return f.joins(n, gr) }
		ret := search(lb, li+1, wait, nil)
		if ret == nil {
			return true, nil, token.NoPos
		}
		if first == token.NoPos {
			first = ret.Pos()
		}
	}
	return false, &groups[0], first
}

// locate finds the CFG node that holds launch.
func locate(g *cfg.CFG, launch ast.Node) (*cfg.Block, int) {
	for _, b := range g.Blocks {
		if !b.Live {
			continue
		}
		for i, n := range b.Nodes {
			if n.Pos() <= launch.Pos() && launch.End() <= n.End() {
				return b, i
			}
		}
	}
	return nil, 0
}

// search walks the CFG from node from of block start, not past nodes for
// which stop is true, and returns the first node for which goal is true —
// or, with a nil goal, the first return statement it reaches. Paths that
// end in a call that does not return (panic) reach nothing.
func search(start *cfg.Block, from int, stop func(*cfg.Block, ast.Node) bool, goal func(ast.Node) bool) ast.Node {
	type item struct {
		b    *cfg.Block
		from int
	}
	seen := map[*cfg.Block]bool{}
	stack := []item{{start, from}}
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		stopped := false
		for _, n := range it.b.Nodes[it.from:] {
			if goal != nil && goal(n) {
				return n
			}
			if stop(it.b, n) {
				stopped = true
				break
			}
		}
		if stopped {
			continue
		}
		if len(it.b.Succs) == 0 && goal == nil && len(it.b.Nodes) > 0 {
			if r, ok := it.b.Nodes[len(it.b.Nodes)-1].(*ast.ReturnStmt); ok {
				return r
			}
		}
		for _, s := range it.b.Succs {
			if !seen[s] {
				seen[s] = true
				stack = append(stack, item{s, 0})
			}
		}
	}
	return nil
}

// joins reports whether CFG node n waits for group gr.
func (f *frame) joins(n ast.Node, gr *group) bool {
	if x, ok := n.(ast.Expr); ok && !gr.wait && f.c.rangeX[x] && exprKey(x) == gr.key {
		return true // for range ch: until it is closed
	}
	found := false
	ast.Inspect(n, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok && gr.wait && sel.Sel.Name == "Wait" && exprKey(sel.X) == gr.key {
				found = true
			}
		case *ast.UnaryExpr:
			if !gr.wait && n.Op == token.ARROW && exprKey(n.X) == gr.key {
				found = true
			}
		}
		return !found
	})
	return found
}

// cfg is the control-flow graph of a function body.
func (c *checker) cfg(body *ast.BlockStmt) *cfg.CFG {
	if g := c.cfgs[body]; g != nil {
		return g
	}
	g := cfg.New(body, c.mayReturn)
	c.cfgs[body] = g
	ast.Inspect(body, func(n ast.Node) bool {
		if rs, ok := n.(*ast.RangeStmt); ok {
			c.rangeX[rs.X] = true
		}
		return true
	})
	return g
}

// mayReturn reports whether a call may return: panic, os.Exit, log.Fatal…,
// runtime.Goexit and t.Fatal… do not.
func (c *checker) mayReturn(call *ast.CallExpr) bool {
	if id, ok := astutil.Unparen(call.Fun).(*ast.Ident); ok {
		if b, ok := c.p.info.Uses[id].(*types.Builtin); ok && b.Name() == "panic" {
			return false
		}
	}
	fn := c.p.callee(call)
	if fn == nil || fn.Pkg() == nil {
		return true
	}
	switch fn.Pkg().Path() + "." + fn.Name() {
	case "os.Exit", "runtime.Goexit", "log.Fatal", "log.Fatalf", "log.Fatalln", "log.Panic", "log.Panicf", "log.Panicln",
		"testing.Fatal", "testing.Fatalf", "testing.FailNow", "testing.Skip", "testing.Skipf", "testing.SkipNow":
		return false
	}
	return true
}
