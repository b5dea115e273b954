package extract

import (
	"errors"
	"fmt"
	"go/ast"
	"go/constant"
	"go/token"
	"go/types"
	"reflect"
	"sort"
	"strings"

	"golang.org/x/tools/go/ssa"

	"github.com/okengine/oke/internal/constraint"
)

// This file finds what a flow (and the app's gate) may answer besides its
// successes: its declared failures — fx.Fail / oke.Fail with constant
// arguments, oke's error values (oke.ErrNotFound, oke.Unauthorized(…)),
// package variables holding one (var ErrGone = oke.Fail(…)), each also
// through WithMessage/WithCause — in the function and every function it
// calls in the module (closures and steps included). A failure whose status
// or code is not constant makes the set "open": the OpenAPI document then
// keeps a default response for it.

// failure is one declared failure: an HTTP status and a code.
type failure struct {
	status int
	code   string
}

// failures is what a walk found.
type failures struct {
	set  map[failure]bool
	open bool // a failure extract could not read
}

func (fs *failures) add(status int, code string) {
	if fs.set == nil {
		fs.set = map[failure]bool{}
	}
	fs.set[failure{status, code}] = true
}

// sorted returns the failures by status, then code.
func (fs *failures) sorted() []failure {
	var out []failure
	for f := range fs.set {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].status != out[j].status {
			return out[i].status < out[j].status
		}
		return out[i].code < out[j].code
	})
	return out
}

// okeErrors are oke's exported *Error values (errors.go), by name:
// TestOkeErrorsTable checks them against the package.
var okeErrors = map[string]failure{
	"ErrIdempotencyKeyMissing": {400, "IdempotencyKeyMissing"},
	"ErrIdempotencyKeyInvalid": {400, "IdempotencyKeyInvalid"},
	"ErrIdempotencyKeyReused":  {422, "IdempotencyKeyReused"},
	"ErrIdempotencyInProgress": {409, "IdempotencyInProgress"},
	"ErrInternal":              {500, "InternalError"},
	"ErrStoreUnavailable":      {503, "StoreUnavailable"},
	"ErrOutcomeUnknown":        {503, "OutcomeUnknown"},
	"ErrUnavailable":           {503, "Unavailable"},
	"ErrResponseNotStored":     {410, "IdempotentResponseNotStored"},
	"ErrUnauthorized":          {401, "Unauthorized"},
	"ErrForbidden":             {403, "Forbidden"},
	"ErrPayloadTooLarge":       {413, "PayloadTooLarge"},
	"ErrUnsupportedMediaType":  {415, "UnsupportedMediaType"},
	"ErrNotFound":              {404, "NotFound"},
	"ErrShuttingDown":          {503, "ShuttingDown"},
	"ErrRunCancelled":          {409, "RunCancelled"},
}

// OkeErrors returns a copy of the table of oke's error values extract
// knows, for tests: name → status and code.
func OkeErrors() map[string]struct {
	Status int
	Code   string
} {
	out := map[string]struct {
		Status int
		Code   string
	}{}
	for n, f := range okeErrors {
		out[n] = struct {
			Status int
			Code   string
		}{f.status, f.code}
	}
	return out
}

// failuresOf walks fns and what they call.
func (fd *finder) failuresOf(fns []*ssa.Function) *failures {
	fs := &failures{}
	seen := map[*ssa.Function]bool{}
	var walk func(fn *ssa.Function, depth int)
	walk = func(fn *ssa.Function, depth int) {
		if fn == nil || seen[fn] || len(fn.Blocks) == 0 || inOke(fn) || depth > 12 {
			return
		}
		seen[fn] = true
		for _, anon := range fn.AnonFuncs {
			walk(anon, depth+1)
		}
		for _, b := range fn.Blocks {
			for _, in := range b.Instrs {
				switch x := in.(type) {
				case ssa.CallInstruction:
					callee := x.Common().StaticCallee()
					switch apiName(callee) {
					case "Fail":
						fd.constFailure(fs, x.Common().Args[0], x.Common().Args[1])
						continue
					case "(*Fx).Fail":
						fd.constFailure(fs, x.Common().Args[1], x.Common().Args[2])
						continue
					case "Unauthorized":
						fs.add(401, "Unauthorized")
						continue
					case "Forbidden":
						fs.add(403, "Forbidden")
						continue
					}
					walk(callee, depth+1)
				case *ssa.MakeClosure:
					walk(x.Fn.(*ssa.Function), depth+1)
				case *ssa.UnOp:
					if g, ok := x.X.(*ssa.Global); ok && x.Op == token.MUL && isOkeErrorPtr(g.Type()) {
						fd.globalFailure(fs, g)
					}
				}
			}
		}
	}
	for _, fn := range fns {
		walk(fn, 0)
	}
	return fs
}

