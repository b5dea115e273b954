package vet

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
)

// An orderedVar is a variable whose value is in map order: a slice
// appended to, or a string or builder written to, in a range over a map,
// or a slice collected from a map's iterator — and not sorted anywhere in
// the function.
type orderedVar struct {
	what string    // "slice keys is appended to in a range over a map"
	pos  token.Pos // the range (or the call) that gives the order
	loop span      // the body that fills it (empty for a collected slice)
}

// An orderUse is map order reaching something that is kept or answered.
type orderUse struct {
	pos token.Pos
	msg string // without the flow: "slice keys, appended to in a range over a map (x.go:3), is returned"
}

// sortFuncs sort their first argument in place.
var sortFuncs = map[string]bool{
	"sort.Strings": true, "sort.Ints": true, "sort.Float64s": true, "sort.Slice": true, "sort.SliceStable": true,
	"sort.Sort": true, "sort.Stable": true, "slices.Sort": true, "slices.SortFunc": true, "slices.SortStableFunc": true,
}

// orderOf analyzes map order in body: the variables that hold it, and
// where it escapes into something kept or answered. Code for which skip is
// true (inside a step) is not looked at.
func (p *pkg) orderOf(r *reachResult, body *ast.BlockStmt, skip func(token.Pos) bool, at func(token.Pos) string) (map[types.Object]*orderedVar, []orderUse) {
	vars := map[types.Object]*orderedVar{}
	var uses []orderUse
	if body == nil {
		return vars, nil
	}
	info := p.info
	obj := func(x ast.Expr) types.Object {
		if id, ok := x.(*ast.Ident); ok {
			return info.ObjectOf(id)
		}
		return nil
	}
	declaredIn := func(o types.Object, s span) bool { return o != nil && s.holds(o.Pos()) }
	sorted := map[types.Object]bool{}
	consumed := map[ast.Expr]bool{} // order-giving calls assigned to a variable
	var loops []span
	orderCall := func(x ast.Expr) (string, bool) { return p.orderCall(r, x) }
	ast.Inspect(body, func(n ast.Node) bool {
		if n == nil {
			return false
		}
		if skip(n.Pos()) {
			return false
		}
		switch n := n.(type) {
		case *ast.CallExpr:
			if fn := p.callee(n); fn != nil && fn.Pkg() != nil && sortFuncs[fn.Pkg().Path()+"."+fn.Name()] && len(n.Args) > 0 {
				if id := rootIdent(n.Args[0]); id != nil {
					sorted[info.ObjectOf(id)] = true
				}
			}
		case *ast.AssignStmt:
			if len(n.Lhs) == len(n.Rhs) {
				for i, l := range n.Lhs {
					if what, ok := orderCall(n.Rhs[i]); ok {
						consumed[n.Rhs[i]] = true
						if o := obj(l); o != nil && vars[o] == nil {
							vars[o] = &orderedVar{what: types.ExprString(l) + " holds " + what, pos: n.Rhs[i].Pos()}
						}
					}
				}
			}
		case *ast.ValueSpec:
			for i, v := range n.Values {
				if what, ok := orderCall(v); ok && i < len(n.Names) {
					consumed[v] = true
					if o := info.Defs[n.Names[i]]; o != nil && vars[o] == nil {
						vars[o] = &orderedVar{what: n.Names[i].Name + " holds " + what, pos: v.Pos()}
					}
				}
			}
		case *ast.RangeStmt:
			if !p.mapIter(n.X) {
				break
			}
			loop := span{n.Body.Pos(), n.Body.End()}
			loops = append(loops, loop)
			where := "a range over a map (" + at(n.Pos()) + ")"
			filled := "a range over a map" // the position is said with the use
			ast.Inspect(n.Body, func(m ast.Node) bool {
				if m == nil || skip(m.Pos()) {
					return false
				}
				switch m := m.(type) {
				case *ast.FuncLit:
					return false
				case *ast.AssignStmt:
					for i, l := range m.Lhs {
						o := obj(l)
						if o == nil || declaredIn(o, loop) || vars[o] != nil {
							continue
						}
						if m.Tok == token.ADD_ASSIGN && isString(info.TypeOf(l)) {
							vars[o] = &orderedVar{what: "string " + types.ExprString(l) + " is built in " + filled, pos: n.Pos(), loop: loop}
						}
						if i < len(m.Rhs) && m.Tok != token.DEFINE {
							if call, ok := m.Rhs[i].(*ast.CallExpr); ok && isBuiltin(info, call.Fun, "append") && len(call.Args) > 1 {
								vars[o] = &orderedVar{what: "slice " + types.ExprString(l) + " is appended to in " + filled, pos: n.Pos(), loop: loop}
							}
						}
					}
				case *ast.CallExpr:
					fn := p.callee(m)
					if fn == nil || fn.Pkg() == nil {
						break
					}
					var target ast.Expr
					if sel, ok := m.Fun.(*ast.SelectorExpr); ok && fn.Signature().Recv() != nil && isWriter(info.TypeOf(sel.X)) {
						switch fn.Name() {
						case "WriteString", "WriteByte", "WriteRune", "Write":
							target = sel.X
						}
					}
					if fn.Pkg().Path() == "fmt" && (fn.Name() == "Fprintf" || fn.Name() == "Fprint" || fn.Name() == "Fprintln") && len(m.Args) > 0 && isWriter(info.TypeOf(m.Args[0])) {
						target = m.Args[0]
					}
					if target != nil {
						if id := rootIdent(target); id != nil {
							if o := info.ObjectOf(id); o != nil && !declaredIn(o, loop) && vars[o] == nil {
								vars[o] = &orderedVar{what: types.ExprString(id) + " is written in " + filled, pos: n.Pos(), loop: loop}
							}
						}
					}
				case *ast.SendStmt:
					uses = append(uses, orderUse{m.Pos(), "a send on " + types.ExprString(m.Chan) + " inside " + where + " sends in map order"})
				}
				return true
			})
			// The first element of a map: an unconditional return or break
			// at the end of the body.
			if l := len(n.Body.List); l > 0 {
				switch last := n.Body.List[l-1].(type) {
				case *ast.ReturnStmt:
					if len(last.Results) > 0 {
						uses = append(uses, orderUse{last.Pos(), "a return at the end of " + where + " answers with whichever element comes first"})
					}
				case *ast.BranchStmt:
					if last.Tok == token.BREAK && last.Label == nil && l > 1 {
						uses = append(uses, orderUse{last.Pos(), "a break at the end of " + where + " keeps whichever element comes first"})
					}
				}
			}
		}
		return true
	})
	for o := range sorted {
		delete(vars, o)
	}
	// Where the ordered values go: every use but the filling itself, len
	// and cap, a sort, and ranging over it.
	harmless := map[*ast.Ident]bool{}
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for _, l := range n.Lhs {
				if id, ok := l.(*ast.Ident); ok {
					harmless[id] = true
				}
			}
			for _, rhs := range n.Rhs {
				if call, ok := rhs.(*ast.CallExpr); ok && isBuiltin(info, call.Fun, "append") && len(call.Args) > 0 {
					if id, ok := call.Args[0].(*ast.Ident); ok {
						harmless[id] = true
					}
				}
			}
		case *ast.CallExpr:
			if isBuiltin(info, n.Fun, "len") || isBuiltin(info, n.Fun, "cap") {
				for _, a := range n.Args {
					if id, ok := a.(*ast.Ident); ok {
						harmless[id] = true
					}
				}
			}
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok {
					switch sel.Sel.Name {
					case "WriteString", "WriteByte", "WriteRune", "Write", "Len", "Reset", "Grow":
						harmless[id] = true
					}
				}
			}
			if fn := p.callee(n); fn != nil && fn.Pkg() != nil && fn.Pkg().Path() == "fmt" && len(n.Args) > 0 &&
				(fn.Name() == "Fprintf" || fn.Name() == "Fprint" || fn.Name() == "Fprintln") {
				if id := rootIdent(n.Args[0]); id != nil {
					harmless[id] = true
				}
			}
		case *ast.RangeStmt:
			if id, ok := n.X.(*ast.Ident); ok {
				harmless[id] = true
			}
		}
		return true
	})
	reported := map[types.Object]bool{}
	ast.Inspect(body, func(n ast.Node) bool {
		if n == nil || skip(n.Pos()) {
			return n == nil || !skip(n.Pos())
		}
		switch n := n.(type) {
		case *ast.Ident:
			o := info.Uses[n]
			v := vars[o]
			if v == nil || reported[o] || harmless[n] || v.loop.holds(n.Pos()) {
				break
			}
			reported[o] = true
			uses = append(uses, orderUse{n.Pos(), fmt.Sprintf("%s (%s), and its value is used here", v.what, at(v.pos))})
		case *ast.CallExpr:
			if consumed[n] {
				break
			}
			if what, ok := orderCall(n); ok {
				uses = append(uses, orderUse{n.Pos(), what + " is used here as it comes"})
			}
		}
		return true
	})
	return vars, uses
}

