package extract

import (
	"go/types"
	"strings"

	"golang.org/x/tools/go/ssa"

	"github.com/okengine/oke"
)

// okePath is the import path of the package whose API this file knows.
const okePath = "github.com/okengine/oke"

// op says what a call of the oke API does, for effect inference.
type op uint8

const (
	opNone       op = iota // no effect (fx.Fail, fx.Identity, oke.OK, …)
	opEffect               // a fixed effect
	opSQL                  // a statement: the kind of its SQL (ClassifySQL)
	opStore                // fx.Store: returns a Store handle
	opFlowTx               // fx.Tx: returns the flow's transaction
	opStoreTx              // Store.Tx: fn runs with a transaction of its own
	opClient               // fx.HTTPClient: a fetch; returns a recorded client
	opRaw                  // fx.Raw: raw, and fn's body
	opCall                 // oke.Call: call, and the called flow's effects
	opRun                  // oke.Run: call (the run's effects are its own)
	opStep                 // oke.Step: a step name, and fn's body
	opStepName             // oke.Sleep, SleepUntil, NewID, AwaitSignal(Step): a step name
	opFlow                 // NewFlow, NewStream, NewLive: a flow
	opBinding              // POST, GET, …, RPC, OnEvent, Webhook, Internal, Cron
	opDedupeTTL            // Binding.DedupeTTL
	opBindingOpt           // Binding.In, Binding.CatchUp: the same binding, for the contract
	opHandle               // App.Handle: binds a flow
)

// The names extract gives the marker steps of patches (oke.Patched,
// oke.DeprecatePatch): listed as the flow's patches, not as its steps.
const (
	patchStep           = "oke.patch:"
	deprecatedPatchStep = "oke.patch(deprecated):"
)

// api is the one table of the oke API that extract knows: what each call
// does to a flow's effects. The root API is still being reshaped; when a
// name changes, change it here only. Argument indexes count a method's
// receiver as argument 0 (as SSA does).
//
// A call of the oke package that is not in the table and receives fx, a
// Store or a Tx counts as a write ("conservative").
var api = map[string]struct {
	op     op
	effect oke.Effect
	arg    int    // the SQL, step name, called flow, path or event argument
	fn     int    // the function argument whose body runs (Step, Raw, Store.Tx)
	shape  string // opFlow: "unary", "stream", "live"
	kind   string // opBinding: "http", "rpc", "event", "webhook", "internal", "schedule"
	method string // opBinding: the HTTP method
	prefix string // opStepName: put before the name (a patch's marker step)
}{
	"(*Fx).Store":       {op: opStore},
	"(*Fx).Tx":          {op: opFlowTx},
	"(*Store).Exec":     {op: opSQL, arg: 2},
	"(*Store).Query":    {op: opSQL, arg: 2},
	"(*Store).QueryRow": {op: opSQL, arg: 2},
	"(*Store).Tx":       {op: opStoreTx, fn: 3},
	"(*Tx).Exec":        {op: opSQL, arg: 2},
	"(*Tx).Query":       {op: opSQL, arg: 2},
	"(*Tx).QueryRow":    {op: opSQL, arg: 2},
	"(*Fx).Emit":        {op: opEffect, effect: oke.EffectEmit},
	"(*Fx).Send":        {op: opEffect, effect: oke.EffectSend},
	"(*Fx).Fetch":       {op: opEffect, effect: oke.EffectFetch},
	"(*Fx).HTTPClient":  {op: opClient, effect: oke.EffectFetch},
	"(*Fx).Ask":         {op: opEffect, effect: oke.EffectAsk},
	"(*Fx).Embed":       {op: opEffect, effect: oke.EffectEmbed},
	"(*Fx).Secret":      {op: opEffect, effect: oke.EffectSecrets},
	"(*Fx).Raw":         {op: opRaw, effect: oke.EffectRaw, fn: 3},
	"Call":              {op: opCall, effect: oke.EffectCall, arg: 2},
	"Run":               {op: opRun, effect: oke.EffectCall, arg: 2},
	"Step":              {op: opStep, arg: 1, fn: 2},
	"Go":                {op: opStep, arg: 1, fn: 2},
	"First":             {op: opStep, arg: 1, fn: 2},
	"Sleep":             {op: opStepName, arg: 1},
	"SleepUntil":        {op: opStepName, arg: 1},
	"NewID":             {op: opStepName, arg: 1},
	"Patched":           {op: opStepName, arg: 1, prefix: patchStep},
	"DeprecatePatch":    {op: opStepName, arg: 1, prefix: deprecatedPatchStep},
	"AwaitSignal":       {op: opStepName, arg: 1},
	"AwaitSignalStep":   {op: opStepName, arg: 1},
	"(*Fx).Signal":      {op: opEffect, effect: oke.EffectCall}, // a signal to another run
	"SignalKey":         {op: opNone},
	"SignalAuthorize":   {op: opNone},
	"Claim":             {op: opNone}, // the journal's own business-key claim
	"StepKey":           {op: opNone},
	"(*Fx).Fail":        {op: opNone},
	"(*Fx).Identity":    {op: opNone},
	"(*Fx).Flow":        {op: opNone},
	"(*Fx).Now":         {op: opNone},
	"(*Fx).Effects":     {op: opNone},

	"NewFlow":   {op: opFlow, shape: "unary"},
	"NewStream": {op: opFlow, shape: "stream"},
	"NewLive":   {op: opFlow, shape: "live"},

	"POST":     {op: opBinding, kind: "http", method: "POST"},
	"PUT":      {op: opBinding, kind: "http", method: "PUT"},
	"PATCH":    {op: opBinding, kind: "http", method: "PATCH"},
	"DELETE":   {op: opBinding, kind: "http", method: "DELETE"},
	"QUERY":    {op: opBinding, kind: "http", method: "QUERY"},
	"GET":      {op: opBinding, kind: "http", method: "GET"},
	"RPC":      {op: opBinding, kind: "rpc", method: "POST"},
	"OnEvent":  {op: opBinding, kind: "event"},
	"Webhook":  {op: opBinding, kind: "webhook", method: "POST"},
	"Internal": {op: opBinding, kind: "internal"},
	"Cron":     {op: opBinding, kind: "schedule"}, // the spec is configuration, not contract

	"(Binding).In":      {op: opBindingOpt},
	"(Binding).CatchUp": {op: opBindingOpt},

	"(Binding).DedupeTTL": {op: opDedupeTTL, arg: 1},
	"(*App).Handle":       {op: opHandle},
}