func (fd *finder) constFailure(fs *failures, status, code ssa.Value) {
	st, ok1 := status.(*ssa.Const)
	cd, ok2 := code.(*ssa.Const)
	if !ok1 || !ok2 || st.Value == nil || cd.Value == nil || st.Value.Kind() != constant.Int || cd.Value.Kind() != constant.String {
		fs.open = true
		return
	}
	n, _ := constant.Int64Val(st.Value)
	fs.add(int(n), constant.StringVal(cd.Value))
}

// globalFailure adds the failure a package variable of type *oke.Error
// holds: one of oke's (the table), or one a package initialises with
// oke.Fail(…) and constant arguments.
func (fd *finder) globalFailure(fs *failures, g *ssa.Global) {
	if g.Pkg != nil && g.Pkg.Pkg.Path() == okePath {
		if f, ok := okeErrors[g.Name()]; ok {
			fs.add(f.status, f.code)
			return
		}
		fs.open = true
		return
	}
	if g.Pkg == nil {
		fs.open = true
		return
	}
	init := g.Pkg.Func("init")
	found := false
	if init != nil {
		for _, b := range init.Blocks {
			for _, in := range b.Instrs {
				st, ok := in.(*ssa.Store)
				if !ok || st.Addr != g {
					continue
				}
				call, ok := st.Val.(*ssa.Call)
				if ok && apiName(call.Call.StaticCallee()) == "Fail" {
					fd.constFailure(fs, call.Call.Args[0], call.Call.Args[1])
					found = true
				}
			}
		}
	}
	if !found {
		fs.open = true
	}
}

// isOkeErrorPtr reports whether t is *oke.Error.
func isOkeErrorPtr(t types.Type) bool {
	p, ok := t.(*types.Pointer) // a Global's type is a pointer to its variable
	if !ok {
		return false
	}
	p, ok = types.Unalias(p.Elem()).(*types.Pointer)
	if !ok {
		return false
	}
	n, ok := types.Unalias(p.Elem()).(*types.Named)
	return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == okePath && n.Obj().Name() == "Error"
}

// flowFuncs returns the functions a flow's function value may be.
func (fd *finder) flowFuncs(f *flowInst) []*ssa.Function {
	var out []*ssa.Function
	for i, v := range f.do {
		fd.ix.origins(v, f.doCtx[i], func(o ssa.Value, _ *ctxt) {
			switch x := o.(type) {
			case *ssa.Function:
				out = append(out, x)
			case *ssa.MakeClosure:
				out = append(out, x.Fn.(*ssa.Function))
			}
		})
	}
	return out
}

// gateInfo is what extract reads of the app's gate (oke.Config.Gate).
type gateInfo struct {
	found   bool
	fails   *failures
	headers []string // request headers it reads, as it writes them
	bearer  bool     // it reads Authorization and mentions "Bearer"
	traced  bool     // every gate value was traced to its function
	// rules are the //oke:header directives of the gate's doc comment:
	// header name (canonical) → the schema keywords of its value.
	rules map[string]map[string]any
	// bad are directives that do not parse, for diagnostics.
	bad []badDirective
}

type badDirective struct {
	pos token.Position
	msg string
}

