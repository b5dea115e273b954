package extract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// RuleStale is the rule of `oke extract -check`: a checked-in contract
// file that no longer matches what extract infers from the code.
const RuleStale = "stale-contract"

// Check compares the files extract would write for r (see Files, with
// outDir as -o) with the files on disk, and writes nothing. It returns one
// diagnostic (rule RuleStale) per flow whose contract differs in any of
// them — saying what differs, in which file — and one per file that differs
// in what belongs to no flow or is missing. None means every file is fresh.
//
// Positions (the FILE:LINE of a flow's source and of its why chains) are
// not compared: code that only moved (a formatting change, a new comment)
// keeps its contract fresh, as it keeps its digest. The error is for files
// that exist but cannot be read.
func (r *Result) Check(outDir string) ([]Diagnostic, error) {
	files, err := r.Files(outDir)
	if err != nil {
		return nil, err
	}
	c := &checker{r: r, stale: map[string][]string{}, gone: map[string]string{}}
	c.fix = fmt.Sprintf("fix: run go generate (or oke extract -o %s %s) and commit the result", outDir, strings.Join(r.patterns, " "))
	if len(r.patterns) == 0 {
		c.fix = fmt.Sprintf("fix: run go generate (or oke extract -o %s PACKAGES) and commit the result", outDir)
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		have, err := os.ReadFile(name)
		if errors.Is(err, fs.ErrNotExist) {
			c.fileDiag(name, "is missing: extract has not written it")
			continue
		}
		if err != nil {
			return nil, err
		}
		want := files[name]
		switch filepath.Base(name) {
		case ContractFile:
			c.contract(name, have)
		case OpenAPIFile:
			c.openapi(name, have, want)
		default:
			c.goFile(name, have, want)
		}
	}
	// A package of the patterns that no longer declares flows keeps the
	// generated file extract wrote for it before: its flows are stale.
	for _, d := range r.rootDirs {
		name := filepath.Join(d, GoFile)
		if _, ok := files[name]; ok {
			continue
		}
		have, err := os.ReadFile(name)
		if err != nil || !bytes.HasPrefix(have, []byte(GoHeader)) {
			continue
		}
		entries, _, _ := genEntries(have)
		var names []string
		for n := range entries {
			names = append(names, strconv.Quote(n))
		}
		sort.Strings(names)
		c.files = append(c.files, Diagnostic{File: c.rel(name), Line: 1, Col: 1, Rule: RuleStale, Message: fmt.Sprintf(
			"%s registers flows its package no longer declares (%s), and extract writes no such file for a package without flows; fix: delete it and commit the result",
			GoFile, strings.Join(names, ", "))})
	}
	var out []Diagnostic
	flows := make([]string, 0, len(c.stale))
	for f := range c.stale {
		flows = append(flows, f)
	}
	sort.Strings(flows)
	for _, f := range flows {
		// The files are read in the order of their absolute names, which
		// depends on where the module and -o are; the message must not.
		sort.Strings(c.stale[f])
		msg := fmt.Sprintf("its contract is stale (%s); %s", strings.Join(c.stale[f], "; "), c.fix)
		if pos, ok := r.flowPos[f]; ok {
			out = append(out, diag(pos, f, RuleStale, msg))
			continue
		}
		// A flow of the contract that extract no longer finds.
		file, line := splitSource(c.gone[f])
		out = append(out, Diagnostic{File: file, Line: line, Col: 1, Flow: f, Rule: RuleStale,
			Message: fmt.Sprintf("the contract has this flow, but the code no longer does (removed or renamed; %s); %s", strings.Join(c.stale[f], "; "), c.fix)})
	}
	out = append(out, c.files...)
	sortDiags(out)
	return out, nil
}

// ModuleRoot is the directory of the main module extract loaded: the
// flows' Source and the diagnostics' File are relative to it.
func (r *Result) ModuleRoot() string { return r.modRoot }

