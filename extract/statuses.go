package extract

import (
	"go/constant"
	"go/token"
	"sort"

	"golang.org/x/tools/go/ssa"
)

// This file infers what a flow answers: its 2xx statuses (from its return
// statements) — the OpenAPI document lists those and no other success.

// statuses returns the 2xx statuses the flow's function answers with:
// oke.OK 200, Created 201, Accepted 202, NoContent 204, Raw with a constant
// status, a Response{Status: …} literal; 204 too for a durable flow that
// sleeps. A return that forwards another function's results (a method
// value's wrapper, a helper) is read in that function; a function's recover
// block (there for its defers) is no answer. A flow whose every return is
// an error answers no 2xx (none); one extract cannot read answers 200.
func (fd *finder) statuses(f *flowInst) []int {
	set := map[int]bool{}
	unknown := false
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
			if fd.returnStatuses(fn, set, 0) {
				unknown = true
			}
		})
		if !found {
			unknown = true
		}
	}
	if f.sum != nil {
		for _, st := range f.sum.steps {
			if c, ok := st.sites[len(st.sites)-1].(ssa.CallInstruction); ok {
				if n := apiName(c.Common().StaticCallee()); n == "Sleep" || n == "SleepUntil" || n == "AwaitSignal" || n == "AwaitSignalStep" {
					set[204] = true
				}
			}
		}
	}
	if unknown && len(set) == 0 {
		set[200] = true
	}
	out := []int{}
	for s := range set {
		out = append(out, s)
	}
	sort.Ints(out)
	return out
}

// returnStatuses adds to set the 2xx statuses fn's returns answer with; it
// reports whether a return could not be read.
func (fd *finder) returnStatuses(fn *ssa.Function, set map[int]bool, depth int) (unknown bool) {
	if depth > 4 || len(fn.Blocks) == 0 {
		return true
	}
	for _, b := range fn.Blocks {
		if b == fn.Recover {
			continue // reached only when a deferred call recovers a panic
		}
		ret, ok := b.Instrs[len(b.Instrs)-1].(*ssa.Return)
		if !ok || len(ret.Results) != 2 {
			continue
		}
		ret = storedResults(ret)
		// Forwarding another function's answer: read it there, where its
		// error paths can be told apart.
		if callee := forwarded(ret); callee != nil {
			if fd.returnStatuses(callee, set, depth+1) {
				unknown = true
			}
			continue
		}
		if c, ok := ret.Results[1].(*ssa.Const); !ok || c.Value != nil {
			// An error may be returned: a zero Response with it is
			// an error path, not an answer.
			if c0, ok := ret.Results[0].(*ssa.Const); ok && c0.Value == nil {
				continue
			}
			if isZeroResponse(fd, ret.Results[0]) {
				continue
			}
		}
		fd.ix.origins(ret.Results[0], nil, func(o ssa.Value, _ *ctxt) {
			switch x := o.(type) {
			case *ssa.Call:
				switch apiName(x.Call.StaticCallee()) {
				case "OK":
					set[200] = true
				case "Created":
					set[201] = true
				case "Accepted":
					set[202] = true
				case "NoContent":
					set[204] = true
				case "RawResponse":
					if c, ok := x.Call.Args[0].(*ssa.Const); ok && c.Value != nil && c.Value.Kind() == constant.Int {
						if n, ok := constant.Int64Val(c.Value); ok && n >= 200 && n < 300 {
							set[int(n)] = true
						}
					} else {
						unknown = true
					}
				default:
					unknown = true
				}
			case *ssa.Const:
				set[200] = true
			default:
				s := fd.ev.eval(o, nil, 0)
				if s.unknown != "" {
					unknown = true
					return
				}
				st := s.field("Status")
				if isZeroConst(st) {
					set[200] = true
				} else if st.c != nil && st.c.Kind() == constant.Int {
					if n, ok := constant.Int64Val(st.c); ok && n >= 200 && n < 300 {
						set[int(n)] = true
					}
				} else {
					unknown = true
				}
			}
		})
	}
	return unknown
}

// storedResults returns ret with each result that is a load of a local
// slot (a function with defers stores its results, runs the defers, then
// loads them) replaced by the value stored there in ret's block.
func storedResults(ret *ssa.Return) *ssa.Return {
	var out *ssa.Return
	for i, r := range ret.Results {
		load, ok := r.(*ssa.UnOp)
		if !ok || load.Op != token.MUL {
			continue
		}
		slot, ok := load.X.(*ssa.Alloc)
		if !ok {
			continue
		}
		var val ssa.Value
		for _, in := range ret.Block().Instrs {
			if in == load {
				break
			}
			if st, ok := in.(*ssa.Store); ok && st.Addr == slot {
				val = st.Val
			}
		}
		if val == nil {
			continue
		}
		if out == nil {
			out = &ssa.Return{Results: append([]ssa.Value(nil), ret.Results...)}
		}
		out.Results[i] = val
	}
	if out == nil {
		return ret
	}
	return out
}

// forwarded returns the function whose results ret returns as they are
// (return f(…)), when it has a body outside oke.
func forwarded(ret *ssa.Return) *ssa.Function {
	var call *ssa.Call
	for i, r := range ret.Results {
		x, ok := r.(*ssa.Extract)
		if !ok || x.Index != i {
			return nil
		}
		c, ok := x.Tuple.(*ssa.Call)
		if !ok || call != nil && c != call {
			return nil
		}
		call = c
	}
	if call == nil {
		return nil
	}
	callee := call.Call.StaticCallee()
	if callee == nil || len(callee.Blocks) == 0 || inOke(callee) {
		return nil
	}
	return callee
}
