package extract

import (
	"fmt"
	"go/token"
	"go/types"
	"path/filepath"
	"sort"
	"strings"

	"github.com/okengine/oke/internal/idem"
)

// Config says what to extract.
type Config struct {
	// Dir is the directory the patterns are relative to ("" means the
	// current directory).
	Dir string
	// Patterns are go list package patterns; none means "./...".
	Patterns []string
	// Overlay replaces the contents of files (by absolute name), as
	// go/packages does; for tests.
	Overlay map[string][]byte
	// Env is added to the environment of go list.
	Env []string
}

// Result is what Run found.
type Result struct {
	// Contract is oke.contract.json.
	Contract Contract
	// Diagnostics are the broken rules, sorted by position. When there
	// is any, Write writes nothing.
	Diagnostics []Diagnostic
	// Warnings are what extract could not read statically.
	Warnings []Diagnostic

	modPath  string
	patterns []string // as given to Run, for the fix of a stale contract
	modRoot  string
	flowPos  map[string]token.Position // each flow's constructor, module-relative
	rootDirs []string                  // the directories of the packages the patterns matched
	pkgs     []genPkg
	openapi  *openAPIDoc
	gate     *gateInfo // the app's gate, as extract reads it
	io       map[string]*flowIO
}

// genPkg is a package whose flows get an oke_contract_gen.go.
type genPkg struct {
	dir, name, path string
	flows           []genFlow
}

// Run loads the packages, finds their flows and bindings, infers each
// flow's effects and checks the rules. It returns a *LoadError when the
// packages cannot be loaded.
func Run(cfg Config) (*Result, error) {
	patterns := cfg.Patterns
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	dir := cfg.Dir
	if dir == "" {
		dir = "."
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, &LoadError{Problems: []string{err.Error()}}
	}
	prog, err := load(abs, patterns, cfg.Env, cfg.Overlay, nil)
	if err != nil {
		return nil, err
	}
	res := extract(prog)
	// Flows call functions of other modules: read those packages' bodies
	// too, so that their effects are found the same way, and again for
	// the packages those call, up to maxDeepRounds loads; what is still
	// unread then stays conservative (raw).
	deep := map[string]bool{}
	for round := 1; round < maxDeepRounds && len(prog.wantDeep) > 0; round++ {
		for path := range prog.wantDeep {
			deep[path] = true
		}
		next, err := load(abs, patterns, cfg.Env, cfg.Overlay, deep)
		if err != nil {
			break // best effort: keep the conservative result
		}
		prog, res = next, extract(next)
	}
	res.patterns = patterns
	return res, nil
}

// maxDeepRounds bounds how many times extract loads the program to read
// more of other modules' code (each load reads one more level of calls).
const maxDeepRounds = 3

