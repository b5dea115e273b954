package extract

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/tools/go/ssa"
)

// DigestPrefix starts every flow's digest: "sha256:" and 64 hex digits.
const DigestPrefix = "sha256:"

// digestVersion changes when what the digest covers changes, so that a
// contract written by an older extract is reported stale, not trusted.
const digestVersion = "oke-digest 1"

// A flow's digest is a SHA-256 over what its contract was inferred from:
//
//   - the flow's name and shape, its options and its bindings as extract
//     read them;
//   - the definitions of its input and output types (fields, tags, embedded
//     types, method names), and of every named type of the main module that
//     an expression of the code below has, transitively;
//   - the syntax of every function of the main module reachable from the
//     flow's function: static callees, closures, method values and method
//     expressions, the bodies given to oke.Step, fx.Raw, Store.Tx (they are
//     function values in the caller), the functions of flows it calls with
//     oke.Call or oke.Run, and — over-approximating — for a call of an
//     interface method, every method of that name on a type of the main
//     module, and for a call of a function value extract does not resolve,
//     every function of the main module used as a value with that
//     signature — both only from the flow's package and the packages it
//     imports, so that the digest does not depend on which other packages
//     extract was given (a type declared in a package that imports the
//     flow's, such as main, is not among them);
//   - the value of every constant those functions use, and the declaration
//     of every package variable of the main module they use;
//   - the name (and module version) of every function outside the main
//     module, or of the oke framework, they call: extract reads the oke
//     API and the standard library by name, so their code is not covered.
//
// Syntax is hashed as its syntax tree without positions or comments, so a
// change of formatting or comments alone (gofmt, moving code within or
// between files, a new comment) keeps the digest, and any change of code
// changes it. The order of everything hashed is sorted, so the digest does
// not depend on the order extract visits the code in.
//
// Known gaps: the code of modules other than the main one is covered only by
// their versions (a replace directive pointing at a directory that changes
// is not seen); what a package variable is set to at run time outside its
// declaration is covered only when the setting function is reachable.
type digester struct {
	prog *program
	fd   *finder
	// framework: packages of the oke framework (oke and what it imports;
	// when the main module is oke's own, every package of it but the
	// examples and test fixtures): extract reads them by name, so they are
	// hashed by name, as for a module that requires oke.
	framework map[string]bool
	units     map[ast.Node]string // a function's syntax → hash of it
	methods   map[string][]*ssa.Function
	values    []*ssa.Function // functions used as values
	hasValues bool
	varDecls  map[*types.Var]ast.Node
	closures  map[*types.Package]map[string]bool
}

func newDigester(prog *program, fd *finder) *digester {
	d := &digester{prog: prog, fd: fd, framework: map[string]bool{}, units: map[ast.Node]string{},
		closures: map[*types.Package]map[string]bool{}}
	if p := prog.pkgs[okePath]; p != nil && p.types != nil {
		var mark func(tp *types.Package)
		mark = func(tp *types.Package) {
			if d.framework[tp.Path()] {
				return
			}
			d.framework[tp.Path()] = true
			for _, imp := range tp.Imports() {
				mark(imp)
			}
		}
		mark(p.types)
	}
	if prog.modPath == okePath {
		for path, p := range prog.pkgs {
			if p.body && !strings.HasPrefix(path, okePath+"/examples/") && !strings.Contains(path, "/testdata/") {
				d.framework[path] = true
			}
		}
	}
	return d
}

// digest returns flow f's digest.
func (d *digester) digest(f *flowInst) string {
	h := sha256.New()
	for _, l := range d.lines(f) {
		h.Write([]byte(l))
		h.Write([]byte{'\n'})
	}
	return DigestPrefix + hex.EncodeToString(h.Sum(nil))
}