// orderCall says whether x is a call whose result is in map order:
// slices.Collect of a map's iterator, or a function whose fact says so.
func (p *pkg) orderCall(r *reachResult, x ast.Expr) (string, bool) {
	call, ok := x.(*ast.CallExpr)
	if !ok {
		return "", false
	}
	fn := p.callee(call)
	if fn == nil || fn.Pkg() == nil {
		return "", false
	}
	if fn.Pkg().Path() == "slices" && (fn.Name() == "Collect" || fn.Name() == "AppendSeq") {
		for _, a := range call.Args {
			if p.mapIter(a) {
				return "slices." + fn.Name() + " of " + types.ExprString(a), true
			}
		}
	}
	if f := r.of(fn); f != nil && f.Order != nil {
		return "the result of " + funcName(fn) + ", in map order (" + f.Order.What + " at " + f.Order.At + ")", true
	}
	return "", false
}

// mapIter reports whether x is a map or an iterator over one in map order
// (maps.Keys, maps.Values, maps.All).
func (p *pkg) mapIter(x ast.Expr) bool {
	if t := p.info.TypeOf(x); t != nil {
		if _, ok := t.Underlying().(*types.Map); ok {
			return true
		}
	}
	call, ok := x.(*ast.CallExpr)
	if !ok {
		return false
	}
	fn := p.callee(call)
	return fn != nil && fn.Pkg() != nil && fn.Pkg().Path() == "maps" &&
		(fn.Name() == "Keys" || fn.Name() == "Values" || fn.Name() == "All")
}

