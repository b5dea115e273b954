package extract

import (
	"fmt"
	"go/token"
	"strconv"
	"strings"

	"golang.org/x/tools/go/ssa"

	"github.com/okengine/oke"
	"github.com/okengine/oke/internal/idem"
)

// checkRules returns the rules flow f breaks (DESIGN.md section 8), given
// its inferred effects. Its options are known.
func checkRules(fd *finder, f *flowInst, effects map[string]bool, qualifies bool) []Diagnostic {
	var out []Diagnostic
	add := func(pos token.Position, rule, what, fix string) {
		out = append(out, diag(pos, f.name, rule, what+"; "+fix))
	}

	// An unparseable TTL.
	if f.opts.ttl != "" {
		if _, err := idem.ParseTTL(f.opts.ttl); err != nil {
			add(f.pos, RuleTTL,
				fmt.Sprintf("Idempotency.TTL %q is not a TTL: want a positive integer followed by ms, s, m, h or d", f.opts.ttl),
				`write it like "24h", "15m" or "7d", or leave TTL out for 24h`)
		}
	}

	// Required on a flow that cannot honor the header.
	if f.opts.mode == "required" {
		const drop = "drop Required (use oke.Auto, or leave Idempotency out)"
		switch {
		case f.shape == "stream":
			add(f.pos, RuleRequired, "Idempotency is required, but the flow is a stream, which never stores its response and ignores the header", drop)
		case f.shape == "live":
			add(f.pos, RuleRequired, "Idempotency is required, but the flow is a live feed, which ignores the header", drop)
		case !qualifies:
			add(f.pos, RuleRequired,
				fmt.Sprintf("Idempotency is required, but the flow has no effect that qualifies for it (inferred effects: %s; only a write, emit, send, call, fetch, ask, embed or raw qualifies)", effectList(effects)),
				drop+", or give the flow the effect it is missing")
		}
		for _, b := range f.bindings {
			if b.kind == "http" && b.method == "GET" && f.shape != "live" {
				add(b.pos, RuleRequired,
					fmt.Sprintf("Idempotency is required, but the flow is bound to GET %s, which never honors the header", b.path),
					drop+", or bind the flow with POST (or another method than GET)")
			}
		}
	}

	// Declared effects that leave out an inferred non-read effect.
	if f.opts.declaredSet {
		declared := map[string]bool{}
		for _, e := range f.opts.declared {
			declared[e] = true
		}
		var missing []string
		declaresQualifying := false
		for _, e := range f.opts.declared {
			declaresQualifying = declaresQualifying || qualifying(e)
		}
		for e := range effects {
			if qualifying(e) && !declared[e] {
				// Effects outside fx alone (raw) are warned about, not
				// a broken rule, while the declared effects honor the
				// header anyway.
				if e == string(oke.EffectRaw) && declaresQualifying && onlyOutside(fd.summary(f).occs, e) {
					continue
				}
				missing = append(missing, e)
			}
		}
		sortEffects(missing)
		if len(missing) > 0 {
			var why []string
			for _, o := range fd.summary(f).occs {
				if string(o.effect) == missing[0] {
					why = append(why, o.why())
				}
			}
			why = sortWhy(why)
			consts := make([]string, len(missing))
			for i, e := range missing {
				consts[i] = "oke.Effect" + strings.ToUpper(e[:1]) + e[1:]
			}
			fix := fmt.Sprintf("add %s to Effects, or drop Effects and let oke extract infer them", strings.Join(consts, ", "))
			if allRuntimeSQL(fd.summary(f).occs, missing) {
				fix = "make the statement a constant string (one constant per variant, e.g. a const per SQL dialect) so that extract can classify it, or " + fix
			}
			add(f.pos, RuleEffects,
				fmt.Sprintf("Options.Effects declares [%s] but the flow also has %s (%s)", strings.Join(f.opts.declared, ", "), strings.Join(missing, ", "), why[0]),
				fix)
		}
	}

	// A durable flow that uses one constant step name twice.
	if f.opts.durable {
		out = append(out, stepRules(fd, f)...)
	}
	return out
}

// allRuntimeSQL reports whether every occurrence of the missing effects is
// a statement whose SQL is computed at run time.
func allRuntimeSQL(occs []occ, missing []string) bool {
	n := 0
	for _, o := range occs {
		for _, m := range missing {
			if string(o.effect) == m {
				if !strings.Contains(o.hops[len(o.hops)-1], sqlAtRunTime) {
					return false
				}
				n++
			}
		}
	}
	return n > 0
}

