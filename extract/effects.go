package extract

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/tools/go/ssa"

	"github.com/okengine/oke"
)

// This file infers a flow's effects from its function's SSA, transitively.
//
// The analysis follows every call the app's code makes whose callee it can
// see — static calls, calls of function literals and method values, the
// bodies of oke.Step, fx.Raw and Store.Tx, and flows run with oke.Call —
// and counts every call of the oke API it meets (the table in api.go). On
// the way it tracks which values are, or hold, an effect handle: the flow's
// *oke.Fx, a *oke.Store from fx.Store, a *oke.Tx from fx.Tx (the flow's
// transaction) or from Store.Tx (a transaction of its own). A handle that
// reaches code extract cannot see — an interface method, a function value
// from elsewhere, a function of a package outside the main module — counts
// as a write: "conservative". Code that receives no handle is classified by
// outside.go: pure, or an effect outside fx (raw), so that a flow ignores
// the header only when extract proves it has no non-read effect.

// taint is the set of handles a value is, or holds.
type taint uint16

const (
	tFx        taint = 1 << iota // the flow's *oke.Fx
	tStore                       // a *oke.Store
	tFlowTx                      // the flow's transaction (fx.Tx)
	tStoreTx                     // a transaction of Store.Tx
	tTx                          // a *oke.Tx of an origin extract did not see
	tUnknownFn                   // a function value from elsewhere
	tClient                      // the *http.Client of fx.HTTPClient (its requests are fetches)
	tOke                         // a value oke gives the flow: a stream's writer, a live feed's send
)

const tHandles = tFx | tStore | tFlowTx | tStoreTx | tTx

func (t taint) String() string {
	var parts []string
	for _, x := range []struct {
		t    taint
		name string
	}{{tFx, "fx"}, {tStore, "a Store"}, {tFlowTx | tStoreTx | tTx, "a Tx"}} {
		if t&x.t != 0 {
			parts = append(parts, x.name)
		}
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, " and ")
}

// env is what a function is analyzed with: the handles in its parameters
// and captured variables, and the constant strings its string parameters
// are at the call site (so a helper that runs the SQL it is given is
// classified per call).
type env struct {
	params []taint
	free   []taint
	strs   map[int][]string
}

func (e env) key() string {
	var b strings.Builder
	for _, t := range e.params {
		fmt.Fprintf(&b, "%d,", t)
	}
	b.WriteString("|")
	for _, t := range e.free {
		fmt.Fprintf(&b, "%d,", t)
	}
	if len(e.strs) > 0 {
		keys := make([]int, 0, len(e.strs))
		for k := range e.strs {
			keys = append(keys, k)
		}
		sort.Ints(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "|%d=%q", k, e.strs[k])
		}
	}
	return b.String()
}

// occ is one occurrence of an effect: the chain of calls that leads to it.
type occ struct {
	effect       oke.Effect
	hops         []string
	tx           bool // a statement through the flow's transaction (fx.Tx)
	conservative bool
	// outside marks an effect outside fx (outside.go): raw, warned about
	// unless it is inside fx.Raw. pos is its call, fix what to do.
	outside bool
	unread  bool // outside: a call of code extract did not read
	pos     token.Pos
	fix     string
}

func (o occ) why() string { return strings.Join(o.hops, " → ") }

// stepUse is one use of a step name (Step, Sleep, SleepUntil, NewID).
type stepUse struct {
	name     string // the constant name, or the expression that computes it
	constant bool
	sites    []ssa.Instruction // the calls from the summarized function down to it
}

// summary is what a function does, in one env.
type summary struct {
	occs  []occ
	ret   []taint
	steps []stepUse
}

const maxOccs = 64

type sumKey struct {
	fn  *ssa.Function
	env string
}

// analyzer infers effects over the whole program.
type analyzer struct {
	prog  *program
	ix    *index
	ev    *evaluator
	sums  map[sumKey]*summary
	busy  map[sumKey]bool
	types map[types.Type]taint
	calls map[token.Pos]*ast.CallExpr // by Lparen
	// flows resolves the flows a value may hold (for oke.Call and
	// oke.Run), and flowSummary summarizes one: set by the extractor.
	flows       func(v ssa.Value, c *ctxt) ([]*flowInst, bool)
	flowSummary func(f *flowInst) *summary
	// impls caches the implementations of interface methods; named is
	// every loaded named type they are looked for among (outside.go).
	impls map[string][]impl
	named []*types.Named
}