type checker struct {
	r     *Result
	fix   string
	stale map[string][]string // flow → what differs, "FILE: a, b"
	gone  map[string]string   // flows only in the old contract → their source
	files []Diagnostic        // differences that belong to no flow
}

// rel is name relative to the module root, as diagnostics name files.
func (c *checker) rel(name string) string {
	if r, err := filepath.Rel(c.r.modRoot, name); err == nil && !strings.HasPrefix(r, "..") {
		return filepath.ToSlash(r)
	}
	return filepath.ToSlash(name)
}

func (c *checker) flowDiff(flow, file string, what []string) {
	if len(what) > 0 {
		c.stale[flow] = append(c.stale[flow], c.rel(file)+": "+strings.Join(what, ", "))
	}
}

func (c *checker) fileDiag(file, what string) {
	c.files = append(c.files, Diagnostic{File: c.rel(file), Line: 1, Col: 1, Rule: RuleStale,
		Message: fmt.Sprintf("%s %s; %s", filepath.Base(file), what, c.fix)})
}

// contract compares oke.contract.json flow by flow.
func (c *checker) contract(name string, have []byte) {
	var old Contract
	if err := json.Unmarshal(have, &old); err != nil {
		c.fileDiag(name, "is not a contract extract wrote ("+err.Error()+")")
		return
	}
	if old.Version != c.r.Contract.Version {
		c.fileDiag(name, fmt.Sprintf("has version %d, extract writes %d", old.Version, c.r.Contract.Version))
	}
	oldBy := map[string]Flow{}
	for _, f := range old.Flows {
		oldBy[f.Name] = f
	}
	// What extract writes, as read back: JSON loses what omitempty drops
	// (an empty Declared reads back as nil).
	var now Contract
	b, _ := json.Marshal(c.r.Contract)
	json.Unmarshal(b, &now)
	for _, f := range now.Flows {
		o, ok := oldBy[f.Name]
		if !ok {
			c.flowDiff(f.Name, name, []string{"not in it"})
			continue
		}
		delete(oldBy, f.Name)
		c.flowDiff(f.Name, name, flowDiffs(o, f))
	}
	for n, o := range oldBy {
		c.gone[n] = o.Source
		c.flowDiff(n, name, []string{"in it"})
	}
}

// flowDiffs names the fields in which two contract flows differ, positions
// aside.
func flowDiffs(a, b Flow) []string {
	var out []string
	diff := func(field string, x, y any) {
		if canonical(x) != canonical(y) {
			out = append(out, field)
		}
	}
	switch {
	case a.Digest == "":
		out = append(out, "digest (none recorded: written by an older oke extract)")
	case a.Digest != b.Digest:
		out = append(out, "digest (the code changed)")
	}
	diff("description", a.Description, b.Description)
	diff("shape", a.Shape, b.Shape)
	diff("durable", a.Durable, b.Durable)
	diff("effects", a.Effects, b.Effects)
	diff("declared effects", a.Declared, b.Declared)
	diff("options", a.Idempotency, b.Idempotency)
	diff("bindings", a.Bindings, b.Bindings)
	diff("input schema", a.Input, b.Input)
	diff("output schema", a.Output, b.Output)
	diff("steps", [][]string{a.Steps, a.DynamicSteps}, [][]string{b.Steps, b.DynamicSteps})
	diff("patches", [][]string{a.Patches, a.DeprecatedPatches}, [][]string{b.Patches, b.DeprecatedPatches})
	diff("why", a.Why, b.Why)
	diff("txOnly", a.TxOnly, b.TxOnly)
	diff("coalesced", a.Coalesced, b.Coalesced)
	diff("warnings", a.Warnings, b.Warnings)
	return out
}

// sourcePos matches FILE.go:LINE, the positions a contract carries.
var sourcePos = regexp.MustCompile(`([\w./-]+\.go):\d+`)