// lines returns what flow f's digest hashes, in order.
func (d *digester) lines(f *flowInst) []string {
	var lines []string
	add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	o := f.opts
	head := []string{
		digestVersion,
		"flow " + strconv.Quote(f.name) + " " + f.shape,
		// (What was computed at run time says where: FILE:LINE, masked
		// so that moving code keeps the digest.)
		sourcePos.ReplaceAllString(fmt.Sprintf("options known=%t unknown=%q mode=%q ttl=%q claim=%q durable=%t declared=%t%q description=%q",
			o.known, o.unknown, o.mode, o.ttl, o.claim, o.durable, o.declaredSet, o.declared, o.description), "$1"),
	}
	var bs []string
	for _, b := range f.bindings {
		bs = append(bs, strconv.Quote(b.key()))
	}
	sort.Strings(bs)
	head = append(head, "bindings "+strings.Join(bs, " "))

	named := map[*types.Named]bool{}
	head = append(head, "in "+d.typeString(f.in, named))
	head = append(head, "out "+d.typeString(f.out, named))

	// The functions reachable from the flow's function.
	w := &reach{d: d, seen: map[*ssa.Function]bool{}, flows: map[*flowInst]bool{f: true}, lines: map[string]bool{}, named: named,
		scope: d.importClosure(f.pkg.types)}
	w.flow(f)
	for len(w.queue) > 0 {
		fn := w.queue[len(w.queue)-1]
		w.queue = w.queue[:len(w.queue)-1]
		w.visit(fn)
	}
	for l := range w.lines {
		add("%s", l)
	}
	// The definitions of the named types the code has, transitively.
	for n := range d.closeTypes(named) {
		add("%s", d.typeDef(n))
	}
	sort.Strings(lines)
	return append(head, lines...)
}

// reach is one walk from a flow's function.
type reach struct {
	d     *digester
	seen  map[*ssa.Function]bool
	flows map[*flowInst]bool
	queue []*ssa.Function
	lines map[string]bool // what is hashed, as a set
	named map[*types.Named]bool
	scope map[string]bool // the packages over-approximated targets come from
}

// inScope reports whether fn belongs to a package of w's scope.
func (w *reach) inScope(fn *ssa.Function) bool {
	if p := pkgOf(fn); p != nil {
		return w.scope[p.Pkg.Path()]
	}
	if obj := fn.Object(); obj != nil && obj.Pkg() != nil { // a wrapper: its method's
		return w.scope[obj.Pkg().Path()]
	}
	return false
}

// importClosure returns the paths of tp and of the packages it imports,
// transitively.
func (d *digester) importClosure(tp *types.Package) map[string]bool {
	if s, ok := d.closures[tp]; ok {
		return s
	}
	out := map[string]bool{}
	var mark func(tp *types.Package)
	mark = func(tp *types.Package) {
		if out[tp.Path()] {
			return
		}
		out[tp.Path()] = true
		for _, imp := range tp.Imports() {
			mark(imp)
		}
	}
	if tp != nil {
		mark(tp)
	}
	d.closures[tp] = out
	return out
}

func (w *reach) push(fn *ssa.Function) {
	if fn != nil && !w.seen[fn] {
		w.seen[fn] = true
		w.queue = append(w.queue, fn)
	}
}

// flow adds the functions flow f runs.
func (w *reach) flow(f *flowInst) {
	for i, v := range f.do {
		found := false
		w.d.fd.ix.origins(v, f.doCtx[i], func(o ssa.Value, _ *ctxt) {
			switch x := o.(type) {
			case *ssa.Function:
				found = true
				w.push(x)
			case *ssa.MakeClosure:
				found = true
				w.push(x.Fn.(*ssa.Function))
			}
		})
		if !found {
			w.lines["untraced function of flow "+strconv.Quote(f.name)] = true
		}
	}
}

// walkable reports whether fn's code is hashed (a function of the main
// module outside the framework) or only its name.
func (d *digester) walkable(fn *ssa.Function) bool {
	p := pkgOf(fn)
	if p == nil {
		return len(fn.Blocks) > 0 // a wrapper or thunk: its body calls the target
	}
	q := d.prog.pkgs[p.Pkg.Path()]
	return q != nil && q.body && !d.framework[p.Pkg.Path()] && len(fn.Blocks) > 0
}

