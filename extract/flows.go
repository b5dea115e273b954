package extract

import (
	"fmt"
	"go/token"
	"go/types"
	"sort"

	"golang.org/x/tools/go/ssa"

	"github.com/okengine/oke"
)

// flowInst is one flow: a constructor call (oke.NewFlow, NewStream,
// NewLive) with the name it is given there. A constructor in a helper
// that takes the name as a parameter gives one flow per name it is called
// with.
type flowInst struct {
	name     string
	call     *ssa.Call
	ctx      *ctxt
	shape    string
	pkg      *pkg
	pos      token.Position // of the constructor, module-relative
	opts     options
	in, out  types.Type // out is nil for streams and live feeds
	bindings []binding
	do       []ssa.Value // the function (literal, method value, …) as found
	doCtx    []*ctxt
	warnings []string

	sum  *summary
	busy bool
}

// binding is one binding of a flow, as written.
type binding struct {
	kind, method, path, event string
	dedupe, dedupeTTL         string // webhook
	pos                       token.Position
}

func (b binding) key() string {
	return b.kind + "\x00" + b.method + "\x00" + b.path + "\x00" + b.event + "\x00" + b.dedupe + "\x00" + b.dedupeTTL
}

// honors reports whether the binding honors the Idempotency-Key header for
// a flow of shape and mode whose effects qualify (DESIGN.md section 3).
func (b binding) honors(shape, mode string, qualifies bool) bool {
	switch b.kind {
	case "http":
		if b.method == "GET" {
			return false
		}
	case "rpc":
	default:
		return false // events, webhooks (the dedupe key instead), internal, schedules
	}
	return shape == "unary" && mode != "off" && qualifies
}

// warning is something extract could not read statically; it does not fail
// the run.
type warning struct {
	pos  token.Position
	flow string
	text string
}

// finder finds the flows and their bindings.
type finder struct {
	prog     *program
	ix       *index
	ev       *evaluator
	a        *analyzer
	flows    map[string]*flowInst // by flowKey
	order    []*flowInst
	warnings []warning
}

func flowKey(call *ssa.Call, name string) string {
	return fmt.Sprintf("%p\x00%s", call, name)
}

// pkgOf returns the package fn's code belongs to.
func pkgOf(fn *ssa.Function) *ssa.Package {
	for f := fn; f != nil; f = f.Parent() {
		if f.Pkg != nil {
			return f.Pkg
		}
		if o := f.Origin(); o != nil && o != f && o.Pkg != nil {
			return o.Pkg
		}
	}
	return nil
}

// find finds every flow built in the root packages and every binding of
// them in the main module.
func (fd *finder) find() {
	roots := map[*ssa.Package]*pkg{}
	for _, r := range fd.prog.roots {
		roots[r.ssa] = r
	}
	type site struct {
		call *ssa.Call
		fn   *ssa.Function
		p    *pkg
	}
	var ctors []site
	var handles []*ssa.Call
	for _, fn := range fd.ix.fns {
		if fn.TypeParams().Len() > 0 && len(fn.TypeArgs()) == 0 {
			continue // a generic body: its instances are analyzed instead
		}
		for _, b := range fn.Blocks {
			for _, in := range b.Instrs {
				call, ok := in.(*ssa.Call)
				if !ok {
					continue
				}
				callee := call.Call.StaticCallee()
				if callee == nil {
					continue
				}
				switch api[apiName(callee)].op {
				case opFlow:
					if p := roots[pkgOf(fn)]; p != nil {
						ctors = append(ctors, site{call, fn, p})
					}
				case opHandle:
					handles = append(handles, call)
				}
			}
		}
	}
	sort.SliceStable(ctors, func(i, j int) bool { return ctors[i].call.Pos() < ctors[j].call.Pos() })
	for _, s := range ctors {
		for _, c := range fd.contexts(s.fn, s.call.Call.Args) {
			fd.instances(s.call, c, s.p)
		}
	}
	sort.SliceStable(handles, func(i, j int) bool { return handles[i].Pos() < handles[j].Pos() })
	for _, h := range handles {
		for _, c := range fd.contexts(h.Parent(), h.Call.Args) {
			fd.bind(h, c)
		}
	}
}

// contexts returns the contexts to resolve args of a call in fn in: one
// per call site of fn when they depend on fn's parameters, else just "any".
func (fd *finder) contexts(fn *ssa.Function, args []ssa.Value) []*ctxt {
	dep := false
	seen := map[ssa.Value]bool{}
	for _, a := range args {
		if dependsOnParams(a, seen) {
			dep = true
		}
	}
	sites := fd.ix.callers[fn]
	if !dep || len(sites) == 0 {
		return []*ctxt{nil}
	}
	out := make([]*ctxt, 0, len(sites))
	for _, s := range sites {
		out = append(out, (*ctxt)(nil).push(s, fn))
	}
	return out
}