func extract(prog *program) *Result {
	ix := newIndex(prog)
	ev := &evaluator{prog: prog, ix: ix}
	if p := prog.pkgs[okePath]; p != nil {
		ev.oke = p.types
	}
	a := newAnalyzer(prog, ix, ev)
	fd := &finder{prog: prog, ix: ix, ev: ev, a: a, flows: map[string]*flowInst{}}
	a.flows = fd.flowsOf
	a.flowSummary = fd.summary
	fd.find()
	dg := newDigester(prog, fd)

	res := &Result{Contract: Contract{Version: 1, Flows: []Flow{}}, modPath: prog.modPath, io: map[string]*flowIO{},
		modRoot: prog.modRoot, flowPos: map[string]token.Position{}}
	sg := newSchemaGen(prog)
	byPkg := map[string]*genPkg{}
	names := map[string]*flowInst{}
	for _, f := range fd.order {
		if other := names[f.name]; other != nil {
			res.Diagnostics = append(res.Diagnostics, diag(f.pos, f.name, RuleName,
				fmt.Sprintf("another flow has this name (%s:%d); an app refuses two flows with one name: rename one", other.pos.Filename, other.pos.Line)))
			continue
		}
		names[f.name] = f
		fl, gf, diags, outside := build(fd, sg, f)
		res.Warnings = append(res.Warnings, outside...)
		fl.Digest = dg.digest(f)
		gf.Digest = fl.Digest
		res.flowPos[f.name] = f.pos
		fns := fd.flowFuncs(f)
		res.io[f.name] = &flowIO{in: f.in, out: f.out, statuses: fd.statuses(f), allowUnknown: f.opts.allowUnknown,
			fails: fd.failuresOf(fns)}
		if f.shape == "stream" {
			res.io[f.name].media = fd.streamMediaType(fns)
		}
		res.Diagnostics = append(res.Diagnostics, diags...)
		res.Contract.Flows = append(res.Contract.Flows, fl)
		gp := byPkg[f.pkg.path]
		if gp == nil {
			gp = &genPkg{name: f.pkg.lp.Name, path: f.pkg.path}
			if len(f.pkg.lp.GoFiles) > 0 {
				gp.dir = filepath.Dir(f.pkg.lp.GoFiles[0])
			}
			byPkg[f.pkg.path] = gp
		}
		gp.flows = append(gp.flows, gf)
		for _, w := range f.warnings {
			res.Warnings = append(res.Warnings, diag(f.pos, f.name, RuleWarning, w))
		}
	}
	for _, w := range fd.warnings {
		res.Warnings = append(res.Warnings, diag(w.pos, w.flow, RuleWarning, w.text))
	}
	for _, r := range prog.roots {
		if len(r.lp.GoFiles) > 0 {
			res.rootDirs = append(res.rootDirs, filepath.Dir(r.lp.GoFiles[0]))
		}
	}
	for _, gp := range byPkg {
		res.pkgs = append(res.pkgs, *gp)
	}
	sort.Slice(res.Contract.Flows, func(i, j int) bool { return res.Contract.Flows[i].Name < res.Contract.Flows[j].Name })
	sort.Slice(res.pkgs, func(i, j int) bool { return res.pkgs[i].path < res.pkgs[j].path })
	for i := range res.pkgs {
		fs := res.pkgs[i].flows
		sort.Slice(fs, func(a, b int) bool { return fs[a].Name < fs[b].Name })
	}
	sortDiags(res.Diagnostics)
	sortDiags(res.Warnings)
	res.gate = fd.gate()
	for _, b := range res.gate.bad {
		res.Diagnostics = append(res.Diagnostics, diag(b.pos, "", RuleTag, b.msg))
	}
	sortDiags(res.Diagnostics)
	res.openapi = buildOpenAPI(res, sg)
	return res
}

func diag(pos token.Position, flow, rule, msg string) Diagnostic {
	sev := "" // a broken rule: DESIGN.md's six keys, no severity
	if rule == RuleWarning {
		sev = SeverityWarning
	}
	return Diagnostic{File: pos.Filename, Line: pos.Line, Col: pos.Column, Flow: flow, Rule: rule, Message: msg, Severity: sev}
}

func sortDiags(ds []Diagnostic) {
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i], ds[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Col != b.Col {
			return a.Col < b.Col
		}
		return a.Message < b.Message
	})
}