// returnsMapOrder says whether what function d returns is in map order.
func (p *pkg) returnsMapOrder(r *reachResult, d *ast.FuncDecl, at func(token.Pos) string) *reachHit {
	steps := p.stepArgs(d.Body)
	skip := func(pos token.Pos) bool {
		for _, s := range steps {
			if s.holds(pos) {
				return true
			}
		}
		return false
	}
	vars, _ := p.orderOf(r, d.Body, skip, at)
	var hit *reachHit
	ast.Inspect(d.Body, func(n ast.Node) bool {
		if hit != nil {
			return false
		}
		if _, ok := n.(*ast.FuncLit); ok {
			return false
		}
		ret, ok := n.(*ast.ReturnStmt)
		if !ok {
			return true
		}
		for _, res := range ret.Results {
			ast.Inspect(res, func(m ast.Node) bool {
				switch m := m.(type) {
				case *ast.Ident:
					if v := vars[p.info.Uses[m]]; v != nil {
						hit = &reachHit{What: v.what, At: at(v.pos)}
					}
				case *ast.CallExpr:
					if what, ok := p.orderCall(r, m); ok {
						hit = &reachHit{What: what, At: at(m.Pos())}
					}
				}
				return hit == nil
			})
		}
		return hit == nil
	})
	return hit
}

func isString(t types.Type) bool {
	if t == nil {
		return false
	}
	b, ok := types.Unalias(t).Underlying().(*types.Basic)
	return ok && b.Info()&types.IsString != 0
}

// isWriter reports whether t is (a pointer to) a strings.Builder or a
// bytes.Buffer.
func isWriter(t types.Type) bool {
	return isNamed(t, "strings", "Builder") || isNamed(t, "bytes", "Buffer")
}

func isBuiltin(info *types.Info, fun ast.Expr, name string) bool {
	id, ok := fun.(*ast.Ident)
	if !ok {
		return false
	}
	b, ok := info.Uses[id].(*types.Builtin)
	return ok && b.Name() == name
}

// rootIdent is v in v, v.f, v[i], *v, &v, (v).
func rootIdent(x ast.Expr) *ast.Ident {
	for {
		switch e := x.(type) {
		case *ast.Ident:
			return e
		case *ast.SelectorExpr:
			x = e.X
		case *ast.IndexExpr:
			x = e.X
		case *ast.StarExpr:
			x = e.X
		case *ast.ParenExpr:
			x = e.X
		case *ast.UnaryExpr:
			if e.Op != token.AND {
				return nil
			}
			x = e.X
		default:
			return nil
		}
	}
}
