package extract

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/okengine/oke"
)

// Contract is oke.contract.json (DESIGN.md section 8).
type Contract struct {
	Version int    `json:"version"`
	Flows   []Flow `json:"flows"`
}

// Flow is one flow of the contract.
type Flow struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Source is FILE:LINE of the flow's constructor call, relative to the
	// module root.
	Source string `json:"source"`
	// Digest is a SHA-256 ("sha256:" and 64 hex digits) of what the
	// contract was inferred from: the flow's options and bindings, its
	// types, and the code reachable from its function (digest.go says
	// exactly what). It changes with any change of that code, and not with
	// formatting or comments; `oke extract -check` and oke vet compare it
	// with the code's.
	Digest  string `json:"digest"`
	Shape   string `json:"shape"` // "unary", "stream", "live"
	Durable bool   `json:"durable"`
	// Effects are the inferred effects, in the order of oke's Effect
	// constants.
	Effects []string `json:"effects"`
	// Declared is Options.Effects as written; absent when not declared.
	Declared    []string    `json:"declared,omitempty"`
	Idempotency Idempotency `json:"idempotency"`
	Bindings    []Binding   `json:"bindings"`
	Input       Schema      `json:"input"`
	Output      Schema      `json:"output"`
	// Steps are the constant step names, in the order the code takes them;
	// DynamicSteps the expressions of names computed at run time.
	Steps        []string `json:"steps"`
	DynamicSteps []string `json:"dynamicSteps,omitempty"`
	// Patches are the names the flow checks with oke.Patched (code changed
	// while runs were in flight), DeprecatedPatches those it consumes with
	// oke.DeprecatePatch (being retired); in the order the code takes them.
	Patches           []string `json:"patches,omitempty"`
	DeprecatedPatches []string `json:"deprecatedPatches,omitempty"`
	// Why gives, for each inferred effect, the chains of calls that lead
	// to it.
	Why map[string][]string `json:"why"`
	// TxOnly: every non-read effect is a statement in the flow's
	// transaction (fx.Tx), so its key's claim can be held by that
	// transaction.
	TxOnly bool `json:"txOnly"`
	// Coalesced: a durable flow whose every non-read effect is a
	// statement in its steps' transactions (fx.Tx inside oke.Step). On a
	// driver that can (Postgres), a keyed request runs all its steps, their
	// journal entries, the run's end and the stored response in one
	// transaction: one commit. Absent when false.
	Coalesced bool `json:"coalesced,omitempty"`
	// Warnings say what extract could not read statically.
	Warnings []string `json:"warnings,omitempty"`
}

// Idempotency is a flow's effective Idempotency-Key mode.
type Idempotency struct {
	Mode string `json:"mode"` // "auto", "required", "off"; "unknown" when computed at run time
	TTL  string `json:"ttl"`  // the effective TTL: "24h" when omitted
	// Claim is how the key is claimed when the header is honored: "first"
	// (before the function runs), "in_tx" (by the flow's transaction),
	// "deferred" (with the first statement; today's DeferClaim). Absent
	// when no binding honors the header.
	Claim string `json:"claim,omitempty"`
}

// Binding is one binding of a flow.
type Binding struct {
	Kind    string `json:"kind"` // "http", "rpc", "event", "webhook", "internal", "schedule" (oke.Cron)
	Method  string `json:"method"`
	Path    string `json:"path"`
	Event   string `json:"event"`
	Honored bool   `json:"honored"`
	// Dedupe is a webhook's dedupe field, and DedupeTTL how long its keys
	// are kept.
	Dedupe    string `json:"dedupe,omitempty"`
	DedupeTTL string `json:"dedupeTTL,omitempty"`
	// Conditional: the App.Handle call is made only on some paths (inside
	// an if, a switch or a select: a route behind a flag). The binding is in
	// the contract, but not in openapi.json, which describes the routes an
	// app always serves.
	Conditional bool `json:"conditional,omitempty"`
}

// Schema is a JSON Schema (2020-12), as a JSON value.
type Schema = json.RawMessage

// Diagnostic is a broken rule (or, with Rule "warning", something extract
// could not read statically). Its String form is DESIGN.md's
// FILE:LINE:COL: flow "NAME": WHAT; FIX.
type Diagnostic struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Col     int    `json:"col"`
	Flow    string `json:"flow"`
	Rule    string `json:"rule"`
	Message string `json:"message"`
	// Severity is "warning" for what does not fail extract (an effect
	// outside fx, what extract could not read); it is absent from a
	// broken rule (extract exits 1).
	Severity string `json:"severity,omitempty"`
}

// SeverityWarning is the Severity of a warning.
const SeverityWarning = "warning"

func (d Diagnostic) String() string {
	if d.Flow == "" {
		return fmt.Sprintf("%s:%d:%d: %s", d.File, d.Line, d.Col, d.Message)
	}
	return fmt.Sprintf("%s:%d:%d: flow %q: %s", d.File, d.Line, d.Col, d.Flow, d.Message)
}

// The rules that fail extract.
const (
	RuleTTL      = "ttl"       // an unparseable TTL
	RuleRequired = "required"  // Required on a flow that cannot honor the header
	RuleEffects  = "effects"   // Options.Effects leaves out an inferred effect
	RuleStepName = "step-name" // a durable flow uses one constant step name twice
	RuleName     = "name"      // two flows with one name
	RuleTag      = "tag"       // an input field's validation tag does not parse
	RuleWarning  = "warning"   // not a rule: what extract could not read
)

// effectOrder is the order of oke's Effect constants.
var effectOrder = map[string]int{}

func init() {
	for i, e := range []oke.Effect{oke.EffectRead, oke.EffectWrite, oke.EffectEmit, oke.EffectSend, oke.EffectCall,
		oke.EffectFetch, oke.EffectAsk, oke.EffectEmbed, oke.EffectSecrets, oke.EffectRaw} {
		effectOrder[string(e)] = i
	}
}

func sortEffects(es []string) {
	sort.SliceStable(es, func(i, j int) bool {
		a, aok := effectOrder[es[i]]
		b, bok := effectOrder[es[j]]
		switch {
		case aok && bok:
			return a < b
		case aok != bok:
			return aok
		}
		return es[i] < es[j]
	})
}

// qualifying reports whether effect e is a non-read effect.
func qualifying(e string) bool { return oke.Effect(e).Qualifying() }