// build turns a found flow into its contract entry, its generated Go entry
// and the rules it breaks.
func build(fd *finder, sg *schemaGen, f *flowInst) (fl Flow, gf genFlow, diags []Diagnostic, outside []Diagnostic) {
	s := fd.summary(f)
	fl = Flow{
		Name:        f.name,
		Description: f.opts.description,
		Source:      fmt.Sprintf("%s:%d", f.pos.Filename, f.pos.Line),
		Shape:       f.shape,
		Durable:     f.opts.durable,
		Effects:     []string{},
		Bindings:    []Binding{},
		Steps:       []string{},
		Why:         map[string][]string{},
	}
	if f.opts.declaredSet {
		fl.Declared = append([]string{}, f.opts.declared...)
		if fl.Declared == nil {
			fl.Declared = []string{}
		}
	}
	// Effects and why.
	set := map[string]bool{}
	txOnly := f.shape == "unary" && !f.opts.durable && f.opts.mode != "off" && f.opts.known
	// A durable flow whose every non-read effect is a statement in its
	// steps' transactions: its steps coalesce into one commit.
	coalesced := f.shape == "unary" && f.opts.durable && f.opts.known
	nonRead := 0
	for _, o := range capOutside(s.occs) {
		e := string(o.effect)
		set[e] = true
		fl.Why[e] = append(fl.Why[e], o.why())
		if qualifying(e) {
			nonRead++
			if !o.tx || o.conservative {
				txOnly, coalesced = false, false
			}
		}
	}
	if nonRead == 0 {
		txOnly, coalesced = false, false
	}
	for e := range set {
		fl.Effects = append(fl.Effects, e)
	}
	sortEffects(fl.Effects)
	for e, ws := range fl.Why {
		fl.Why[e] = sortWhy(ws)
	}
	fl.TxOnly = txOnly
	fl.Coalesced = coalesced
	qualifies := false
	for e := range set {
		if qualifying(e) {
			qualifies = true
		}
	}
	// Options.
	mode := f.opts.mode
	if !f.opts.known {
		mode = "unknown"
		f.warnings = append(f.warnings, f.opts.unknownText()+"; extract checks no rule on them, assumes the header is honored where a flow with these effects could honor it, and App.Start uses the run-time rule for this flow; make the options constant (oke.Options{…} with constant fields)")
	}
	ttl := f.opts.ttl
	if ttl == "" {
		ttl = "24h"
	}
	fl.Idempotency = Idempotency{Mode: mode, TTL: ttl}
	if !f.opts.known {
		fl.Idempotency.TTL = ""
	}
	// Bindings.
	sort.Slice(f.bindings, func(i, j int) bool { return f.bindings[i].key() < f.bindings[j].key() })
	honoredAny := false
	for _, b := range f.bindings {
		h := b.honors(f.shape, mode, qualifies)
		honoredAny = honoredAny || h
		fl.Bindings = append(fl.Bindings, Binding{Kind: b.kind, Method: b.method, Path: b.path, Event: b.event,
			Honored: h, Dedupe: b.dedupe, DedupeTTL: b.dedupeTTL, Conditional: fd.conditional(b.pos)})
	}
	if honoredAny {
		switch {
		case f.opts.claim != "":
			fl.Idempotency.Claim = f.opts.claim
		case txOnly:
			fl.Idempotency.Claim = "in_tx"
		default:
			fl.Idempotency.Claim = "first"
		}
	}
	// Steps.
	seenStep := map[string]bool{}
	for _, u := range s.steps {
		if name, ok := strings.CutPrefix(u.name, patchStep); ok {
			if !seenStep[u.name] {
				seenStep[u.name] = true
				fl.Patches = append(fl.Patches, name)
			}
			continue
		}
		if name, ok := strings.CutPrefix(u.name, deprecatedPatchStep); ok {
			if !seenStep[u.name] {
				seenStep[u.name] = true
				fl.DeprecatedPatches = append(fl.DeprecatedPatches, name)
			}
			continue
		}
		if u.constant && !seenStep[u.name] {
			seenStep[u.name] = true
			fl.Steps = append(fl.Steps, u.name)
		}
		if !u.constant && !seenStep["\x00"+u.name] {
			seenStep["\x00"+u.name] = true
			fl.DynamicSteps = append(fl.DynamicSteps, u.name)
		}
	}
	// Schemas.
	fl.Input = sg.standalone(f.in)
	for _, tp := range sg.tagProblems(f.in) {
		diags = append(diags, diag(fd.prog.position(tp.field.obj.Pos()), f.name, RuleTag, fmt.Sprintf(
			"input %s: field %s (%s): %v; fix the tag (the decoder would refuse to start: see oke.NewFlow)",
			types.TypeString(tp.typ, func(p *types.Package) string { return p.Name() }), tp.field.obj.Name(), tp.field.name, tp.err)))
	}
	if f.out != nil {
		fl.Output = sg.standalone(f.out)
	} else {
		fl.Output = Schema(`{}`)
	}
	// Rules.
	if f.opts.known {
		diags = append(diags, checkRules(fd, f, set, qualifies)...)
	}
	for _, b := range f.bindings {
		if b.kind == "webhook" && b.dedupeTTL != "" {
			if _, err := idem.ParseTTL(b.dedupeTTL); err != nil {
				diags = append(diags, diag(b.pos, f.name, RuleTTL, fmt.Sprintf(
					"the webhook binding's DedupeTTL %q is not a TTL (a positive integer followed by ms, s, m, h or d); write e.g. .DedupeTTL(\"30d\")", b.dedupeTTL)))
			}
		}
	}
	// Effects outside fx: one warning per call.
	// At one call, the chain to a definite effect (the standard
	// library's I/O) says more than one that stops at unread code.
	best := map[token.Pos]occ{}
	var order []token.Pos
	for _, o := range s.occs {
		if !o.outside {
			continue
		}
		b, ok := best[o.pos]
		if !ok {
			order = append(order, o.pos)
		}
		if !ok || b.unread && !o.unread {
			best[o.pos] = o
		}
	}
	for _, p := range order {
		o := best[p]
		what := o.hops[len(o.hops)-1]
		if _, rest, ok := strings.Cut(what, " "); ok {
			what = rest
		}
		via := ""
		if len(o.hops) > 1 {
			via = " (reached through " + strings.Join(o.hops[:len(o.hops)-1], " → ") + ")"
		}
		pos := fd.prog.position(o.pos)
		if !o.pos.IsValid() {
			pos = f.pos
		}
		outside = append(outside, Diagnostic{File: pos.Filename, Line: pos.Line, Col: pos.Column, Flow: f.name, Rule: RuleOutsideFx,
			Severity: SeverityWarning,
			Message:  fmt.Sprintf("%s%s; it counts as raw, so the flow honors Idempotency-Key; fix: %s", what, via, o.fix)})
	}
	fl.Warnings = f.warnings

	gf = genFlow{
		Name:      f.name,
		Source:    fl.Source,
		Shape:     f.shape,
		Durable:   f.opts.durable,
		Mode:      f.opts.mode,
		TTL:       f.opts.ttl,
		Claim:     f.opts.claim,
		Declared:  fl.Declared,
		Effects:   fl.Effects,
		TxOnly:    txOnly,
		Coalesced: coalesced,
		Why:       fl.Why,
		Steps:     fl.Steps,
		Known:     f.opts.known,
		Unknown:   strings.Join(f.opts.unknown, "; "),
	}
	if !f.opts.known {
		gf.Mode, gf.TTL, gf.Claim = "", "", ""
	}
	for _, b := range f.bindings {
		gb := genBinding{Kind: b.kind, Method: b.method, Path: b.path, Event: b.event, Dedupe: b.dedupe}
		if b.kind == "rpc" {
			gb.Path = ""
		}
		gf.Bindings = append(gf.Bindings, gb)
	}
	return fl, gf, diags, outside
}

