package extract

import (
	"fmt"
	"go/constant"
	"go/token"
	"go/types"
	"sort"
	"strings"

	"golang.org/x/tools/go/ssa"
)

// This file reads a flow's oke.Options as written: a composite literal
// oke.Options{…} at the constructor, or one reached through a variable, a
// package variable, a parameter (from each call site) or a function that
// returns one — all resolved statically over SSA. Fields are found by
// name through go/types:
//
//	Idempotency{Mode oke.Mode; TTL string; Claim oke.ClaimStrategy}
//
// and the variables oke.Auto, oke.Required and oke.Off. The boolean form
// of earlier versions (Required, Off, DeferClaim, ClaimInTx fields) is
// still read, for apps built against them. Options
// that depend on something only known at run time (a flag, a config field)
// are "unknown": extract says so in a warning, checks no rule that needs
// them, and records the flow with its inferred effects only.

// options are a flow's options as written.
type options struct {
	known   bool
	unknown []string // when !known: what was computed at run time, and where

	mode     string // "auto", "required", "off"
	ttl      string // as written; "" when omitted
	claim    string // "", "first", "in_tx" (ClaimFirst/ClaimInTx), "deferred" (DeferClaim)
	declared []string
	// declaredSet: Options.Effects was written (possibly empty)
	declaredSet bool
	durable     bool
	description string
	// allowUnknown: Options.AllowUnknownFields (the decoder accepts
	// unknown fields).
	allowUnknown bool
}

// sval is a statically evaluated value.
type sval struct {
	unknown string // non-empty: not static, and why
	zero    bool
	c       constant.Value
	typ     types.Type
	fields  map[string]*sval
	elems   []*sval // slice or array elements (as a set, in store order)
	isNil   bool
	okeVar  string // a package variable of oke, by name (oke.Required)
}

func unknownVal(format string, args ...any) *sval {
	return &sval{unknown: fmt.Sprintf(format, args...)}
}

// evaluator evaluates values in the context of the program's index.
type evaluator struct {
	prog *program
	ix   *index
	oke  *types.Package
}

// eval evaluates v (in context c).
func (e *evaluator) eval(v ssa.Value, c *ctxt, depth int) *sval {
	if depth > 12 {
		return unknownVal("too deep")
	}
	var vals []*sval
	e.ix.origins(v, c, func(o ssa.Value, oc *ctxt) {
		vals = append(vals, e.leaf(o, oc, depth))
	})
	if len(vals) == 0 {
		return unknownVal("%s", e.where(v))
	}
	for _, x := range vals {
		if x.unknown != "" {
			return x
		}
	}
	for _, x := range vals[1:] {
		if !equalVal(vals[0], x) {
			return unknownVal("chosen at run time at %s", e.where(v))
		}
	}
	return vals[0]
}

func (e *evaluator) where(v ssa.Value) string {
	pos := v.Pos()
	if !pos.IsValid() {
		if in, ok := v.(ssa.Instruction); ok && in.Parent() != nil {
			pos = in.Parent().Pos()
		}
	}
	if !pos.IsValid() {
		return v.Name()
	}
	p := e.prog.position(pos)
	return fmt.Sprintf("%s:%d", p.Filename, p.Line)
}

func (e *evaluator) leaf(o ssa.Value, c *ctxt, depth int) *sval {
	switch x := o.(type) {
	case *ssa.Const:
		if x.Value == nil {
			return &sval{zero: true, isNil: true, typ: x.Type()}
		}
		return &sval{c: x.Value, typ: x.Type()}
	case *ssa.UnOp:
		if x.Op != token.MUL {
			break
		}
		if g, ok := x.X.(*ssa.Global); ok && g.Pkg != nil && g.Pkg.Pkg.Path() == okePath {
			return &sval{okeVar: g.Name(), typ: deref(g.Type())}
		}
		base, path, ok := memPath(x.X)
		if !ok {
			break
		}
		if e.ix.escaped[base] {
			return unknownVal("%s may be changed elsewhere", e.where(o))
		}
		return e.rebuild(base, path, deref(x.X.Type()), c, depth, o)
	case *ssa.Slice:
		base, path, ok := memPath(x.X)
		if !ok {
			break
		}
		if e.ix.escaped[base] {
			return unknownVal("%s may be changed elsewhere", e.where(o))
		}
		s := &sval{typ: x.Type(), elems: []*sval{}}
		for _, st := range e.ix.stores[memKey{base, path + "[]"}] {
			s.elems = append(s.elems, e.eval(st.val, nil, depth+1))
		}
		return s
	}
	return unknownVal("computed at run time at %s", e.where(o))
}