// gate finds the functions stored in an oke.Config's Gate field anywhere in
// the module, and reads them.
func (fd *finder) gate() *gateInfo {
	gi := &gateInfo{traced: true}
	var fns []*ssa.Function
	for _, fn := range fd.ix.fns {
		for _, b := range fn.Blocks {
			for _, in := range b.Instrs {
				st, ok := in.(*ssa.Store)
				if !ok {
					continue
				}
				fa, ok := st.Addr.(*ssa.FieldAddr)
				if !ok || !isOkeConfigPtr(fa.X.Type()) {
					continue
				}
				if fieldName(fa) != "Gate" {
					continue
				}
				if c, ok := st.Val.(*ssa.Const); ok && c.IsNil() {
					continue
				}
				gi.found = true
				traced := false
				fd.ix.origins(st.Val, nil, func(o ssa.Value, _ *ctxt) {
					switch x := o.(type) {
					case *ssa.Function:
						fns, traced = append(fns, x), true
					case *ssa.MakeClosure:
						fns, traced = append(fns, x.Fn.(*ssa.Function)), true
					}
				})
				if !traced {
					gi.traced = false
				}
			}
		}
	}
	if !gi.found {
		return gi
	}
	gi.rules = map[string]map[string]any{}
	for _, fn := range fns {
		fd.headerDirectives(fn, gi)
	}
	gi.fails = fd.failuresOf(fns)
	if !gi.traced {
		gi.fails.open = true
	}
	headers := map[string]string{} // canonical name → as the gate writes it
	seen := map[*ssa.Function]bool{}
	var walk func(fn *ssa.Function, depth int)
	walk = func(fn *ssa.Function, depth int) {
		if fn == nil || seen[fn] || len(fn.Blocks) == 0 || inOke(fn) || depth > 8 {
			return
		}
		seen[fn] = true
		for _, b := range fn.Blocks {
			for _, in := range b.Instrs {
				if c, ok := in.(ssa.CallInstruction); ok {
					callee := c.Common().StaticCallee()
					if callee != nil && callee.Pkg != nil && callee.Pkg.Pkg.Path() == "net/http" && callee.Name() == "Get" && callee.Signature.Recv() != nil {
						if k, ok := c.Common().Args[1].(*ssa.Const); ok && k.Value != nil && k.Value.Kind() == constant.String {
							name := constant.StringVal(k.Value)
							if _, ok := headers[canonicalHeader(name)]; !ok {
								headers[canonicalHeader(name)] = name
							}
						}
					}
					walk(callee, depth+1)
				}
				for _, op := range in.Operands(nil) {
					if k, ok := (*op).(*ssa.Const); ok && k.Value != nil && k.Value.Kind() == constant.String &&
						strings.EqualFold(strings.TrimSpace(constant.StringVal(k.Value)), "bearer") {
						gi.bearer = true
					}
				}
			}
		}
	}
	for _, fn := range fns {
		walk(fn, 0)
	}
	for _, h := range headers {
		gi.headers = append(gi.headers, h)
	}
	sort.Strings(gi.headers)
	_, auth := headers["Authorization"]
	gi.bearer = gi.bearer && auth
	return gi
}

func isOkeConfigPtr(t types.Type) bool {
	p, ok := t.Underlying().(*types.Pointer)
	if !ok {
		return false
	}
	n, ok := types.Unalias(p.Elem()).(*types.Named)
	return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == okePath && n.Obj().Name() == "Config"
}

func fieldName(fa *ssa.FieldAddr) string {
	st, ok := fa.X.Type().Underlying().(*types.Pointer).Elem().Underlying().(*types.Struct)
	if !ok || fa.Field >= st.NumFields() {
		return ""
	}
	return st.Field(fa.Field).Name()
}

// canonicalHeader is textproto's canonical form of a header name.
func canonicalHeader(h string) string {
	parts := strings.Split(h, "-")
	for i, p := range parts {
		if p != "" {
			parts[i] = strings.ToUpper(p[:1]) + strings.ToLower(p[1:])
		}
	}
	return strings.Join(parts, "-")
}