func newAnalyzer(prog *program, ix *index, ev *evaluator) *analyzer {
	a := &analyzer{prog: prog, ix: ix, ev: ev, sums: map[sumKey]*summary{}, busy: map[sumKey]bool{},
		types: map[types.Type]taint{}, calls: map[token.Pos]*ast.CallExpr{}, impls: map[string][]impl{}}
	for _, p := range prog.sortedCodePkgs() {
		for _, f := range p.files {
			ast.Inspect(f, func(n ast.Node) bool {
				if c, ok := n.(*ast.CallExpr); ok {
					a.calls[c.Lparen] = c
				}
				return true
			})
		}
	}
	return a
}

// typeTaint is the handles a value of type t may hold, by its type alone.
func (a *analyzer) typeTaint(t types.Type) taint {
	if r, ok := a.types[t]; ok {
		return r
	}
	a.types[t] = 0 // cycles
	var r taint
	switch {
	case isOkeType(t, typeFx):
		r = tFx
	case isOkeType(t, typeStore):
		r = tStore
	case isOkeType(t, typeTx):
		r = tTx
	default:
		if n, ok := types.Unalias(t).(*types.Named); ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == okePath {
			break // oke's other types hold no handle of the flow's
		}
		switch u := t.Underlying().(type) {
		case *types.Pointer:
			r = a.typeTaint(u.Elem())
		case *types.Slice:
			r = a.typeTaint(u.Elem())
		case *types.Array:
			r = a.typeTaint(u.Elem())
		case *types.Chan:
			r = a.typeTaint(u.Elem())
		case *types.Map:
			r = a.typeTaint(u.Key()) | a.typeTaint(u.Elem())
		case *types.Struct:
			for i := 0; i < u.NumFields(); i++ {
				r |= a.typeTaint(u.Field(i).Type())
			}
		}
	}
	a.types[t] = r
	return r
}

// topEnv is the env of a function called from code extract does not see:
// its parameters and captured variables hold what their types allow.
func (a *analyzer) topEnv(fn *ssa.Function) env {
	e := env{}
	for _, p := range fn.Params {
		t := a.typeTaint(p.Type())
		if _, isFn := p.Type().Underlying().(*types.Signature); isFn {
			t |= tUnknownFn // a function the unseen caller chose
		}
		e.params = append(e.params, t)
	}
	for _, fv := range fn.FreeVars {
		e.free = append(e.free, a.typeTaint(fv.Type()))
	}
	return e
}

// summarize analyzes fn in e.
func (a *analyzer) summarize(fn *ssa.Function, e env) *summary {
	k := sumKey{fn, e.key()}
	if s, ok := a.sums[k]; ok {
		return s
	}
	if a.busy[k] {
		return &summary{} // recursion: the outer analysis holds its effects
	}
	a.busy[k] = true
	f := &frame{a: a, fn: fn, env: e, t: map[ssa.Value]taint{}, tup: map[*ssa.Call][]taint{}, handled: map[*ssa.MakeClosure]bool{}}
	s := f.run()
	delete(a.busy, k)
	a.sums[k] = s
	return s
}

// frame is one function being analyzed.
type frame struct {
	a       *analyzer
	fn      *ssa.Function
	env     env
	t       map[ssa.Value]taint
	tup     map[*ssa.Call][]taint
	handled map[*ssa.MakeClosure]bool
	out     summary
	seen    map[string]bool
	// raw counts the fx.Raw bodies being included: an effect outside fx
	// there is declared raw, not warned about.
	raw int
	// ifaces are the main module's types this frame converts to an
	// interface, whose methods it has included.
	ifaces map[types.Type]bool
}

func (f *frame) taintOf(v ssa.Value) taint {
	switch x := v.(type) {
	case *ssa.Parameter:
		if i := paramIndex(f.fn, x); i >= 0 && i < len(f.env.params) {
			return f.env.params[i] | f.t[v]
		}
	case *ssa.FreeVar:
		for i, fv := range f.fn.FreeVars {
			if fv == x && i < len(f.env.free) {
				return f.env.free[i] | f.t[v]
			}
		}
	case *ssa.Const, *ssa.Global, *ssa.Builtin:
		return 0
	case *ssa.Function:
		return 0
	}
	return f.t[v]
}