// rebuild reconstructs the value at (base, path) of type t from the stores
// into it: the way SSA builds a composite literal.
func (e *evaluator) rebuild(base ssa.Value, path string, t types.Type, c *ctxt, depth int, at ssa.Value) *sval {
	if sites := e.ix.stores[memKey{base, path}]; len(sites) > 0 {
		if len(sites) > 1 {
			return unknownVal("%s is assigned more than once", e.where(at))
		}
		sc := c
		if sites[0].fn != addrFunc(at) {
			sc = nil
		}
		return e.eval(sites[0].val, sc, depth+1)
	}
	st, ok := t.Underlying().(*types.Struct)
	if !ok {
		return &sval{zero: true, typ: t}
	}
	s := &sval{typ: t, fields: map[string]*sval{}}
	for i := 0; i < st.NumFields(); i++ {
		f := st.Field(i)
		s.fields[f.Name()] = e.rebuild(base, path+"."+itoa(i), f.Type(), c, depth+1, at)
	}
	return s
}

func equalVal(a, b *sval) bool {
	switch {
	case a.unknown != "" || b.unknown != "":
		return false
	case a.okeVar != "" || b.okeVar != "":
		return a.okeVar == b.okeVar
	case a.c != nil || b.c != nil:
		if a.c == nil || b.c == nil {
			return isZeroConst(a) && isZeroConst(b)
		}
		return constant.Compare(a.c, token.EQL, b.c)
	case a.fields != nil || b.fields != nil:
		for k, x := range a.fields {
			y := b.fields[k]
			if y == nil {
				y = &sval{zero: true}
			}
			if !equalVal(x, y) {
				return false
			}
		}
		for k, y := range b.fields {
			if _, ok := a.fields[k]; !ok && !equalVal(&sval{zero: true}, y) {
				return false
			}
		}
		return true
	case a.elems != nil || b.elems != nil:
		if len(a.elems) != len(b.elems) {
			return false
		}
		for i := range a.elems {
			if !equalVal(a.elems[i], b.elems[i]) {
				return false
			}
		}
		return true
	}
	return a.isNil == b.isNil
}

func isZeroConst(s *sval) bool {
	if s.zero {
		return true
	}
	if s.c == nil {
		return false
	}
	switch s.c.Kind() {
	case constant.Bool:
		return !constant.BoolVal(s.c)
	case constant.String:
		return constant.StringVal(s.c) == ""
	case constant.Int:
		return constant.Sign(s.c) == 0
	}
	return false
}

// field returns the field name of s (zero when absent).
func (s *sval) field(name string) *sval {
	if s.fields != nil {
		if f, ok := s.fields[name]; ok {
			return f
		}
	}
	return &sval{zero: true}
}

func (s *sval) boolean() (bool, string) {
	switch {
	case s.unknown != "":
		return false, s.unknown
	case s.zero || s.c == nil:
		return false, ""
	case s.c.Kind() == constant.Bool:
		return constant.BoolVal(s.c), ""
	}
	return false, "not a boolean"
}

func (s *sval) str() (string, string) {
	switch {
	case s.unknown != "":
		return "", s.unknown
	case s.zero || s.c == nil:
		return "", ""
	case s.c.Kind() == constant.String:
		return constant.StringVal(s.c), ""
	}
	return "", "not a string"
}