func dependsOnParams(v ssa.Value, seen map[ssa.Value]bool) bool {
	if v == nil || seen[v] {
		return false
	}
	seen[v] = true
	switch v.(type) {
	case *ssa.Parameter:
		return true
	case *ssa.Const, *ssa.Global, *ssa.Function, *ssa.FreeVar, *ssa.Builtin:
		return false
	}
	in, ok := v.(ssa.Instruction)
	if !ok {
		return false
	}
	for _, op := range in.Operands(nil) {
		if dependsOnParams(*op, seen) {
			return true
		}
	}
	// A variable: what is stored into it.
	if refs := v.Referrers(); refs != nil {
		for _, r := range *refs {
			if st, ok := r.(*ssa.Store); ok && st.Addr == v && dependsOnParams(st.Val, seen) {
				return true
			}
		}
	}
	return false
}

// instances records the flows a constructor call makes in context c.
func (fd *finder) instances(call *ssa.Call, c *ctxt, p *pkg) {
	callee := call.Call.StaticCallee()
	entry := api[apiName(callee)]
	pos := fd.prog.position(call.Pos())
	if ce := fd.a.calls[call.Pos()]; ce != nil {
		pos = fd.prog.position(ce.Pos())
	}
	names, ok := fd.ix.strings(call.Call.Args[0], c)
	if !ok {
		fd.warnings = append(fd.warnings, warning{pos: pos, text: "the flow's name is computed at run time, so extract leaves the flow out of the contract (App.Start uses the run-time rule for it); make the name a constant"})
		return
	}
	for _, name := range names {
		k := flowKey(call, name)
		if f, ok := fd.flows[k]; ok {
			other := fd.ev.options(call.Call.Args[1], c)
			if f.opts.known && (!other.known || !sameOptions(f.opts, other)) {
				f.opts.known = false
				f.opts.unknown = append(f.opts.unknown, "the calls of this constructor give it different options")
			}
			f.doAdd(call.Call.Args[2], c)
			continue
		}
		f := &flowInst{name: name, call: call, ctx: c, shape: entry.shape, pkg: p, pos: pos}
		targs := callee.TypeArgs()
		if len(targs) > 0 {
			f.in = targs[0]
		}
		if len(targs) > 1 {
			f.out = targs[1]
		}
		f.opts = fd.ev.options(call.Call.Args[1], c)
		f.doAdd(call.Call.Args[2], c)
		fd.flows[k] = f
		fd.order = append(fd.order, f)
	}
}

func (f *flowInst) doAdd(v ssa.Value, c *ctxt) {
	f.do = append(f.do, v)
	f.doCtx = append(f.doCtx, c)
}

func sameOptions(a, b options) bool {
	return a.mode == b.mode && a.ttl == b.ttl && a.claim == b.claim && a.durable == b.durable &&
		a.declaredSet == b.declaredSet && fmt.Sprint(a.declared) == fmt.Sprint(b.declared)
}

// flowsOf returns the flows value v may be (in context c).
func (fd *finder) flowsOf(v ssa.Value, c *ctxt) ([]*flowInst, bool) {
	var out []*flowInst
	ok := true
	seen := map[*flowInst]bool{}
	fd.ix.origins(v, c, func(o ssa.Value, oc *ctxt) {
		call, isCall := o.(*ssa.Call)
		if !isCall || api[apiName(call.Call.StaticCallee())].op != opFlow {
			ok = false
			return
		}
		names, nok := fd.ix.strings(call.Call.Args[0], oc)
		if !nok {
			ok = false
			return
		}
		for _, n := range names {
			if f := fd.flows[flowKey(call, n)]; f != nil && !seen[f] {
				seen[f] = true
				out = append(out, f)
			}
		}
	})
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, ok
}

// bind records the bindings made by an App.Handle call in context c.
func (fd *finder) bind(h *ssa.Call, c *ctxt) {
	pos := fd.prog.position(h.Pos())
	if ce := fd.a.calls[h.Pos()]; ce != nil {
		pos = fd.prog.position(ce.Pos())
	}
	args := h.Call.Args // receiver, binding, handler
	flows, ok := fd.flowsOf(args[2], c)
	if !ok {
		fd.warnings = append(fd.warnings, warning{pos: pos, text: "App.Handle binds a flow extract cannot trace to its oke.NewFlow, NewStream or NewLive call; that flow's contract has no such binding, so App.Start uses the run-time rule for it"})
	}
	if len(flows) == 0 {
		return
	}
	bs, ok := fd.bindingsOf(args[1], c, pos)
	if !ok {
		for _, f := range flows {
			fd.warnings = append(fd.warnings, warning{pos: pos, flow: f.name, text: "the binding is computed at run time, so the contract lacks it and App.Start uses the run-time rule for this flow; build it with oke.POST(\"/path\") (or GET, RPC, …) and constant values"})
		}
	}
	for _, f := range flows {
		for _, b := range bs {
			f.addBinding(b)
		}
	}
}