// sortWhy orders why lines by position, then text, without duplicates.
func sortWhy(ws []string) []string {
	sort.SliceStable(ws, func(i, j int) bool { return whyLess(ws[i], ws[j]) })
	out := ws[:0]
	for i, w := range ws {
		if i == 0 || w != ws[i-1] {
			out = append(out, w)
		}
	}
	return out
}

// whyLess compares "FILE:LINE …" lines by file, then line number.
func whyLess(a, b string) bool {
	fa, la, ra := splitWhy(a)
	fb, lb, rb := splitWhy(b)
	if fa != fb {
		return fa < fb
	}
	if la != lb {
		return la < lb
	}
	return ra < rb
}

func splitWhy(s string) (file string, line int, rest string) {
	sp := strings.IndexByte(s, ' ')
	if sp < 0 {
		return s, 0, ""
	}
	head := s[:sp]
	colon := strings.LastIndexByte(head, ':')
	if colon < 0 {
		return head, 0, s[sp:]
	}
	n := 0
	for _, c := range head[colon+1:] {
		if c < '0' || c > '9' {
			return head, 0, s[sp:]
		}
		n = n*10 + int(c-'0')
	}
	return head[:colon], n, s[sp:]
}

// maxOutsideWhy bounds the why chains of effects outside fx: code of
// another module read deep can reach one effect by many paths.
const maxOutsideWhy = 8

// capOutside keeps every occurrence of an effect through fx and at most
// maxOutsideWhy of those outside fx, preferring chains to a definite effect
// (the standard library's I/O) and shorter ones.
func capOutside(occs []occ) []occ {
	var out, outside []occ
	for _, o := range occs {
		if o.outside {
			outside = append(outside, o)
		} else {
			out = append(out, o)
		}
	}
	if len(outside) <= maxOutsideWhy {
		return append(out, outside...)
	}
	sort.SliceStable(outside, func(i, j int) bool {
		a, b := outside[i], outside[j]
		if a.unread != b.unread {
			return !a.unread
		}
		return len(a.hops) < len(b.hops)
	})
	return append(out, outside[:maxOutsideWhy]...)
}