// add adds t to the reference v and to everything v was derived from (a
// store into a field taints the whole variable).
func (f *frame) add(v ssa.Value, t taint) bool {
	changed := false
	for i := 0; i < 16 && v != nil && t != 0; i++ {
		if f.t[v]&t != t {
			f.t[v] |= t
			changed = true
		}
		switch x := v.(type) {
		case *ssa.FieldAddr:
			v = x.X
		case *ssa.IndexAddr:
			v = x.X
		case *ssa.Slice:
			v = x.X
		case *ssa.UnOp:
			v = x.X
		case *ssa.ChangeType:
			v = x.X
		default:
			v = nil
		}
	}
	return changed
}

func (f *frame) run() *summary {
	// Taints, to a fixed point (flow-insensitive within the function).
	for iter := 0; iter < 20; iter++ {
		changed := false
		clear(f.tup) // results depend on the arguments' taints, which grow
		for _, b := range f.fn.Blocks {
			for _, in := range b.Instrs {
				switch in := in.(type) {
				case *ssa.Store:
					changed = f.add(in.Addr, f.taintOf(in.Val)) || changed
				case *ssa.MapUpdate:
					changed = f.add(in.Map, f.taintOf(in.Key)|f.taintOf(in.Value)) || changed
				case *ssa.Send:
					changed = f.add(in.Chan, f.taintOf(in.X)) || changed
				case *ssa.Call:
					if b, ok := in.Call.Value.(*ssa.Builtin); ok && b.Name() == "copy" && len(in.Call.Args) == 2 {
						changed = f.add(in.Call.Args[0], f.taintOf(in.Call.Args[1])) || changed
					}
				}
				if v, ok := in.(ssa.Value); ok {
					if nt := f.transfer(v); f.t[v]&nt != nt {
						f.t[v] |= nt
						changed = true
					}
				}
			}
		}
		if !changed {
			break
		}
	}
	// Effects, in instruction order.
	f.seen = map[string]bool{}
	for _, b := range f.fn.Blocks {
		for _, in := range b.Instrs {
			if c, ok := in.(ssa.CallInstruction); ok {
				f.call(c)
			}
		}
	}
	for _, b := range f.fn.Blocks {
		for _, in := range b.Instrs {
			f.values(in)
		}
	}
	// What it returns.
	for _, b := range f.fn.Blocks {
		if ret, ok := b.Instrs[len(b.Instrs)-1].(*ssa.Return); ok {
			if f.out.ret == nil {
				f.out.ret = make([]taint, len(ret.Results))
			}
			for i, r := range ret.Results {
				if i < len(f.out.ret) {
					f.out.ret[i] |= f.taintOf(r)
				}
			}
		}
	}
	return &f.out
}

func (f *frame) transfer(v ssa.Value) taint {
	switch x := v.(type) {
	case *ssa.Phi:
		var t taint
		for _, e := range x.Edges {
			t |= f.taintOf(e)
		}
		return t
	case *ssa.Extract:
		if call, ok := x.Tuple.(*ssa.Call); ok {
			if ts := f.results(call); x.Index < len(ts) {
				return ts[x.Index]
			}
			return 0
		}
		return f.taintOf(x.Tuple)
	case *ssa.Call:
		if ts := f.results(x); len(ts) == 1 {
			return ts[0]
		}
		return 0
	case *ssa.BinOp, *ssa.Alloc, *ssa.MakeSlice, *ssa.MakeMap, *ssa.MakeChan:
		return 0
	case *ssa.MakeClosure:
		var t taint
		for _, b := range x.Bindings {
			t |= f.taintOf(b)
		}
		return t
	}
	var t taint
	if in, ok := v.(ssa.Instruction); ok {
		for _, op := range in.Operands(nil) {
			if *op != nil {
				t |= f.taintOf(*op)
			}
		}
	}
	return t
}

// results returns the taints of a call's results.
func (f *frame) results(c *ssa.Call) []taint {
	if ts, ok := f.tup[c]; ok {
		return ts
	}
	var ts []taint
	cc := &c.Call
	if b, ok := cc.Value.(*ssa.Builtin); ok {
		if b.Name() == "append" {
			var t taint
			for _, a := range cc.Args {
				t |= f.taintOf(a)
			}
			ts = []taint{t}
		}
	} else if callee := cc.StaticCallee(); callee != nil {
		if name := apiName(callee); name != "" {
			switch api[name].op {
			case opStore:
				ts = []taint{tStore}
			case opFlowTx:
				ts = []taint{tFlowTx, 0}
			case opClient:
				ts = []taint{tClient}
			}
		} else if len(callee.Blocks) > 0 && !inOke(callee) {
			ts = f.a.summarize(callee, f.callEnv(cc, callee)).ret
		}
	}
	f.tup[c] = ts
	return ts
}