// streamMediaType returns the Content-Type a stream flow's function sets
// (w.Header().Set("Content-Type", constant)), or "" when it sets none
// extract can read.
func (fd *finder) streamMediaType(fns []*ssa.Function) string {
	found := ""
	seen := map[*ssa.Function]bool{}
	var walk func(fn *ssa.Function, depth int)
	walk = func(fn *ssa.Function, depth int) {
		if fn == nil || seen[fn] || len(fn.Blocks) == 0 || inOke(fn) || depth > 6 {
			return
		}
		seen[fn] = true
		for _, b := range fn.Blocks {
			for _, in := range b.Instrs {
				c, ok := in.(ssa.CallInstruction)
				if !ok {
					continue
				}
				callee := c.Common().StaticCallee()
				if callee != nil && callee.Pkg != nil && callee.Pkg.Pkg.Path() == "net/http" && callee.Name() == "Set" && callee.Signature.Recv() != nil {
					args := c.Common().Args
					k, ok1 := args[1].(*ssa.Const)
					v, ok2 := args[2].(*ssa.Const)
					if ok1 && ok2 && k.Value != nil && v.Value != nil && k.Value.Kind() == constant.String && v.Value.Kind() == constant.String &&
						strings.EqualFold(constant.StringVal(k.Value), "Content-Type") && found == "" {
						found = constant.StringVal(v.Value)
					}
				}
				walk(callee, depth+1)
			}
		}
	}
	for _, fn := range fns {
		walk(fn, 0)
	}
	return found
}

// conditional reports whether the App.Handle call at pos is made only on
// some paths of its function: inside an if, a switch or a select (a loop
// is not a condition: a binding in a range over constants is made).
func (fd *finder) conditional(pos token.Position) bool {
	for _, p := range fd.prog.sortedBodyPkgs() {
		for _, f := range p.files {
			tf := fd.prog.fset.File(f.Pos())
			if tf == nil || fd.prog.rel(tf.Name()) != pos.Filename {
				continue
			}
			var stack []ast.Node
			cond := false
			ast.Inspect(f, func(n ast.Node) bool {
				if n == nil {
					stack = stack[:len(stack)-1]
					return false
				}
				stack = append(stack, n)
				if c, ok := n.(*ast.CallExpr); ok {
					at, lp := fd.prog.position(c.Pos()), fd.prog.position(c.Lparen)
					if at.Line == pos.Line && at.Column == pos.Column || lp.Line == pos.Line && lp.Column == pos.Column {
						for i := len(stack) - 2; i >= 0; i-- {
							switch stack[i].(type) {
							case *ast.FuncDecl, *ast.FuncLit:
								i = -1
							case *ast.IfStmt, *ast.SwitchStmt, *ast.TypeSwitchStmt, *ast.SelectStmt:
								cond = true
								i = -1
							}
						}
					}
				}
				return true
			})
			return cond
		}
	}
	return false
}

// headerDirectives reads the //oke:header lines of fn's doc comment:
//
//	//oke:header X-Tenant minLength:"1" maxLength:"128" pattern:"^[!-~]+$"
//
// the rules (validation tags, in struct-tag syntax) the gate holds a header
// it reads to, for its parameter's schema in openapi.json.
func (fd *finder) headerDirectives(fn *ssa.Function, gi *gateInfo) {
	decl, ok := fn.Syntax().(*ast.FuncDecl)
	if !ok || decl.Doc == nil {
		return
	}
	for _, c := range decl.Doc.List {
		rest, ok := strings.CutPrefix(c.Text, "//oke:header ")
		if !ok {
			continue
		}
		name, tags, _ := strings.Cut(strings.TrimSpace(rest), " ")
		r, err := constraint.Parse(reflect.StructTag(strings.TrimSpace(tags)), constraint.String, constraint.Other)
		if err == nil && r == nil {
			err = errNoRules
		}
		if err != nil {
			gi.bad = append(gi.bad, badDirective{fd.prog.position(c.Pos()), fmt.Sprintf("//oke:header %s: %v; write it as //oke:header NAME pattern:\"…\" maxLength:\"…\" (validation tags)", name, err)})
			continue
		}
		gi.rules[canonicalHeader(name)] = r.Schema()
	}
}

var errNoRules = errors.New("no validation tag")
