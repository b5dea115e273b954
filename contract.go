package oke

import (
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"

	"github.com/okengine/oke/driver"
)

func sortedNames(m map[string]*flow) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Contract is what `oke extract` inferred about the flows of one package:
// the effects each flow's function has (found in its code, transitively),
// with the options and bindings they were inferred for. The Go file extract
// generates beside the flows (oke_contract_gen.go) registers it from init
// with RegisterContract; an App uses it at Start to decide from what a flow
// does — not only from what it declares — whether its bindings honor the
// Idempotency-Key header.
//
// A Contract is generated code's data: write it by hand only in tests.
type Contract struct {
	Version int // 1
	Flows   []ContractFlow
}

// ContractFlow is one flow of a Contract. Name, Shape, Durable,
// Idempotency, Declared and Bindings are what extract saw in the code (the
// flow's constructor and options, and every binding of it); when any of them
// differs from the flow the app runs, the contract is stale for that flow:
// Start logs a warning naming the flow and the fix (`go generate`), and the
// flow falls back to its declared effects.
type ContractFlow struct {
	Name   string
	Source string // FILE:LINE of the constructor, relative to the module root
	// Digest is extract's digest of the code the contract was inferred
	// from ("sha256:…"). Start does not check it (the code is not there
	// at run time); `oke extract -check` and oke vet do.
	Digest      string
	Shape       string // "unary", "stream" or "live"
	Durable     bool
	Idempotency ContractIdempotency
	// Declared is Options.Effects as written (nil when not declared).
	Declared []Effect
	Bindings []ContractBinding
	// Effects are the inferred effects, in the stable order of the Effect
	// constants. A call extract could not see into counts as a write.
	Effects []Effect
	// TxOnly is set when every non-read effect of the flow is a statement
	// in its Fx.Tx transaction: the claim can then be held by that
	// transaction (one commit per request) without changing what any
	// request sees.
	TxOnly bool
	// Coalesced is set for a durable flow whose every non-read effect is a
	// statement in its steps' transactions (Fx.Tx inside Step): on a
	// driver.RunCommitter its keyed requests run in one transaction — the
	// steps, their journal entries, the run's end and the stored response
	// commit once.
	Coalesced bool
	// Steps are a durable flow's constant step names, in the order the
	// code has them; Why gives, for each inferred effect, the call chains
	// that led to it ("charges.go:41 fx.Store(db).Exec INSERT …"). Both
	// are for people (the console); nothing decides on them.
	Steps []string
	Why   map[Effect][]string
}

// ContractIdempotency is a flow's Idempotency option as written.
type ContractIdempotency struct {
	Mode  string // "auto", "required" or "off"
	TTL   string // as written; "" when omitted
	Claim string // the claim strategy as written; "" when omitted
}

// ContractBinding is one binding of a flow.
type ContractBinding struct {
	Kind   string // "http", "rpc", "event", "webhook", "internal" or "schedule"
	Method string // http, rpc, webhook
	Path   string // http, webhook
	Event  string // event
	Dedupe string // webhook: the payload field deduped on
}

var contracts struct {
	sync.Mutex
	flows map[string]ContractFlow // by flow name
}

// RegisterContract registers the inferred contract of a package's flows; a
// later registration of a flow's name replaces an earlier one. The generated
// oke_contract_gen.go calls it from init: do not call it yourself except in
// tests.
func RegisterContract(c Contract) {
	contracts.Lock()
	defer contracts.Unlock()
	if contracts.flows == nil {
		contracts.flows = make(map[string]ContractFlow)
	}
	for _, f := range c.Flows {
		contracts.flows[f.Name] = f
	}
}

// registeredContract returns the registered contract of flow name.
func registeredContract(name string) (ContractFlow, bool) {
	contracts.Lock()
	defer contracts.Unlock()
	f, ok := contracts.flows[name]
	return f, ok
}

// contractBinding is b as extract records it.
func contractBinding(b Binding) ContractBinding {
	switch {
	case b.rpc:
		return ContractBinding{Kind: "rpc", Method: b.Method}
	case b.event != "":
		return ContractBinding{Kind: "event", Event: b.event}
	case b.intern:
		return ContractBinding{Kind: "internal"}
	case b.sched != nil:
		return ContractBinding{Kind: "schedule"} // its spec is configuration, not contract
	case b.dedupeField != "":
		return ContractBinding{Kind: "webhook", Method: b.Method, Path: b.Path, Dedupe: b.dedupeField}
	}
	return ContractBinding{Kind: "http", Method: b.Method, Path: b.Path}
}

