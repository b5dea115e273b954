// Package extract is oke's static pass over an app's flows (DESIGN.md
// section 8; the command is `oke extract`): it finds every flow
// (oke.NewFlow, NewStream, NewLive) and every binding of it, infers each
// flow's effects from its code — transitively, through helpers, closures,
// method values, step bodies and flows it calls, with the chain of calls
// that leads to each effect — checks the flows' options against them, and
// writes the contract: oke.contract.json, an OpenAPI 3.1 document, and an
// oke_contract_gen.go that registers the contract with the app
// (oke.RegisterContract), so that App.Start honors the Idempotency-Key
// header from what a flow does.
//
// It loads the packages with golang.org/x/tools/go/packages, type-checks
// them from source and analyzes the main module's code in SSA
// (golang.org/x/tools/go/ssa). It fails safe: the header is ignored only
// for a flow it proves has no non-read effect. A call it cannot see into that
// receives the flow's fx, a Store or a Tx counts as a write; an effect
// outside fx — the standard library's I/O, code of another module, a call it
// cannot resolve — counts as raw and is reported as a warning (rule
// RuleOutsideFx). See docs/extract.md.
//
// The API of this package is for the oke command and its tests; it may
// change.
package extract
