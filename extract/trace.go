package extract

import (
	"go/constant"
	"go/token"
	"go/types"
	"sort"

	"golang.org/x/tools/go/ssa"
)

// This file traces SSA values back to where they come from: the constant a
// route path is, the NewFlow call a bound flow was built by, the function
// literal a function value holds. Tracing goes through phis, conversions,
// the results of functions the app wrote (into their returns), parameters
// (out to the call sites), captured variables, and memory written only by
// stores extract can see: local and package variables, and the elements of
// slice, array and map literals (so that bindings made in a loop over
// constant values are found).

// ctxt is the calling context of a value: the function it is in was called
// at site. A nil ctxt means "any caller".
type ctxt struct {
	site   ssa.CallInstruction
	callee *ssa.Function
	parent *ctxt
	depth  int
}

func (c *ctxt) push(site ssa.CallInstruction, callee *ssa.Function) *ctxt {
	d := 1
	if c != nil {
		d = c.depth + 1
	}
	return &ctxt{site: site, callee: callee, parent: c, depth: d}
}

const maxCtxDepth = 8

// memKey is a location: a base (an Alloc, a Global or a MakeMap) and a path.
type memKey struct {
	base ssa.Value
	path string
}

type storeSite struct {
	val ssa.Value
	fn  *ssa.Function
}

// index holds what tracing needs to know about the whole program.
type index struct {
	fns      []*ssa.Function // every function with a body, in a stable order
	callers  map[*ssa.Function][]ssa.CallInstruction
	closures map[*ssa.Function][]*ssa.MakeClosure
	stores   map[memKey][]storeSite
	// escaped bases: their address goes somewhere extract cannot follow,
	// so what they hold is unknown.
	escaped map[ssa.Value]bool
	// fieldStores: stores into a field of a named struct type, anywhere.
	fieldStores map[fieldKey][]storeSite
	indirect    []ssa.Value // addresses of stores memPath cannot place
}

type fieldKey struct {
	typ   string // the struct type
	field int
}

// newIndex indexes the functions of the main module's packages.
func newIndex(prog *program) *index {
	ix := &index{
		callers:     map[*ssa.Function][]ssa.CallInstruction{},
		closures:    map[*ssa.Function][]*ssa.MakeClosure{},
		stores:      map[memKey][]storeSite{},
		escaped:     map[ssa.Value]bool{},
		fieldStores: map[fieldKey][]storeSite{},
	}
	seen := map[*ssa.Function]bool{}
	var add func(fn *ssa.Function)
	add = func(fn *ssa.Function) {
		if fn == nil || seen[fn] || len(fn.Blocks) == 0 || inOke(fn) {
			return
		}
		seen[fn] = true
		ix.fns = append(ix.fns, fn)
		for _, anon := range fn.AnonFuncs {
			add(anon)
		}
	}
	for _, p := range prog.sortedBodyPkgs() {
		for _, fn := range memberFuncs(prog.ssa, p.ssa) {
			add(fn)
		}
	}
	// Instances of generic functions, wrappers and bound methods are
	// created on demand while building; collect those reachable from
	// calls and values in the code above.
	for i := 0; i < len(ix.fns); i++ {
		for _, b := range ix.fns[i].Blocks {
			for _, in := range b.Instrs {
				for _, op := range in.Operands(nil) {
					if f, ok := (*op).(*ssa.Function); ok {
						add(f)
					}
				}
				if mc, ok := in.(*ssa.MakeClosure); ok {
					add(mc.Fn.(*ssa.Function))
				}
			}
		}
	}
	for _, fn := range ix.fns {
		for _, b := range fn.Blocks {
			for _, in := range b.Instrs {
				ix.note(fn, in)
			}
		}
	}
	ix.markIndirect()
	return ix
}

// memberFuncs returns the functions and methods of package p, in a stable
// order.
func memberFuncs(prog *ssa.Program, p *ssa.Package) []*ssa.Function {
	var out []*ssa.Function
	names := make([]string, 0, len(p.Members))
	for name := range p.Members {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		switch m := p.Members[name].(type) {
		case *ssa.Function:
			if m.TypeParams().Len() == 0 {
				out = append(out, m)
			}
		case *ssa.Type:
			for _, t := range []types.Type{m.Type(), types.NewPointer(m.Type())} {
				if n, ok := m.Type().(*types.Named); ok && n.TypeParams().Len() > 0 {
					continue
				}
				ms := prog.MethodSets.MethodSet(t)
				for i := 0; i < ms.Len(); i++ {
					if f := prog.MethodValue(ms.At(i)); f != nil && f.Synthetic == "" {
						out = append(out, f)
					}
				}
			}
		}
	}
	return out
}