// callEnv is the env of callee called as cc from this frame.
func (f *frame) callEnv(cc *ssa.CallCommon, callee *ssa.Function) env {
	e := env{}
	args := cc.Args
	for i, p := range callee.Params {
		t := taint(0)
		if i < len(args) {
			t = f.taintOf(args[i])
			if _, isFn := p.Type().Underlying().(*types.Signature); isFn && !f.knownFunc(args[i]) {
				t |= tUnknownFn
			}
			if basic, ok := p.Type().Underlying().(*types.Basic); ok && basic.Info()&types.IsString != 0 {
				if ss, ok := f.strings(args[i]); ok {
					if e.strs == nil {
						e.strs = map[int][]string{}
					}
					e.strs[i] = ss
				}
			}
		}
		if t&^tUnknownFn == 0 {
			t |= f.a.typeTaint(p.Type())
		}
		e.params = append(e.params, t)
	}
	if mc, ok := cc.Value.(*ssa.MakeClosure); ok {
		for i, b := range mc.Bindings {
			t := f.taintOf(b)
			if t == 0 && i < len(callee.FreeVars) {
				t = f.a.typeTaint(callee.FreeVars[i].Type())
			}
			e.free = append(e.free, t)
		}
	} else {
		for _, fv := range callee.FreeVars {
			e.free = append(e.free, f.a.typeTaint(fv.Type()))
		}
	}
	return e
}

// knownFunc reports whether the function value v is made in code extract
// sees (a function, a function literal, a method value), so that its body
// is analyzed where it is made.
func (f *frame) knownFunc(v ssa.Value) bool {
	switch x := v.(type) {
	case *ssa.Function, *ssa.MakeClosure:
		return true
	case *ssa.Const:
		return true // nil
	case *ssa.Phi:
		for _, e := range x.Edges {
			if !f.knownFunc(e) {
				return false
			}
		}
		return true
	case *ssa.ChangeType:
		return f.knownFunc(x.X)
	case *ssa.Parameter, *ssa.FreeVar:
		return f.taintOf(v)&tUnknownFn == 0
	}
	return false
}

// strings returns the constant strings v is in this frame.
func (f *frame) strings(v ssa.Value) ([]string, bool) {
	switch x := v.(type) {
	case *ssa.Const:
		s, ok := constString(x)
		return []string{s}, ok
	case *ssa.Phi:
		var out []string
		for _, e := range x.Edges {
			ss, ok := f.strings(e)
			if !ok {
				return nil, false
			}
			out = append(out, ss...)
		}
		return dedupe(out), len(out) > 0
	case *ssa.Parameter:
		if i := paramIndex(f.fn, x); i >= 0 {
			ss, ok := f.env.strs[i]
			return ss, ok
		}
	case *ssa.BinOp:
		if x.Op != token.ADD {
			return nil, false
		}
		xs, okx := f.strings(x.X)
		ys, oky := f.strings(x.Y)
		if !okx || !oky || len(xs)*len(ys) > 64 {
			return nil, false
		}
		var out []string
		for _, a := range xs {
			for _, b := range ys {
				out = append(out, a+b)
			}
		}
		return dedupe(out), true
	case *ssa.ChangeType:
		return f.strings(x.X)
	}
	return nil, false
}