// okeConstName returns the name of the oke constant among names whose value
// is s's.
func (e *evaluator) okeConstName(s *sval, names map[string]string) (string, string) {
	if s.unknown != "" {
		return "", s.unknown
	}
	if e.oke == nil {
		return "", "no oke package"
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	for _, n := range sorted {
		k, ok := e.oke.Scope().Lookup(n).(*types.Const)
		if !ok {
			continue
		}
		if isZeroConst(s) && constant.Sign(k.Val()) == 0 || s.c != nil && constant.Compare(s.c, token.EQL, k.Val()) {
			return names[n], ""
		}
	}
	return "", "not one of the oke constants"
}

// options evaluates a flow's options argument v in context c.
func (e *evaluator) options(v ssa.Value, c *ctxt) options {
	o := options{known: true, mode: "auto"}
	bad := func(field, why string) {
		o.known = false
		o.unknown = append(o.unknown, field+": "+why)
	}
	s := e.eval(v, c, 0)
	if s.unknown != "" {
		bad("Options", s.unknown)
		return o
	}
	desc, why := s.field("Description").str()
	if why == "" {
		o.description = desc
	}
	if a, why := s.field("AllowUnknownFields").boolean(); why == "" {
		o.allowUnknown = a
	}
	if d, why := s.field("Durable").boolean(); why != "" {
		bad("Durable", why)
	} else {
		o.durable = d
	}
	eff := s.field("Effects")
	switch {
	case eff.unknown != "":
		bad("Effects", eff.unknown)
	case eff.isNil || eff.zero && eff.elems == nil:
	default:
		o.declaredSet = true
		seen := map[string]bool{}
		for _, el := range eff.elems {
			name, why := el.str()
			if why != "" {
				bad("Effects", why)
				break
			}
			if !seen[name] {
				seen[name] = true
				o.declared = append(o.declared, name)
			}
		}
		sortEffects(o.declared)
	}
	e.idempotency(s.field("Idempotency"), &o, bad)
	return o
}

// idempotency reads an oke.Idempotency value, in either form.
func (e *evaluator) idempotency(s *sval, o *options, bad func(field, why string)) {
	const f = "Idempotency"
	switch {
	case s.unknown != "":
		bad(f, s.unknown)
		return
	case s.okeVar != "":
		m, ok := okeModeVars[s.okeVar]
		if !ok {
			bad(f, "oke."+s.okeVar+" is not a mode extract knows")
			return
		}
		o.mode = m
		return
	case s.zero:
		return
	}
	st, _ := s.typ.Underlying().(*types.Struct)
	has := func(name string) bool {
		if st == nil {
			return false
		}
		for i := 0; i < st.NumFields(); i++ {
			if st.Field(i).Name() == name {
				return true
			}
		}
		return false
	}
	if has("Mode") {
		m, why := e.okeConstName(s.field("Mode"), okeModeConst)
		if why != "" {
			bad(f+".Mode", why)
		} else {
			o.mode = m
		}
	}
	if has("Required") {
		r, why := s.field("Required").boolean()
		if why != "" {
			bad(f+".Required", why)
		} else if r {
			o.mode = "required"
		}
	}
	if has("Off") {
		off, why := s.field("Off").boolean()
		if why != "" {
			bad(f+".Off", why)
		} else if off {
			o.mode = "off" // Off wins, as at run time
		}
	}
	ttl, why := s.field("TTL").str()
	if why != "" {
		bad(f+".TTL", why)
	}
	o.ttl = ttl
	if has("Claim") {
		cl, why := e.okeConstName(s.field("Claim"), okeClaims)
		if why != "" {
			bad(f+".Claim", why)
		} else {
			o.claim = cl
		}
	}
	if has("DeferClaim") {
		d, why := s.field("DeferClaim").boolean()
		if why != "" {
			bad(f+".DeferClaim", why)
		} else if d {
			o.claim = "deferred"
		}
	}
	if has("ClaimInTx") {
		d, why := s.field("ClaimInTx").boolean()
		if why != "" {
			bad(f+".ClaimInTx", why)
		} else if d {
			o.claim = "in_tx"
		}
	}
}

// unknownText is the warning for options extract could not read.
func (o options) unknownText() string {
	return "options computed at run time (" + strings.Join(o.unknown, "; ") + ")"
}