func (ix *index) note(fn *ssa.Function, in ssa.Instruction) {
	if c, ok := in.(ssa.CallInstruction); ok {
		if callee := c.Common().StaticCallee(); callee != nil {
			ix.callers[callee] = append(ix.callers[callee], c)
		}
	}
	switch in := in.(type) {
	case *ssa.MakeClosure:
		f := in.Fn.(*ssa.Function)
		ix.closures[f] = append(ix.closures[f], in)
	case *ssa.Store:
		base, path, ok := memPath(in.Addr)
		if ok {
			k := memKey{base, path}
			ix.stores[k] = append(ix.stores[k], storeSite{in.Val, fn})
		}
		if fa, ok := in.Addr.(*ssa.FieldAddr); ok {
			k := fieldKey{types.TypeString(deref(fa.X.Type()), nil), fa.Field}
			ix.fieldStores[k] = append(ix.fieldStores[k], storeSite{in.Val, fn})
		}
	case *ssa.MapUpdate:
		if base, path, ok := memPath(in.Map); ok {
			kk := memKey{base, path + "{}"}
			ix.stores[kk] = append(ix.stores[kk], storeSite{in.Key, fn})
			kv := memKey{base, path + "[]"}
			ix.stores[kv] = append(ix.stores[kv], storeSite{in.Value, fn})
		}
	}
	// A base whose address is passed on (to a call, into a structure) may
	// be written where extract does not look.
	for _, op := range in.Operands(nil) {
		v := *op
		switch v.(type) {
		case *ssa.Alloc, *ssa.MakeMap, *ssa.Slice, *ssa.IndexAddr, *ssa.FieldAddr:
		default:
			continue
		}
		if escapes(in, v) {
			if base, _, ok := memPath(v); ok {
				ix.escaped[base] = true
			}
		}
	}
	if st, ok := in.(*ssa.Store); ok {
		if _, _, ok := memPath(st.Addr); !ok {
			ix.indirect = append(ix.indirect, st.Addr)
		}
	}
}

// markIndirect marks as escaped every base that a store through a loaded
// reference may write (s[i] = v where s came from elsewhere).
func (ix *index) markIndirect() {
	for _, addr := range ix.indirect {
	strip:
		for {
			switch a := addr.(type) {
			case *ssa.FieldAddr:
				addr = a.X
			case *ssa.IndexAddr:
				addr = a.X
			case *ssa.Slice:
				addr = a.X
			default:
				break strip
			}
		}
		ix.origins(addr, nil, func(v ssa.Value, _ *ctxt) {
			if base, _, ok := memPath(v); ok {
				ix.escaped[base] = true
			}
		})
	}
}

// escapes reports whether in passes the reference v on in a way that could
// write through it where extract does not look.
func escapes(in ssa.Instruction, v ssa.Value) bool {
	switch in := in.(type) {
	case *ssa.Store:
		if in.Val != v {
			return false
		}
		// kept in a variable: tracked through it (see memory)
		base, _, ok := memPath(in.Addr)
		if !ok {
			return true
		}
		switch base.(type) {
		case *ssa.Alloc, *ssa.Global:
			return false
		}
		return true
	case *ssa.UnOp, *ssa.FieldAddr, *ssa.IndexAddr, *ssa.Slice, *ssa.Lookup, *ssa.Range,
		*ssa.MapUpdate, *ssa.DebugRef, *ssa.BinOp, *ssa.Field, *ssa.Index:
		return false
	case ssa.CallInstruction:
		if b, ok := in.Common().Value.(*ssa.Builtin); ok && (b.Name() == "len" || b.Name() == "cap") {
			return false
		}
		return true
	case *ssa.MakeClosure:
		// A captured variable: it escapes if the closure writes it or
		// passes its address on.
		fn := in.Fn.(*ssa.Function)
		for i, b := range in.Bindings {
			if b != v || i >= len(fn.FreeVars) {
				continue
			}
			if refs := fn.FreeVars[i].Referrers(); refs != nil {
				for _, r := range *refs {
					if u, ok := r.(*ssa.UnOp); !ok || u.Op != token.MUL {
						if _, dbg := r.(*ssa.DebugRef); !dbg {
							return true
						}
					}
				}
			}
		}
		return false
	}
	return true
}