func (w *reach) visit(fn *ssa.Function) {
	d := w.d
	if !d.walkable(fn) {
		w.lines["func "+d.extName(fn)] = true
		return
	}
	if o := fn.Origin(); o != nil && o != fn {
		w.lines["instance "+fn.String()] = true
		w.push(o)
	}
	if syn := fn.Syntax(); syn != nil {
		switch syn.(type) {
		case *ast.FuncDecl, *ast.FuncLit:
			w.unit(fn, syn)
		}
	}
	for _, b := range fn.Blocks {
		for _, in := range b.Instrs {
			for _, op := range in.Operands(nil) {
				switch x := (*op).(type) {
				case *ssa.Function:
					w.push(x)
				case *ssa.Global:
					w.global(x)
				}
			}
			c, ok := in.(ssa.CallInstruction)
			if !ok {
				continue
			}
			cc := c.Common()
			switch callee := cc.StaticCallee(); {
			case cc.IsInvoke():
				w.lines["invoke "+cc.Method.FullName()] = true
				for _, m := range d.methodsNamed(cc.Method.Name()) {
					if w.inScope(m) {
						w.push(m)
					}
				}
			case callee == nil:
				sig, _ := cc.Value.Type().Underlying().(*types.Signature)
				w.lines["dynamic "+types.TypeString(sig, nil)] = true
				for _, v := range d.valuesOf(sig) {
					if w.inScope(v) {
						w.push(v)
					}
				}
			default:
				if e := api[apiName(callee)]; (e.op == opCall || e.op == opRun) && e.arg < len(cc.Args) {
					flows, ok := d.fd.flowsOf(cc.Args[e.arg], nil)
					if !ok {
						w.lines["untraced called flow"] = true
					}
					for _, g := range flows {
						w.lines["calls flow "+strconv.Quote(g.name)] = true
						if !w.flows[g] {
							w.flows[g] = true
							w.flow(g)
						}
					}
				}
			}
		}
	}
}

// unit adds the syntax of fn: its hash, the constants it names, and the
// named types of its expressions.
func (w *reach) unit(fn *ssa.Function, syn ast.Node) {
	d := w.d
	h, ok := d.units[syn]
	if !ok {
		var b bytes.Buffer
		writeSyntax(&b, reflect.ValueOf(syn))
		sum := sha256.Sum256(b.Bytes())
		h = hex.EncodeToString(sum[:])
		d.units[syn] = h
	}
	w.lines["code "+h] = true
	p := pkgOf(fn)
	if p == nil {
		return
	}
	q := d.prog.pkgs[p.Pkg.Path()]
	if q == nil || q.info == nil {
		return
	}
	info := q.info
	ast.Inspect(syn, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Ident:
			switch obj := info.Uses[n].(type) {
			case *types.Const:
				w.lines["const "+obj.String()+" = "+obj.Val().ExactString()] = true
			case *types.Var:
				if obj.Pkg() != nil && obj.Parent() == obj.Pkg().Scope() {
					w.variable(obj)
				}
			}
		}
		if e, ok := n.(ast.Expr); ok {
			if t := info.TypeOf(e); t != nil {
				collectNamed(t, w.named, map[types.Type]bool{})
			}
		}
		return true
	})
}

func (w *reach) global(g *ssa.Global) {
	if v, ok := g.Object().(*types.Var); ok {
		w.variable(v)
		return
	}
	w.lines["global "+g.String()] = true
}

// variable adds package variable v: its declaration when it is the main
// module's, else its name.
func (w *reach) variable(v *types.Var) {
	d := w.d
	path := v.Pkg().Path()
	q := d.prog.pkgs[path]
	if q == nil || !q.body || d.framework[path] {
		w.lines["var "+v.String()] = true
		return
	}
	spec := d.varDecl(v)
	if spec == nil {
		w.lines["var "+v.String()] = true
		return
	}
	var b bytes.Buffer
	writeSyntax(&b, reflect.ValueOf(spec))
	sum := sha256.Sum256(b.Bytes())
	w.lines["var "+v.String()+" "+hex.EncodeToString(sum[:])] = true
	collectNamed(v.Type(), w.named, map[types.Type]bool{})
}

