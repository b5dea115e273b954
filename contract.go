package oke

import (
	"sync"
)

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
	Name        string
	Source      string // FILE:LINE of the constructor, relative to the module root
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
}

// ContractIdempotency is a flow's Idempotency option as written.
type ContractIdempotency struct {
	Mode  string // "auto", "required" or "off"
	TTL   string // as written; "" when omitted
	Claim string // the claim strategy as written; "" when omitted
}

// ContractBinding is one binding of a flow.
type ContractBinding struct {
	Kind   string // "http", "rpc", "event", "webhook" or "internal"
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