// memPath returns the base and path of the location addr points to,
// structurally (through fields, elements and slicing of a variable, a
// package variable or a map literal).
func memPath(addr ssa.Value) (base ssa.Value, path string, ok bool) {
	p := ""
	for i := 0; i < 16; i++ {
		switch a := addr.(type) {
		case *ssa.Alloc, *ssa.Global, *ssa.MakeMap:
			return a, p, true
		case *ssa.FieldAddr:
			p = "." + itoa(a.Field) + p
			addr = a.X
		case *ssa.IndexAddr:
			p = "[]" + p
			addr = a.X
		case *ssa.Slice:
			addr = a.X
		default:
			return nil, "", false
		}
	}
	return nil, "", false
}

func deref(t types.Type) types.Type {
	if p, ok := t.Underlying().(*types.Pointer); ok {
		return p.Elem()
	}
	return t
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}

// tracer walks values back to their origins.
type tracer struct {
	ix      *index
	visited map[traceKey]bool
	budget  int
}

type traceKey struct {
	v ssa.Value
	c *ctxt
}

// origins calls yield with every value v may come from, and the context
// it is in. A leaf that cannot be followed further is yielded as itself.
func (ix *index) origins(v ssa.Value, c *ctxt, yield func(v ssa.Value, c *ctxt)) {
	t := &tracer{ix: ix, visited: map[traceKey]bool{}, budget: 10000}
	t.walk(v, c, yield)
}

func (t *tracer) walk(v ssa.Value, c *ctxt, yield func(ssa.Value, *ctxt)) {
	k := traceKey{v, c}
	if t.visited[k] || t.budget <= 0 {
		return
	}
	t.visited[k] = true
	t.budget--
	switch x := v.(type) {
	case *ssa.Phi:
		for _, e := range x.Edges {
			t.walk(e, c, yield)
		}
	case *ssa.ChangeType:
		t.walk(x.X, c, yield)
	case *ssa.MakeInterface:
		t.walk(x.X, c, yield)
	case *ssa.ChangeInterface:
		t.walk(x.X, c, yield)
	case *ssa.TypeAssert:
		if x.CommaOk {
			yield(v, c)
			return
		}
		t.walk(x.X, c, yield)
	case *ssa.Call:
		callee := x.Call.StaticCallee()
		if callee == nil || len(callee.Blocks) == 0 || inOke(callee) || c != nil && c.depth >= maxCtxDepth {
			yield(v, c)
			return
		}
		t.returns(callee, x, 0, c, yield)
	case *ssa.Extract:
		call, ok := x.Tuple.(*ssa.Call)
		if ok {
			if callee := call.Call.StaticCallee(); callee != nil && len(callee.Blocks) > 0 && !inOke(callee) && (c == nil || c.depth < maxCtxDepth) {
				t.returns(callee, call, x.Index, c, yield)
				return
			}
		}
		if next, ok := x.Tuple.(*ssa.Next); ok && !next.IsString {
			if rng, ok := next.Iter.(*ssa.Range); ok {
				path := "[]"
				if x.Index == 1 {
					path = "{}"
				}
				if x.Index > 0 && t.memory(rng.X, path, c, yield) {
					return
				}
			}
		}
		yield(v, c)
	case *ssa.Parameter:
		fn := x.Parent()
		i := paramIndex(fn, x)
		if c != nil && c.callee == fn {
			args := c.site.Common().Args
			if i >= 0 && i < len(args) {
				t.walk(args[i], c.parent, yield)
				return
			}
			yield(v, c)
			return
		}
		sites := t.ix.callers[fn]
		if len(sites) == 0 || i < 0 {
			yield(v, c)
			return
		}
		for _, s := range sites {
			args := s.Common().Args
			if i < len(args) {
				t.walk(args[i], nil, yield) // in the caller, called from anywhere
			}
		}
	case *ssa.FreeVar:
		fn := x.Parent()
		i := -1
		for j, fv := range fn.FreeVars {
			if fv == x {
				i = j
			}
		}
		mcs := t.ix.closures[fn]
		if len(mcs) == 0 || i < 0 {
			yield(v, c)
			return
		}
		for _, mc := range mcs {
			t.walk(mc.Bindings[i], nil, yield)
		}
	case *ssa.UnOp:
		if x.Op != token.MUL || t.memory(x.X, "", c, yield) {
			if x.Op != token.MUL {
				yield(v, c)
			}
			return
		}
		// A field of a struct extract cannot place: every store into
		// that field of that type, anywhere (field writes are always
		// stores through the field's address).
		if fa, ok := x.X.(*ssa.FieldAddr); ok {
			if sites := t.ix.fieldStores[fieldKey{types.TypeString(deref(fa.X.Type()), nil), fa.Field}]; len(sites) > 0 {
				for _, s := range sites {
					t.walk(s.val, nil, yield)
				}
				return
			}
		}
		yield(v, c)
	case *ssa.Field:
		if ld, ok := x.X.(*ssa.UnOp); ok && ld.Op == token.MUL && t.memory(ld.X, "."+itoa(x.Field), c, yield) {
			return
		}
		yield(v, c)
	case *ssa.Index:
		if ld, ok := x.X.(*ssa.UnOp); ok && ld.Op == token.MUL && t.memory(ld.X, "[]", c, yield) {
			return
		}
		yield(v, c)
	case *ssa.Lookup:
		if !x.CommaOk && t.memory(x.X, "[]", c, yield) {
			return
		}
		yield(v, c)
	default:
		yield(v, c)
	}
}