// varDecl returns the ValueSpec declaring package variable v.
func (d *digester) varDecl(v *types.Var) ast.Node {
	if d.varDecls == nil {
		d.varDecls = map[*types.Var]ast.Node{}
		for _, p := range d.prog.pkgs {
			if !p.body || p.info == nil {
				continue
			}
			for _, f := range p.files {
				for _, decl := range f.Decls {
					gd, ok := decl.(*ast.GenDecl)
					if !ok || gd.Tok != token.VAR {
						continue
					}
					for _, s := range gd.Specs {
						vs := s.(*ast.ValueSpec)
						for _, id := range vs.Names {
							if obj, ok := p.info.Defs[id].(*types.Var); ok {
								d.varDecls[obj] = vs
							}
						}
					}
				}
			}
		}
	}
	return d.varDecls[v]
}

// extName names a function whose code is not hashed, with the version of
// its module when it has one.
func (d *digester) extName(fn *ssa.Function) string {
	name := fn.String()
	if p := pkgOf(fn); p != nil {
		if q := d.prog.pkgs[p.Pkg.Path()]; q != nil && q.lp.Module != nil && !q.lp.Module.Main {
			m := q.lp.Module
			if m.Replace != nil {
				m = m.Replace
			}
			name += " @" + m.Path + " " + m.Version
		}
	}
	return name
}

// methodsNamed returns every method called name on a type of the main
// module outside the framework (the targets an interface call may have).
func (d *digester) methodsNamed(name string) []*ssa.Function {
	if d.methods == nil {
		d.methods = map[string][]*ssa.Function{}
		for _, fn := range d.fd.ix.fns {
			if fn.Signature.Recv() != nil && d.walkable(fn) && pkgOf(fn) != nil {
				d.methods[fn.Name()] = append(d.methods[fn.Name()], fn)
			}
		}
	}
	return d.methods[name]
}

// valuesOf returns every function of the main module outside the framework
// used as a value (not only called) whose signature is sig: what a call of
// a function value extract does not resolve may run.
func (d *digester) valuesOf(sig *types.Signature) []*ssa.Function {
	if sig == nil {
		return nil
	}
	if !d.hasValues {
		d.hasValues = true
		seen := map[*ssa.Function]bool{}
		for _, fn := range d.fd.ix.fns {
			for _, b := range fn.Blocks {
				for _, in := range b.Instrs {
					var callee ssa.Value
					if c, ok := in.(ssa.CallInstruction); ok && !c.Common().IsInvoke() {
						callee = c.Common().Value
					}
					for _, op := range in.Operands(nil) {
						if f, ok := (*op).(*ssa.Function); ok && *op != callee && !seen[f] && d.walkable(f) {
							seen[f] = true
							d.values = append(d.values, f)
						}
					}
				}
			}
		}
	}
	var out []*ssa.Function
	for _, f := range d.values {
		if types.Identical(types.NewSignatureType(nil, nil, nil, f.Signature.Params(), f.Signature.Results(), f.Signature.Variadic()), sig) ||
			(f.Signature.Recv() == nil && types.Identical(f.Signature, sig)) {
			out = append(out, f)
		}
	}
	return out
}

// typeString is t with full package paths ("" for nil), collecting its
// named types.
func (d *digester) typeString(t types.Type, named map[*types.Named]bool) string {
	if t == nil {
		return ""
	}
	collectNamed(t, named, map[types.Type]bool{})
	return types.TypeString(t, nil)
}

// closeTypes returns named and the named types their definitions use, those
// of the main module outside the framework expanded.
func (d *digester) closeTypes(named map[*types.Named]bool) map[*types.Named]bool {
	out := map[*types.Named]bool{}
	var todo []*types.Named
	for n := range named {
		todo = append(todo, n)
	}
	for len(todo) > 0 {
		n := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if out[n] {
			continue
		}
		out[n] = true
		if !d.ownType(n) {
			continue
		}
		more := map[*types.Named]bool{}
		collectNamed(n.Underlying(), more, map[types.Type]bool{})
		for m := range more {
			if !out[m] {
				todo = append(todo, m)
			}
		}
	}
	return out
}