func (f *flowInst) addBinding(b binding) {
	for _, x := range f.bindings {
		if x.key() == b.key() {
			return
		}
	}
	f.bindings = append(f.bindings, b)
}

// bindingsOf returns the bindings value v may be.
func (fd *finder) bindingsOf(v ssa.Value, c *ctxt, pos token.Position) ([]binding, bool) {
	var out []binding
	ok := true
	fd.ix.origins(v, c, func(o ssa.Value, oc *ctxt) {
		call, isCall := o.(*ssa.Call)
		if !isCall {
			ok = false
			return
		}
		name := apiName(call.Call.StaticCallee())
		entry := api[name]
		args := call.Call.Args
		switch entry.op {
		case opBindingOpt:
			inner, iok := fd.bindingsOf(args[0], oc, pos)
			if !iok {
				ok = false
			}
			out = append(out, inner...)
		case opDedupeTTL:
			inner, iok := fd.bindingsOf(args[0], oc, pos)
			ttls, tok := fd.ix.strings(args[1], oc)
			if !iok || !tok {
				ok = false
			}
			for _, b := range inner {
				for _, t := range ttls {
					b.dedupeTTL = t
					out = append(out, b)
				}
			}
		case opBinding:
			b := binding{kind: entry.kind, method: entry.method, pos: pos}
			switch entry.kind {
			case "http":
				paths, pok := fd.ix.strings(args[0], oc)
				if !pok {
					ok = false
				}
				for _, p := range paths {
					b.path = p
					out = append(out, b)
				}
			case "event":
				events, eok := fd.ix.strings(args[0], oc)
				if !eok {
					ok = false
				}
				for _, e := range events {
					b.event = e
					out = append(out, b)
				}
			case "webhook":
				paths, pok := fd.ix.strings(args[0], oc)
				fields, fok := fd.ix.strings(args[1], oc)
				if !pok || !fok {
					ok = false
				}
				b.dedupeTTL = oke.DefaultDedupeTTL
				for _, p := range paths {
					for _, fl := range fields {
						b.path, b.dedupe = p, fl
						out = append(out, b)
					}
				}
			default: // rpc, internal, schedule
				out = append(out, b)
			}
		default:
			ok = false
		}
	})
	return out, ok
}

// summary returns what the flow's function does.
func (fd *finder) summary(f *flowInst) *summary {
	if f.sum != nil {
		return f.sum
	}
	if f.busy {
		return &summary{} // a flow that calls itself: its effects are counted once
	}
	f.busy = true
	defer func() { f.busy = false }()
	s := &summary{}
	seen := map[string]bool{}
	add := func(part *summary) {
		for _, o := range part.occs {
			k := string(o.effect) + "\x00" + o.why()
			if !seen[k] {
				seen[k] = true
				s.occs = append(s.occs, o)
			}
		}
		s.steps = append(s.steps, part.steps...)
	}
	for i, v := range f.do {
		found := false
		fd.ix.origins(v, f.doCtx[i], func(o ssa.Value, _ *ctxt) {
			var fn *ssa.Function
			switch x := o.(type) {
			case *ssa.Function:
				fn = x
			case *ssa.MakeClosure:
				fn = x.Fn.(*ssa.Function)
			default:
				return
			}
			found = true
			if len(fn.Blocks) == 0 {
				return
			}
			e := fd.a.topEnv(fn)
			if len(e.params) >= 3 {
				e.params[2] = tFx
			}
			if f.shape != "unary" && len(e.params) >= 4 {
				// A stream's writer and a live feed's send callback
				// are the response: writing to them is not an effect.
				e.params[3] = tOke
			}
			add(fd.a.summarize(fn, e))
		})
		if !found {
			s.occs = append(s.occs, occ{effect: oke.EffectWrite, conservative: true,
				hops: []string{fmt.Sprintf("%s:%d conservative: the flow's function is a value extract cannot trace", f.pos.Filename, f.pos.Line)}})
		}
	}
	f.sum = s
	return s
}

// isZeroResponse reports whether v is the zero oke.Response (Response[T]{}).
func isZeroResponse(fd *finder, v ssa.Value) bool {
	s := fd.ev.eval(v, nil, 0)
	if s.unknown != "" {
		return false
	}
	if s.zero {
		return true
	}
	for _, f := range s.fields {
		if !isZeroConst(f) && !(f.fields != nil && allZero(f)) && !f.isNil {
			return false
		}
	}
	return true
}

func allZero(s *sval) bool {
	for _, f := range s.fields {
		if !isZeroConst(f) && !f.isNil && !(f.fields != nil && allZero(f)) {
			return false
		}
	}
	return true
}