// staleness says how the registered contract c differs from flow f as the
// app runs it with bindings, or "" when it does not. The contract may hold
// more bindings than the app made (bindings made only under some
// configuration); every binding the app made must be in it.
func staleness(c ContractFlow, f *flow, bindings []Binding) string {
	m := f.opts.Idempotency
	claim := ""
	if m.Claim != ClaimAuto {
		claim = m.Claim.String()
	}
	switch {
	case c.Shape != f.shape.String():
		return "its shape is " + f.shape.String() + ", the contract's " + c.Shape
	case c.Durable != f.opts.Durable:
		return "Options.Durable changed"
	case c.Idempotency.Mode != m.Mode.String():
		if c.Idempotency.Mode == "" {
			return "extract could not read its Idempotency option (computed at run time; make it constant)"
		}
		return "Idempotency.Mode is " + m.Mode.String() + ", the contract's " + c.Idempotency.Mode
	case c.Idempotency.TTL != m.TTL:
		return "Idempotency.TTL is " + quoteOrNone(m.TTL) + ", the contract's " + quoteOrNone(c.Idempotency.TTL)
	case c.Idempotency.Claim != claim:
		return "Idempotency.Claim is " + m.Claim.String() + ", the contract's " + quoteOrNone(c.Idempotency.Claim)
	case !sameEffects(c.Declared, f.opts.Effects):
		return "Options.Effects changed"
	}
	for _, b := range bindings {
		cb := contractBinding(b)
		found := false
		for _, x := range c.Bindings {
			if x == cb {
				found = true
				break
			}
		}
		if !found {
			return "binding " + b.String() + " is not in the contract"
		}
	}
	return ""
}

func quoteOrNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return `"` + s + `"`
}

func sameEffects(a, b []Effect) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// contractWarned holds the contract warnings logged so far, by logger
// (App.Start logs each once per process and logger).
var contractWarned sync.Map

type contractWarning struct {
	log *slog.Logger
	msg string
}

// useContracts matches every bound flow with its registered contract. A
// flow with a fresh contract honors the Idempotency-Key header from its
// inferred effects, and with ClaimAuto holds its claim in its transaction
// when the contract shows that is safe (TxOnly) and the driver can. It
// returns one warning per flow whose contract is stale, and one naming the
// flows that have none; those fall back to their declared effects.
func (a *App) useContracts() []string {
	bindings := map[*flow][]Binding{}
	for _, rt := range a.routes {
		bindings[rt.f] = append(bindings[rt.f], rt.b)
	}
	_, canHold := a.cfg.Driver.(driver.TxClaimer)
	_, canCommitRuns := a.cfg.Driver.(driver.RunCommitter)
	var warnings, missing []string
	for _, name := range sortedNames(a.flows) {
		f := a.flows[name]
		c, ok := registeredContract(name)
		f.inferred, f.autoInTx, f.coalesced, f.source = nil, false, false, c.Source
		if !ok {
			f.contract = "missing"
			missing = append(missing, name)
			continue
		}
		if why := staleness(c, f, bindings[f]); why != "" {
			f.contract, f.contractProblem = "stale", why
			warnings = append(warnings, fmt.Sprintf("flow %q: its generated contract is stale (%s), so it honors Idempotency-Key from its declared effects; fix: run go generate (oke extract) in its package", name, why))
			continue
		}
		f.contract, f.contractProblem = "fresh", ""
		f.inferred = append([]Effect{}, c.Effects...)
		f.why, f.steps = c.Why, c.Steps
		f.autoInTx = c.TxOnly && canHold && !a.cfg.ClaimFirst
		f.coalesced = c.Coalesced && c.Durable && canHold && canCommitRuns && !a.cfg.ClaimFirst && f.opts.Idempotency.Claim == ClaimAuto
	}
	if len(missing) > 0 {
		warnings = append(warnings, fmt.Sprintf("flows %s have no generated contract, so they honor Idempotency-Key from their declared effects (undeclared: assumed to write); fix: run oke extract through go generate in their packages (docs/extract.md)", strings.Join(missing, ", ")))
	}
	return warnings
}