// ownType reports whether n is declared in the main module, outside the
// framework.
func (d *digester) ownType(n *types.Named) bool {
	obj := n.Obj()
	if obj.Pkg() == nil {
		return false
	}
	q := d.prog.pkgs[obj.Pkg().Path()]
	return q != nil && q.body && !d.framework[obj.Pkg().Path()]
}

// typeDef is the definition of n as hashed: for a type of the main module,
// its underlying type (fields, tags, embedded types) and its methods'
// names and signatures; for any other, its name.
func (d *digester) typeDef(n *types.Named) string {
	if !d.ownType(n) {
		return "type " + n.String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "type %s %s", n.String(), types.TypeString(n.Underlying(), nil))
	for i := 0; i < n.NumMethods(); i++ {
		m := n.Method(i)
		fmt.Fprintf(&b, "; method %s %s", m.Name(), types.TypeString(m.Type(), nil))
	}
	return b.String()
}

// collectNamed adds the named types t is built from.
func collectNamed(t types.Type, out map[*types.Named]bool, seen map[types.Type]bool) {
	if t == nil || seen[t] {
		return
	}
	seen[t] = true
	switch t := t.(type) {
	case *types.Named:
		out[t.Origin()] = true
		if args := t.TypeArgs(); args != nil {
			for i := 0; i < args.Len(); i++ {
				collectNamed(args.At(i), out, seen)
			}
		}
	case *types.Alias:
		collectNamed(types.Unalias(t), out, seen)
	case *types.Pointer:
		collectNamed(t.Elem(), out, seen)
	case *types.Slice:
		collectNamed(t.Elem(), out, seen)
	case *types.Array:
		collectNamed(t.Elem(), out, seen)
	case *types.Chan:
		collectNamed(t.Elem(), out, seen)
	case *types.Map:
		collectNamed(t.Key(), out, seen)
		collectNamed(t.Elem(), out, seen)
	case *types.Struct:
		for i := 0; i < t.NumFields(); i++ {
			collectNamed(t.Field(i).Type(), out, seen)
		}
	case *types.Tuple:
		for i := 0; i < t.Len(); i++ {
			collectNamed(t.At(i).Type(), out, seen)
		}
	case *types.Signature:
		collectNamed(t.Params(), out, seen)
		collectNamed(t.Results(), out, seen)
	case *types.Interface:
		for i := 0; i < t.NumMethods(); i++ {
			collectNamed(t.Method(i).Type(), out, seen)
		}
		for i := 0; i < t.NumEmbeddeds(); i++ {
			collectNamed(t.EmbeddedType(i), out, seen)
		}
	}
}

var (
	posType   = reflect.TypeFor[token.Pos]()
	skipTypes = map[reflect.Type]bool{
		reflect.TypeFor[*ast.CommentGroup](): true,
		reflect.TypeFor[*ast.Object]():       true,
		reflect.TypeFor[*ast.Scope]():        true,
	}
)

// writeSyntax writes a syntax tree without its positions and comments: two
// trees that differ only in formatting or comments write the same bytes.
func writeSyntax(b *bytes.Buffer, v reflect.Value) {
	switch v.Kind() {
	case reflect.Interface:
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		writeSyntax(b, v.Elem())
	case reflect.Pointer:
		if skipTypes[v.Type()] {
			return
		}
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		writeSyntax(b, v.Elem())
	case reflect.Struct:
		t := v.Type()
		b.WriteString(t.Name())
		b.WriteByte('{')
		for i := 0; i < t.NumField(); i++ {
			ft := t.Field(i)
			if ft.Type == posType || skipTypes[ft.Type] || !ft.IsExported() {
				continue
			}
			writeSyntax(b, v.Field(i))
			b.WriteByte(',')
		}
		b.WriteByte('}')
	case reflect.Slice:
		b.WriteByte('[')
		for i := 0; i < v.Len(); i++ {
			writeSyntax(b, v.Index(i))
			b.WriteByte(',')
		}
		b.WriteByte(']')
	case reflect.String:
		b.WriteString(strconv.Quote(v.String()))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		b.WriteString(strconv.FormatInt(v.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		b.WriteString(strconv.FormatUint(v.Uint(), 10))
	case reflect.Bool:
		b.WriteString(strconv.FormatBool(v.Bool()))
	}
}