func dedupe(ss []string) []string {
	seen := map[string]bool{}
	out := ss[:0:0]
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// hop describes an instruction of this frame: "FILE:LINE what".
func (f *frame) hop(pos token.Pos, what string) string {
	if !pos.IsValid() {
		pos = f.fn.Pos()
	}
	p := f.a.prog.position(pos)
	return fmt.Sprintf("%s:%d %s", p.Filename, p.Line, what)
}

// callText is the source of the called expression of a call ("fx.Emit",
// "s.callProvider", "tx.QueryRow").
func (f *frame) callText(cc *ssa.CallCommon) string {
	if ce := f.a.calls[cc.Pos()]; ce != nil {
		s := types.ExprString(ce.Fun)
		if len(s) > 60 {
			s = s[:57] + "…"
		}
		return s
	}
	if fn := cc.StaticCallee(); fn != nil {
		return fn.Name()
	}
	if cc.IsInvoke() {
		return cc.Method.Name()
	}
	return cc.Value.Name()
}

func (f *frame) emit(o occ) {
	k := string(o.effect) + "\x00" + o.why()
	if f.seen[k] || len(f.out.occs) >= maxOccs {
		return
	}
	f.seen[k] = true
	f.out.occs = append(f.out.occs, o)
}

// include adds a callee's summary, reached through the instruction at with
// the hop h.
func (f *frame) include(s *summary, at ssa.Instruction, h string) {
	for _, o := range s.occs {
		o.hops = append([]string{h}, o.hops...)
		if f.raw > 0 {
			o.outside = false // inside fx.Raw: declared
		}
		if o.outside && !f.a.prog.inMain(o.pos) && f.a.prog.inMain(at.Pos()) {
			o.pos = at.Pos() // warn at the main module's call into another module's code
		}
		f.emit(o)
	}
	for _, st := range s.steps {
		st.sites = append([]ssa.Instruction{at}, st.sites...)
		f.out.steps = append(f.out.steps, st)
	}
}

func (f *frame) conservative(at token.Pos, what string) {
	f.emit(occ{effect: oke.EffectWrite, conservative: true, hops: []string{f.hop(at, "conservative: "+what)}})
}

// argTaint is the handles the arguments of cc carry (function values
// excepted: their bodies are analyzed where they are made).
func (f *frame) argTaint(cc *ssa.CallCommon) taint {
	var t taint
	vals := cc.Args
	if cc.IsInvoke() {
		vals = append([]ssa.Value{cc.Value}, vals...)
	}
	for _, v := range vals {
		if _, isFn := v.Type().Underlying().(*types.Signature); isFn {
			continue
		}
		t |= f.taintOf(v)
	}
	return t & tHandles
}

// call analyzes one call.
func (f *frame) call(in ssa.CallInstruction) {
	cc := in.Common()
	pos := cc.Pos()
	if !pos.IsValid() {
		pos = in.Pos()
	}
	if cc.IsInvoke() {
		if t := f.argTaint(cc); t != 0 {
			f.conservative(pos, fmt.Sprintf("passes %s to the interface method %s.%s, which extract cannot see into",
				t, typeName(cc.Value.Type()), cc.Method.Name()))
			return
		}
		f.invoke(in, cc, pos)
		return
	}
	if _, ok := cc.Value.(*ssa.Builtin); ok {
		return
	}
	if callee := cc.StaticCallee(); callee != nil {
		f.callFunc(in, cc, callee, pos)
		return
	}
	// A call through a function value: one made in code extract sees is
	// analyzed where it is made (values); one from elsewhere is traced to
	// the functions it may hold.
	if f.knownFunc(cc.Value) {
		return
	}
	if t := f.argTaint(cc); t != 0 {
		f.conservative(pos, fmt.Sprintf("passes %s to a function value from elsewhere (%s), which extract cannot see into", t, f.callText(cc)))
		return
	}
	f.funcValue(in, cc, pos)
}

func (f *frame) callFunc(in ssa.CallInstruction, cc *ssa.CallCommon, callee *ssa.Function, pos token.Pos) {
	if name := apiName(callee); name != "" {
		if entry, ok := api[name]; ok {
			f.callAPI(in, cc, name, entry.op, pos)
			return
		}
		if t := f.argTaint(cc); t != 0 {
			f.conservative(pos, fmt.Sprintf("passes %s to oke.%s, which is not in extract's table of oke's effects", t, name))
		}
		return
	}
	if inOke(callee) {
		return
	}
	if len(callee.Blocks) == 0 {
		if t := f.argTaint(cc); t != 0 {
			f.conservative(pos, fmt.Sprintf("passes %s to %s, whose source extract does not read", t, funcName(callee)))
		}
		f.externalCall(cc, callee, pos)
		return
	}
	if mc, ok := cc.Value.(*ssa.MakeClosure); ok {
		f.handled[mc] = true
	}
	s := f.a.summarize(callee, f.callEnv(cc, callee))
	f.include(s, in, f.hop(pos, f.callText(cc)))
}

// callAPI analyzes a call of the oke API.
func (f *frame) callAPI(in ssa.CallInstruction, cc *ssa.CallCommon, name string, o op, pos token.Pos) {
	entry := api[name]
	text := f.callText(cc)
	args := cc.Args
	arg := func(i int) ssa.Value {
		if i < len(args) {
			return args[i]
		}
		return nil
	}
	switch o {
	case opFlow:
		// A flow built here runs as its own flow, not as part of this
		// function: its body is the flow's.
		if mc, ok := arg(2).(*ssa.MakeClosure); ok {
			f.handled[mc] = true
		}
	case opEffect, opClient:
		what := text
		if ss, ok := f.strings(arg(2)); ok && name == "(*Fx).Emit" {
			what += " " + quoteAll(ss)
		}
		f.emit(occ{effect: entry.effect, hops: []string{f.hop(pos, what)}})
	case opSQL:
		recv := f.taintOf(arg(0))
		prefix, tx := "", false
		if strings.HasPrefix(name, "(*Tx)") {
			switch {
			case recv&tHandles == tFlowTx:
				prefix, tx = "fx.Tx → ", true
			case recv&tHandles == tStoreTx:
				prefix = "Store.Tx → "
			}
		}
		sqls, ok := f.strings(arg(entry.arg))
		if !ok {
			f.emit(occ{effect: oke.EffectWrite, tx: tx, hops: []string{f.hop(pos, prefix+text+sqlAtRunTime)}})
			return
		}
		for _, q := range sqls {
			f.emit(occ{effect: oke.ClassifySQL(q), tx: tx, hops: []string{f.hop(pos, prefix+text+" "+sqlText(q))}})
		}
	case opStoreTx:
		f.bodies(in, arg(entry.fn), pos, text, func(fn *ssa.Function, e env) env {
			if len(e.params) > 0 {
				e.params[0] = tStoreTx
			}
			return e
		})
	case opRaw:
		what := text
		if ss, ok := f.strings(arg(2)); ok {
			what += " " + quoteAll(ss)
		}
		f.emit(occ{effect: oke.EffectRaw, hops: []string{f.hop(pos, what)}})
		f.raw++
		f.bodies(in, arg(entry.fn), pos, what, nil)
		f.raw--
	case opStep, opStepName:
		use := stepUse{sites: []ssa.Instruction{in}}
		if s, ok := constString(arg(entry.arg)); ok {
			use.name, use.constant = entry.prefix+s, true
		} else {
			use.name = entry.prefix + f.exprText(arg(entry.arg), pos)
		}
		f.out.steps = append(f.out.steps, use)
		if o == opStep {
			f.bodies(in, arg(entry.fn), pos, text+" "+quoteStep(use), nil)
		}
	case opCall, opRun:
		flows, ok := f.a.flows(arg(entry.arg), nil)
		if !ok || len(flows) == 0 {
			f.emit(occ{effect: oke.EffectCall, hops: []string{f.hop(pos, text+" of a flow extract cannot trace")}})
			if o == opCall {
				f.conservative(pos, text+" of a flow extract cannot trace: its effects are unknown")
			}
			return
		}
		for _, fl := range flows {
			h := f.hop(pos, text+" "+fl.name)
			f.emit(occ{effect: oke.EffectCall, hops: []string{h}})
			if o == opCall {
				s := f.a.flowSummary(fl)
				for _, oc := range s.occs {
					oc.hops = append([]string{h}, oc.hops...)
					f.emit(oc)
				}
			}
		}
	}
}

// bodies analyzes the function argument fnArg of an API call (a step's
// function, fx.Raw's, Store.Tx's) as called there.
func (f *frame) bodies(in ssa.CallInstruction, fnArg ssa.Value, pos token.Pos, what string, adjust func(*ssa.Function, env) env) {
	if fnArg == nil {
		return
	}
	if mc, ok := fnArg.(*ssa.MakeClosure); ok {
		f.handled[mc] = true
	}
	found := false
	f.a.ix.origins(fnArg, nil, func(v ssa.Value, _ *ctxt) {
		var fn *ssa.Function
		var e env
		switch x := v.(type) {
		case *ssa.Function:
			fn = x
			e = f.a.topEnv(fn)
		case *ssa.MakeClosure:
			fn = x.Fn.(*ssa.Function)
			e = f.a.topEnv(fn)
			if x.Parent() == f.fn {
				for i, b := range x.Bindings {
					if t := f.taintOf(b); t != 0 && i < len(e.free) {
						e.free[i] = t
					}
				}
			}
		default:
			return
		}
		found = true
		if len(fn.Blocks) == 0 || inOke(fn) {
			return
		}
		if adjust != nil {
			e = adjust(fn, e)
		}
		f.include(f.a.summarize(fn, e), in, f.hop(pos, what))
	})
	if !found && adjust != nil {
		// Store.Tx hands a Tx to a function extract cannot see.
		f.conservative(pos, what+" runs a function value from elsewhere with a Tx")
	}
}

// values analyzes the function values an instruction makes or uses other
// than by calling them: a function literal or method value passed on or
// stored is analyzed where it is made, as if called there.
func (f *frame) values(in ssa.Instruction) {
	if mi, ok := in.(*ssa.MakeInterface); ok {
		f.converted(mi)
		return
	}
	if mc, ok := in.(*ssa.MakeClosure); ok {
		if f.handled[mc] || allCalled(mc) {
			return
		}
		fn := mc.Fn.(*ssa.Function)
		e := f.a.topEnv(fn)
		for i, b := range mc.Bindings {
			if t := f.taintOf(b); t != 0 && i < len(e.free) {
				e.free[i] = t
			}
		}
		what := "func literal"
		if strings.HasSuffix(fn.Name(), "$bound") {
			what = "method value " + strings.TrimSuffix(fn.Name(), "$bound")
		}
		f.include(f.a.summarize(fn, e), in, f.hop(mc.Pos(), what))
		return
	}
	for i, op := range in.Operands(nil) {
		fn, ok := (*op).(*ssa.Function)
		if !ok || len(fn.Blocks) == 0 || inOke(fn) {
			continue
		}
		if c, isCall := in.(ssa.CallInstruction); isCall && i == 0 && c.Common().Value == fn {
			continue // a static call: analyzed as one
		}
		if c, isCall := in.(ssa.CallInstruction); isCall {
			if callee := c.Common().StaticCallee(); callee != nil && apiName(callee) != "" {
				if e, ok := api[apiName(callee)]; ok && (e.op == opStep || e.op == opRaw || e.op == opStoreTx || e.op == opFlow) {
					continue // analyzed as the API's body (or a flow's)
				}
			}
		}
		f.include(f.a.summarize(fn, f.a.topEnv(fn)), in, f.hop(in.Pos(), "function value "+fn.Name()))
	}
}

// allCalled reports whether every use of a closure calls it (so it is
// analyzed at each call, with the call's arguments).
func allCalled(mc *ssa.MakeClosure) bool {
	refs := mc.Referrers()
	if refs == nil || len(*refs) == 0 {
		return false
	}
	for _, r := range *refs {
		c, ok := r.(ssa.CallInstruction)
		if !ok || c.Common().Value != mc {
			return false
		}
	}
	return true
}

// exprText is the source of a value's expression, for a step name that is
// not a constant.
func (f *frame) exprText(v ssa.Value, at token.Pos) string {
	if c, ok := v.(*ssa.Call); ok {
		if ce := f.a.calls[c.Call.Pos()]; ce != nil {
			return types.ExprString(ce)
		}
	}
	if v != nil && v.Name() != "" {
		return "(" + v.Name() + ")"
	}
	return "(computed)"
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, "|")
}

func quoteStep(u stepUse) string {
	if u.constant {
		return strconv.Quote(u.name)
	}
	return u.name
}

// sqlAtRunTime ends the why of a statement whose SQL is not a constant.
const sqlAtRunTime = " with SQL computed at run time (counts as a write)"

// sqlText shortens a statement for a why line.
func sqlText(q string) string {
	q = strings.Join(strings.Fields(q), " ")
	const max = 72
	if len(q) > max {
		cut := max
		for cut > 0 && q[cut] != ' ' {
			cut--
		}
		if cut < max/2 {
			cut = max
		}
		q = q[:cut] + " …"
	}
	return q
}

func typeName(t types.Type) string {
	return types.TypeString(t, func(p *types.Package) string { return p.Name() })
}

func funcName(fn *ssa.Function) string {
	if obj := fn.Object(); obj != nil {
		if f, ok := obj.(*types.Func); ok {
			return f.FullName()
		}
	}
	return fn.String()
}
