package vet

import (
	"go/ast"
	"go/token"
	"go/types"
)

// An origin is where a nondeterministic value comes from.
type origin struct {
	what string // "time.Now", "the order of a range over a map"
	kind nondetKind
	pos  token.Pos
}

// originOf says whether expression x is computed from something
// nondeterministic, following the unit's local data flow: a variable is
// tainted when any assignment to it (anywhere in the unit, in any order)
// has a tainted value, or when it is the key or value of a range over a
// map. Calls pass taint from their arguments and receiver to their result
// (fmt.Sprintf, strconv.Itoa, t.Format); what a called function does inside
// is not looked at.
//
// With inOrder false — a claim key, which is found by its value and not by
// its place among the steps — map order does not count.
func (u *unit) originOf(x ast.Expr, inOrder bool) *origin {
	if u.taint == nil {
		u.computeTaint()
	}
	return u.exprOrigin(x, !inOrder)
}

// loopOrigin says whether pos is in the body of a range over a map of the
// unit: a step taken there comes in map order whatever its name.
func (u *unit) loopOrigin(pos token.Pos) *origin {
	if u.taint == nil {
		u.computeTaint()
	}
	for _, l := range u.mapLoops {
		if l.body.holds(pos) {
			return &origin{"the order of a range over a map", kindMapOrder, l.pos}
		}
	}
	return nil
}

// exprOrigin is originOf for any expression, without map order when
// skipMap is set.
func (u *unit) exprOrigin(x ast.Node, skipMap bool) *origin {
	var o *origin
	ast.Inspect(x, func(n ast.Node) bool {
		if o != nil {
			return false
		}
		switch n := n.(type) {
		case *ast.FuncLit:
			return false // a closure's body is not its value
		case *ast.Ident:
			obj := u.p.info.Uses[n]
			if src, ok := nondetSource(obj); ok {
				o = &origin{src.what, src.kind, n.Pos()}
			} else if t := u.taint[obj]; t != nil && !(skipMap && t.kind == kindMapOrder) {
				o = t
			}
		case *ast.CallExpr:
			if skipMap {
				break
			}
			// slices.Collect(maps.Keys(m)) is in map order (slices.Sorted is not).
			if fn := u.p.callee(n); fn != nil && fn.Pkg() != nil && fn.Pkg().Path() == "slices" &&
				(fn.Name() == "Collect" || fn.Name() == "AppendSeq") {
				for _, a := range n.Args {
					if u.mapSeq(a) {
						o = &origin{"the order of a map (" + fn.Name() + " of " + types.ExprString(a) + ")", kindMapOrder, a.Pos()}
					}
				}
			}
		}
		return o == nil
	})
	return o
}

// mapSeq reports whether x is a map or an iterator over one in map order
// (maps.Keys, maps.Values, maps.All).
func (u *unit) mapSeq(x ast.Expr) bool {
	if t := u.p.info.TypeOf(x); t != nil {
		if _, ok := t.Underlying().(*types.Map); ok {
			return true
		}
	}
	call, ok := x.(*ast.CallExpr)
	if !ok {
		return false
	}
	fn := u.p.callee(call)
	return fn != nil && fn.Pkg() != nil && fn.Pkg().Path() == "maps" &&
		(fn.Name() == "Keys" || fn.Name() == "Values" || fn.Name() == "All")
}

// An assignment is one flow of a value into variables.
type assignment struct {
	lhs []types.Object
	rhs ast.Expr // nil for a range over a map
	rng *ast.RangeStmt
}

func (u *unit) computeTaint() {
	u.taint = map[types.Object]*origin{}
	if u.body == nil {
		return
	}
	info := u.p.info
	var as []assignment
	root := func(x ast.Expr) types.Object { // v in v, v.f, v[i], *v
		for {
			switch e := x.(type) {
			case *ast.Ident:
				return info.ObjectOf(e)
			case *ast.SelectorExpr:
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
	}
	ast.Inspect(u.body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			if len(n.Lhs) == len(n.Rhs) {
				for i := range n.Lhs {
					as = append(as, assignment{lhs: []types.Object{root(n.Lhs[i])}, rhs: n.Rhs[i]})
				}
			} else if len(n.Rhs) == 1 {
				a := assignment{rhs: n.Rhs[0]}
				for _, l := range n.Lhs {
					a.lhs = append(a.lhs, root(l))
				}
				as = append(as, a)
			}
		case *ast.ValueSpec:
			if len(n.Names) == len(n.Values) {
				for i, id := range n.Names {
					as = append(as, assignment{lhs: []types.Object{info.Defs[id]}, rhs: n.Values[i]})
				}
			} else if len(n.Values) == 1 {
				a := assignment{rhs: n.Values[0]}
				for _, id := range n.Names {
					a.lhs = append(a.lhs, info.Defs[id])
				}
				as = append(as, a)
			}
		case *ast.RangeStmt:
			if u.mapSeq(n.X) {
				u.mapLoops = append(u.mapLoops, mapLoop{n.Pos(), span{n.Body.Pos(), n.Body.End()}})
			}
			var lhs []types.Object
			if n.Key != nil {
				lhs = append(lhs, root(n.Key))
			}
			if n.Value != nil {
				lhs = append(lhs, root(n.Value))
			}
			if len(lhs) > 0 {
				as = append(as, assignment{lhs: lhs, rng: n})
			}
		}
		return true
	})
	for changed := true; changed; {
		changed = false
		for _, a := range as {
			var o *origin
			switch {
			case a.rng != nil && u.mapSeq(a.rng.X):
				o = &origin{"the order of a range over a map", kindMapOrder, a.rng.Pos()}
			case a.rng != nil:
				if o = u.exprOrigin(a.rng.X, false); o != nil && a.rng.Key != nil {
					// The index of a slice is not what is nondeterministic
					// about it; its elements are.
					if t := info.TypeOf(a.rng.X); t != nil && !isMapOrChan(t) {
						if v := root(a.rng.Value); v != nil && u.taint[v] == nil {
							u.taint[v] = o
							changed = true
						}
						continue
					}
				}
			default:
				o = u.exprOrigin(a.rhs, false)
			}
			if o == nil {
				continue
			}
			for _, v := range a.lhs {
				if v != nil && u.taint[v] == nil {
					u.taint[v] = o
					changed = true
				}
			}
		}
	}
}

// A mapLoop is a range over a map.
type mapLoop struct {
	pos  token.Pos
	body span
}

func isMapOrChan(t types.Type) bool {
	switch t.Underlying().(type) {
	case *types.Map, *types.Chan:
		return true
	}
	return false
}