// The oke names options.go resolves, by name through go/types, so that both
// forms of Idempotency compile: today's {Required, Off, TTL, DeferClaim,
// ClaimInTx} and the coming {Mode, TTL, Claim}.
var (
	okeModeVars  = map[string]string{"Auto": "auto", "Required": "required", "Off": "off"}
	okeModeConst = map[string]string{"ModeAuto": "auto", "ModeRequired": "required", "ModeOff": "off"}
	okeClaims    = map[string]string{"ClaimAuto": "", "ClaimFirst": "first", "ClaimInTx": "in_tx"}
)

// The handle types whose values carry a flow's effects.
const (
	typeFx    = "Fx"
	typeStore = "Store"
	typeTx    = "Tx"
)

// apiName returns the table key of fn when fn is a function or method of
// the oke package itself (not a wrapper of one), else "".
func apiName(fn *ssa.Function) string {
	if fn == nil {
		return ""
	}
	obj, ok := fn.Object().(*types.Func)
	if !ok || obj.Pkg() == nil || obj.Pkg().Path() != okePath {
		return ""
	}
	switch s := fn.Synthetic; {
	case s == "", s == "from type information", s == "from type information (on demand)",
		strings.HasPrefix(s, "instance of "), strings.HasPrefix(s, "instantiation wrapper of "):
	default:
		return "" // a wrapper, bound method or thunk: its body calls the API
	}
	sig := obj.Type().(*types.Signature)
	if recv := sig.Recv(); recv != nil {
		t := recv.Type()
		star := ""
		if p, ok := t.(*types.Pointer); ok {
			t, star = p.Elem(), "*"
		}
		name := "?"
		if n, ok := types.Unalias(t).(*types.Named); ok {
			name = n.Obj().Name()
		}
		return "(" + star + name + ")." + obj.Name()
	}
	return obj.Name()
}

// inOke reports whether fn's body is the oke framework's (the API itself,
// or a function literal inside it): extract never reads it.
func inOke(fn *ssa.Function) bool {
	if apiName(fn) != "" {
		return true
	}
	for f := fn; f != nil; f = f.Parent() {
		if f.Pkg != nil && f.Pkg.Pkg.Path() == okePath {
			return true
		}
	}
	return false
}

// isOkeType reports whether t is the oke type name (or a pointer to it).
func isOkeType(t types.Type, name string) bool {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	n, ok := types.Unalias(t).(*types.Named)
	return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == okePath && n.Obj().Name() == name
}