func effectList(effects map[string]bool) string {
	var es []string
	for e := range effects {
		es = append(es, e)
	}
	if len(es) == 0 {
		return "none"
	}
	sortEffects(es)
	return strings.Join(es, ", ")
}

// stepRules finds constant step names a durable flow uses twice: at two
// calls on one path of its code, or at a call that runs in a loop. Names
// computed from the input or a loop index are fine (they are
// deterministic), and so is one name in two branches of which only one
// runs.
func stepRules(fd *finder, f *flowInst) []Diagnostic {
	var out []Diagnostic
	uses := fd.summary(f).steps
	reported := map[string]bool{}
	pos := func(u stepUse) token.Position {
		last := u.sites[len(u.sites)-1]
		p := last.Pos()
		if c, ok := last.(ssa.CallInstruction); ok {
			if ce := fd.a.calls[c.Common().Pos()]; ce != nil {
				p = ce.Pos()
			}
		}
		return fd.prog.position(p)
	}
	for i, u := range uses {
		if !u.constant || reported[u.name] {
			continue
		}
		for _, s := range u.sites {
			if inLoop(s) {
				reported[u.name] = true
				p := pos(u)
				lp := fd.prog.position(s.Pos())
				out = append(out, diag(p, f.name, RuleStepName, fmt.Sprintf(
					"step name %s is used in a loop (%s:%d), so every iteration saves a step of the same name and the run fails when it picks up; make the name unique per iteration, e.g. fmt.Sprintf(%s, i)",
					strconv.Quote(u.name), lp.Filename, lp.Line, strconv.Quote(u.name+" %d"))))
				break
			}
		}
		if reported[u.name] {
			continue
		}
		for _, v := range uses[:i] {
			if !v.constant || v.name != u.name || !samePath(v.sites, u.sites) {
				continue
			}
			reported[u.name] = true
			p, q := pos(v), pos(u)
			out = append(out, diag(q, f.name, RuleStepName, fmt.Sprintf(
				"step name %s is used twice in one run (%s:%d and %s:%d); step names must be unique in a durable run: rename one",
				strconv.Quote(u.name), p.Filename, p.Line, q.Filename, q.Line)))
			break
		}
	}
	return out
}

// samePath reports whether the step calls at the end of two call chains
// can both run in one execution: where the chains part, one call reaches
// the other.
func samePath(a, b []ssa.Instruction) bool {
	for k := 0; k < len(a) && k < len(b); k++ {
		if a[k] == b[k] {
			continue
		}
		if a[k].Parent() != b[k].Parent() {
			return true // different functions: assume both run
		}
		return reaches(a[k], b[k]) || reaches(b[k], a[k])
	}
	return true // the same call chain twice
}

// reaches reports whether b can run after a in one execution of their
// function.
func reaches(a, b ssa.Instruction) bool {
	ab, bb := a.Block(), b.Block()
	if ab == bb {
		for _, in := range ab.Instrs {
			if in == a {
				return true // a comes first
			}
			if in == b {
				break
			}
		}
	}
	seen := map[*ssa.BasicBlock]bool{}
	work := append([]*ssa.BasicBlock{}, ab.Succs...)
	for len(work) > 0 {
		blk := work[len(work)-1]
		work = work[:len(work)-1]
		if seen[blk] {
			continue
		}
		seen[blk] = true
		if blk == bb {
			return true
		}
		work = append(work, blk.Succs...)
	}
	return false
}

// inLoop reports whether in's block is on a cycle of its function.
func inLoop(in ssa.Instruction) bool {
	b := in.Block()
	if b == nil {
		return false
	}
	seen := map[*ssa.BasicBlock]bool{}
	work := append([]*ssa.BasicBlock{}, b.Succs...)
	for len(work) > 0 {
		blk := work[len(work)-1]
		work = work[:len(work)-1]
		if blk == b {
			return true
		}
		if seen[blk] {
			continue
		}
		seen[blk] = true
		work = append(work, blk.Succs...)
	}
	return false
}

// onlyOutside reports whether every occurrence of effect e is an effect
// outside fx.
func onlyOutside(occs []occ, e string) bool {
	for _, o := range occs {
		if string(o.effect) == e && !o.outside {
			return false
		}
	}
	return true
}