// canonical is v as JSON (map keys sorted), positions masked.
func canonical(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	var x any
	if json.Unmarshal(b, &x) == nil {
		b, _ = json.Marshal(x) // a json.RawMessage re-encoded: formatting aside
	}
	return sourcePos.ReplaceAllString(string(b), "$1")
}

// openapi compares openapi.json operation by operation.
func (c *checker) openapi(name string, have, want []byte) {
	if bytes.Equal(maskPos(have), maskPos(want)) {
		return
	}
	var h, w map[string]any
	if json.Unmarshal(have, &h) != nil {
		c.fileDiag(name, "is not JSON")
		return
	}
	json.Unmarshal(want, &w)
	hOps, wOps := operations(h), operations(w)
	byFlow := map[string][]string{}
	for id := range union(hOps, wOps) {
		hv, hok := hOps[id]
		wv, wok := wOps[id]
		flow := c.flowOfOperation(id)
		switch {
		case !hok:
			byFlow[flow] = append(byFlow[flow], "operation "+id+" not in it")
		case !wok:
			byFlow[flow] = append(byFlow[flow], "operation "+id+" in it")
		case canonical(hv) != canonical(wv):
			byFlow[flow] = append(byFlow[flow], "operation "+id)
		}
	}
	for f, what := range byFlow {
		sort.Strings(what)
		if f == "" {
			c.fileDiag(name, "differs in "+strings.Join(what, ", "))
			continue
		}
		c.flowDiff(f, name, what)
	}
	delete(h, "paths")
	delete(w, "paths")
	var rest []string
	for k := range union(h, w) {
		if canonical(h[k]) != canonical(w[k]) {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	if len(rest) > 0 {
		c.fileDiag(name, "differs from what extract writes in "+strings.Join(rest, ", "))
	} else if len(byFlow) == 0 {
		c.fileDiag(name, "differs from what extract writes (its formatting)")
	}
}

// operations returns an OpenAPI document's operations, with their method
// and path, by operationId (or "METHOD PATH" when one has none).
func operations(doc map[string]any) map[string]any {
	out := map[string]any{}
	paths, _ := doc["paths"].(map[string]any)
	for path, item := range paths {
		ops, _ := item.(map[string]any)
		for method, op := range ops {
			id := strings.ToUpper(method) + " " + path
			if m, ok := op.(map[string]any); ok {
				if s, ok := m["operationId"].(string); ok {
					id = s
				}
			}
			out[id] = map[string]any{"method": method, "path": path, "operation": op}
		}
	}
	return out
}

// flowOfOperation returns the flow an operationId belongs to: the flow's
// name, maybe suffixed .METHOD or .rpc.
func (c *checker) flowOfOperation(id string) string {
	best := ""
	for n := range c.r.flowPos {
		if (id == n || strings.HasPrefix(id, n+".")) && len(n) > len(best) {
			best = n
		}
	}
	if best == "" {
		for n := range c.gone {
			if id == n || strings.HasPrefix(id, n+".") {
				best = n
			}
		}
	}
	return best
}

func union[V any](a, b map[string]V) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

func maskPos(b []byte) []byte { return sourcePos.ReplaceAll(b, []byte("$1")) }

// goFile compares an oke_contract_gen.go entry by entry.
func (c *checker) goFile(name string, have, want []byte) {
	if bytes.Equal(maskPos(have), maskPos(want)) {
		return
	}
	hEntries, hHead, err := genEntries(have)
	if err != nil {
		c.fileDiag(name, "does not parse ("+err.Error()+")")
		return
	}
	wEntries, wHead, _ := genEntries(want)
	for f := range union(hEntries, wEntries) {
		he, hok := hEntries[f]
		we, wok := wEntries[f]
		switch {
		case !hok:
			c.flowDiff(f, name, []string{"not in it"})
		case !wok:
			if _, known := c.r.flowPos[f]; !known {
				if _, gone := c.gone[f]; !gone {
					c.gone[f] = c.rel(name) + ":1"
				}
			}
			c.flowDiff(f, name, []string{"in it"})
		case he.digest != we.digest:
			what := "digest (the code changed)"
			if he.digest == "" {
				what = "digest (none recorded: written by an older oke extract)"
			}
			if he.text != we.text {
				what += " and its entry"
			}
			c.flowDiff(f, name, []string{what})
		case he.text != we.text:
			c.flowDiff(f, name, []string{"its entry"})
		}
	}
	if hHead != wHead {
		c.fileDiag(name, "differs from what extract writes outside the flows' entries")
	}
}

// genEntry is one oke.ContractFlow of a generated file.
type genEntry struct {
	digest string
	text   string // its source, positions masked, spacing collapsed
}

// genEntries returns the entries of a generated file by flow name, and
// the rest of the file (masked and collapsed likewise).
func genEntries(src []byte) (map[string]genEntry, string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, GoFile, src, parser.ParseComments)
	if err != nil {
		return nil, "", err
	}
	out := map[string]genEntry{}
	var cut [][2]int
	for _, g := range GeneratedFlows(f) {
		start, end := fset.Position(g.Lit.Pos()).Offset, fset.Position(g.Lit.End()).Offset
		cut = append(cut, [2]int{start, end})
		text := collapse(src[start:end])
		if g.Digest != "" {
			text = strings.Replace(text, strconv.Quote(g.Digest), `""`, 1)
		}
		out[g.Name] = genEntry{digest: g.Digest, text: text}
	}
	var rest []byte
	at := 0
	for _, c := range cut {
		rest = append(rest, src[at:c[0]]...)
		at = c[1]
	}
	rest = append(rest, src[at:]...)
	return out, collapse(rest), nil
}

// GeneratedFlow is one oke.ContractFlow entry of a generated
// oke_contract_gen.go, as written: its Name and Digest (empty when the
// entry has none), where its name is (the entry's start without one), and
// the literal itself.
type GeneratedFlow struct {
	Name, Digest string
	Pos          token.Pos
	Lit          *ast.CompositeLit
}

// GeneratedFlows returns the oke.ContractFlow entries of a parsed
// oke_contract_gen.go, in the file's order. `oke extract -check` and the
// stalecontract analyzer of oke vet both read the file through it.
func GeneratedFlows(f *ast.File) []GeneratedFlow {
	var out []GeneratedFlow
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.CompositeLit)
		if !ok {
			return true
		}
		at, ok := lit.Type.(*ast.ArrayType)
		if !ok {
			return true
		}
		if sel, ok := at.Elt.(*ast.SelectorExpr); !ok || sel.Sel.Name != "ContractFlow" {
			return true
		}
		for _, e := range lit.Elts {
			el, ok := e.(*ast.CompositeLit)
			if !ok {
				continue
			}
			g := GeneratedFlow{Pos: el.Pos(), Lit: el}
			for _, kv := range el.Elts {
				kv, ok := kv.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				key, _ := kv.Key.(*ast.Ident)
				val, _ := kv.Value.(*ast.BasicLit)
				if key == nil || val == nil || val.Kind != token.STRING {
					continue
				}
				s, err := strconv.Unquote(val.Value)
				if err != nil {
					continue
				}
				switch key.Name {
				case "Name":
					g.Name, g.Pos = s, kv.Pos()
				case "Digest":
					g.Digest = s
				}
			}
			out = append(out, g)
		}
		return false
	})
	return out
}

func collapse(b []byte) string { return strings.Join(strings.Fields(string(maskPos(b))), " ") }

// splitSource splits "FILE:LINE".
func splitSource(s string) (string, int) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return s, 1
	}
	n, err := strconv.Atoi(s[i+1:])
	if err != nil {
		return s, 1
	}
	return s[:i], n
}