// returns walks the idx-th result of callee's returns, called at site.
func (t *tracer) returns(callee *ssa.Function, site ssa.CallInstruction, idx int, c *ctxt, yield func(ssa.Value, *ctxt)) {
	cc := c.push(site, callee)
	for _, b := range callee.Blocks {
		if ret, ok := b.Instrs[len(b.Instrs)-1].(*ssa.Return); ok && idx < len(ret.Results) {
			t.walk(ret.Results[idx], cc, yield)
		}
	}
}

// memory walks the values stored at addr (plus suffix), when every store
// there is known. It reports whether it could.
func (t *tracer) memory(addr ssa.Value, suffix string, c *ctxt, yield func(ssa.Value, *ctxt)) bool {
	if t.budget <= 0 {
		return false
	}
	t.budget--
	switch a := addr.(type) {
	case *ssa.Alloc, *ssa.Global, *ssa.MakeMap:
		if t.ix.escaped[a] {
			return false
		}
		sites := t.ix.stores[memKey{a, suffix}]
		if len(sites) == 0 {
			return false
		}
		for _, s := range sites {
			sc := c
			if s.fn != addrFunc(addr) {
				sc = nil
			}
			t.walk(s.val, sc, yield)
		}
		return true
	case *ssa.FieldAddr:
		return t.memory(a.X, "."+itoa(a.Field)+suffix, c, yield)
	case *ssa.IndexAddr:
		return t.memory(a.X, "[]"+suffix, c, yield)
	case *ssa.Slice:
		return t.memory(a.X, suffix, c, yield)
	}
	// A reference held elsewhere (a variable, a parameter, a call's
	// result): find where it was made.
	found, all := false, true
	t.walk(addr, c, func(v ssa.Value, vc *ctxt) {
		switch v.(type) {
		case *ssa.Alloc, *ssa.Global, *ssa.MakeMap, *ssa.FieldAddr, *ssa.IndexAddr, *ssa.Slice:
			if t.memory(v, suffix, vc, yield) {
				found = true
				return
			}
		}
		all = false
	})
	return found && all
}

func addrFunc(v ssa.Value) *ssa.Function {
	if in, ok := v.(ssa.Instruction); ok {
		return in.Parent()
	}
	return nil
}

// paramIndex returns the index of p among the call arguments of fn.
func paramIndex(fn *ssa.Function, p *ssa.Parameter) int {
	for i, q := range fn.Params {
		if q == p {
			return i
		}
	}
	return -1
}

// constString returns the value of a constant string, if v is one.
func constString(v ssa.Value) (string, bool) {
	c, ok := v.(*ssa.Const)
	if !ok || c.Value == nil || c.Value.Kind() != constant.String {
		return "", false
	}
	return constant.StringVal(c.Value), true
}

// strings returns the constant strings v may be, or ok=false when one of
// them is not a constant.
func (ix *index) strings(v ssa.Value, c *ctxt) (vals []string, ok bool) {
	ok = true
	seen := map[string]bool{}
	ix.origins(v, c, func(o ssa.Value, oc *ctxt) {
		if s, isConst := constString(o); isConst {
			if !seen[s] {
				seen[s] = true
				vals = append(vals, s)
			}
			return
		}
		if b, isBin := o.(*ssa.BinOp); isBin && b.Op == token.ADD {
			xs, okx := ix.strings(b.X, oc)
			ys, oky := ix.strings(b.Y, oc)
			if okx && oky && len(xs)*len(ys) <= 64 {
				for _, x := range xs {
					for _, y := range ys {
						if !seen[x+y] {
							seen[x+y] = true
							vals = append(vals, x+y)
						}
					}
				}
				return
			}
		}
		ok = false
	})
	return vals, ok && len(vals) > 0
}
