package vet

import (
	"go/ast"
	"go/constant"
	"go/token"
	"go/types"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/ast/astutil"
	"golang.org/x/tools/go/types/typeutil"
)

// A flow is one oke.NewFlow call of the package.
type flow struct {
	name    string    // its constant name, else the name expression
	pos     token.Pos // the NewFlow call
	durable bool
	fn      ast.Node // its function: *ast.FuncLit or *ast.FuncDecl; nil when not found
}

// pkg is what the engine knows about the package under analysis.
type pkg struct {
	pass  *analysis.Pass
	info  *types.Info
	decls map[*types.Func]*ast.FuncDecl // functions and methods declared with a body
	inits map[*types.Var]ast.Expr       // variables declared (or := defined) with one initializer
	roles map[*types.Func]*roles        // same-package helpers that take a step body or name
}

func newPkg(pass *analysis.Pass) *pkg {
	p := &pkg{pass: pass, info: pass.TypesInfo,
		decls: map[*types.Func]*ast.FuncDecl{}, inits: map[*types.Var]ast.Expr{}, roles: map[*types.Func]*roles{}}
	for _, f := range pass.Files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				if fn, ok := p.info.Defs[n.Name].(*types.Func); ok && n.Body != nil {
					p.decls[fn] = n
				}
			case *ast.ValueSpec:
				if len(n.Values) == len(n.Names) {
					for i, id := range n.Names {
						if v, ok := p.info.Defs[id].(*types.Var); ok {
							p.inits[v] = n.Values[i]
						}
					}
				}
			case *ast.AssignStmt:
				if n.Tok == token.DEFINE && len(n.Lhs) == len(n.Rhs) {
					for i, l := range n.Lhs {
						if id, ok := l.(*ast.Ident); ok {
							if v, ok := p.info.Defs[id].(*types.Var); ok {
								p.inits[v] = n.Rhs[i]
							}
						}
					}
				}
			}
			return true
		})
	}
	return p
}

// callee is the function or method a call calls, if it is one (for a
// generic one, its origin).
func (p *pkg) callee(call *ast.CallExpr) *types.Func {
	fn, _ := typeutil.Callee(p.info, call).(*types.Func)
	if fn != nil {
		fn = fn.Origin()
	}
	return fn
}

// flows finds the package's oke.NewFlow calls.
func (p *pkg) flows() []*flow {
	var out []*flow
	for _, f := range p.pass.Files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 3 || !okeFunc(p.callee(call), "NewFlow") {
				return true
			}
			fl := &flow{pos: call.Pos(), name: types.ExprString(call.Args[0])}
			if tv := p.info.Types[call.Args[0]]; tv.Value != nil && tv.Value.Kind() == constant.String {
				fl.name = constant.StringVal(tv.Value)
			}
			fl.durable = p.durable(call.Args[1], 0)
			fl.fn = p.funcOf(call.Args[2], 0)
			out = append(out, fl)
			return true
		})
	}
	return out
}

// durable says whether an oke.Options expression sets Durable: from a
// composite literal (keyed or not), or a variable initialized with one.
// A Durable field that is not a constant counts as true (the flow may be
// durable, so it must follow the rules); options oke vet cannot see (a
// function's result, a parameter) count as not durable.
func (p *pkg) durable(x ast.Expr, depth int) bool {
	switch x := astutil.Unparen(x).(type) {
	case *ast.CompositeLit:
		var st *types.Struct
		if t := p.info.TypeOf(x); t != nil {
			st, _ = t.Underlying().(*types.Struct)
		}
		for i, elt := range x.Elts {
			val := elt
			name := ""
			if kv, ok := elt.(*ast.KeyValueExpr); ok {
				if id, ok := kv.Key.(*ast.Ident); ok {
					name = id.Name
				}
				val = kv.Value
			} else if st != nil && i < st.NumFields() {
				name = st.Field(i).Name()
			}
			if name != "Durable" {
				continue
			}
			if tv := p.info.Types[val]; tv.Value != nil && tv.Value.Kind() == constant.Bool {
				return constant.BoolVal(tv.Value)
			}
			return true
		}
	case *ast.Ident:
		if v, ok := p.info.Uses[x].(*types.Var); ok && p.inits[v] != nil && depth < 4 {
			return p.durable(p.inits[v], depth+1)
		}
	}
	return false
}

// funcOf finds the function a flow's function argument names: a function
// literal, a function or method of the package (by name or as a method
// value), or a variable initialized with one of those.
func (p *pkg) funcOf(x ast.Expr, depth int) ast.Node {
	if depth > 4 {
		return nil
	}
	var obj types.Object
	switch x := astutil.Unparen(x).(type) {
	case *ast.FuncLit:
		return x
	case *ast.Ident:
		obj = p.info.Uses[x]
	case *ast.SelectorExpr:
		obj = p.info.Uses[x.Sel]
	case *ast.IndexExpr:
		return p.funcOf(x.X, depth+1)
	case *ast.IndexListExpr:
		return p.funcOf(x.X, depth+1)
	}
	switch obj := obj.(type) {
	case *types.Func:
		if d := p.decls[obj.Origin()]; d != nil {
			return d
		}
	case *types.Var:
		if init := p.inits[obj]; init != nil {
			return p.funcOf(init, depth+1)
		}
	}
	return nil
}

// fileOf is the file of the package that holds pos.
func (p *pkg) fileOf(pos token.Pos) *ast.File {
	for _, f := range p.pass.Files {
		if f.FileStart <= pos && pos < f.FileEnd {
			return f
		}
	}
	return nil
}
