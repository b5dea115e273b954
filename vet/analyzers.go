package vet

import (
	"go/token"
	"reflect"

	"golang.org/x/tools/go/analysis"
)

// The rules, one analyzer each; an analyzer's name is its rule's name in
// `oke vet -json` ("rule") and its flag under go vet
// (-effectoutsidestep=false turns it off).
var (
	// EffectOutsideStep: an effect through fx (or oke.Run, oke.Call)
	// outside a step of a durable flow happens again on every pick-up.
	EffectOutsideStep = rule("effectoutsidestep",
		"report effects outside a step of a durable oke flow\n\n"+
			"A durable flow's function runs again from the top on every pick-up of its run; only oke.Step "+
			"saves what happened. fx.Emit, fx.Send, fx.Fetch, fx.HTTPClient, fx.Ask, fx.Embed, fx.Raw, fx.Tx, "+
			"store writes, oke.Run and oke.Call outside a step happen again each time.")

	// NondetOutsideStep: the clock, randomness or a new UUID outside a
	// step gives another value on every pick-up.
	NondetOutsideStep = rule("nondetoutsidestep",
		"report time.Now, math/rand, crypto/rand and new UUIDs outside a step of a durable oke flow\n\n"+
			"Code outside steps runs again on every pick-up, so these values differ each time; draw them in "+
			"oke.Step (ids with oke.NewID) so that the saved value comes back.")

	// NondetStepName: a step name computed from the clock, randomness or
	// map order differs between pick-ups.
	NondetStepName = rule("nondetstepname",
		"report step names of a durable oke flow computed from time, randomness or map order\n\n"+
			"A run finds its saved steps by name and position; a name drawn from the clock or randomness, or "+
			"steps taken in the order of a range over a map, do not match what the journal saved.")

	// FxGoroutine: a goroutine that uses fx and is not waited for outlives
	// the flow's function.
	FxGoroutine = rule("fxgoroutine",
		"report goroutines of a durable oke flow that use fx and are not waited for before it returns\n\n"+
			"After the flow's function returns, the run's outcome is saved; effects a goroutine makes through "+
			"fx after that are outside every step.")

	// NondetReach: the clock, randomness or a new id reached through a
	// helper (any package, any depth) or a function value; the
	// environment; a mutable package variable; a timer.
	NondetReach = rule("nondetreach",
		"report the clock, randomness, new ids, the environment, mutable package variables and timers reached outside a step of a durable oke flow, through helpers of any package and function values\n\n"+
			"Code outside steps runs again on every pick-up; a helper that calls time.Now, os.Getenv or reads a package "+
			"variable that something assigns gives another value each time. Call it in oke.Step, or pass the value in.")

	// RawIO: a raw network, file, process or database call outside a step.
	RawIO = rule("rawio",
		"report raw network, file, process and database/sql calls outside a step of a durable oke flow, direct or through helpers\n\n"+
			"net, net/http clients, database/sql, os file writes, os/exec and syscall calls outside a step run again on every "+
			"pick-up, and oke does not see them; move them into oke.Step, through fx.")

	// SelectChoice: a select between ready channels outside a step.
	SelectChoice = rule("selectchoice",
		"report select statements that choose between channels outside a step of a durable oke flow, direct or through helpers\n\n"+
			"Go picks a ready case at random, so a pick-up may take another branch; make the choice in oke.Step.")

	// MapOrder: map iteration order kept or answered outside a step.
	MapOrder = rule("maporder",
		"report map iteration order that flows into a result, a string, a send or a first-found answer outside a step of a durable oke flow\n\n"+
			"Map order changes from one run to the next; range over slices.Sorted(maps.Keys(m)), or sort what you built.")

	// IgnoreReason: an //oke:ignore comment needs a reason.
	IgnoreReason = rule("ignorereason",
		"report //oke:ignore comments without a reason\n\n"+
			"//oke:ignore REASON silences the oke vet diagnostics of its line (or, alone on a line, of the "+
			"next one); a bare //oke:ignore silences nothing.")
)

// Analyzers are oke vet's analyzers, in the order of docs/vet.md.
var Analyzers = []*analysis.Analyzer{EffectOutsideStep, NondetOutsideStep, NondetStepName, FxGoroutine,
	NondetReach, RawIO, SelectChoice, MapOrder, IgnoreReason}

func init() { Analyzers = append(Analyzers, StaleContract) } // vet/stale.go: not a rule of durable steps

// engine finds the durable flows of a package and checks every rule once;
// each rule's analyzer reports that rule's findings that no //oke:ignore
// silences. It reports nothing itself.
var engine = &analysis.Analyzer{
	Name:       "okeflows",
	Doc:        "find the durable oke flows of a package and check them (the shared pass of oke vet's analyzers)",
	Run:        runEngine,
	Requires:   []*analysis.Analyzer{Reach},
	ResultType: reflect.TypeFor[*result](),
}

// result is what the engine found in one package.
type result struct {
	findings []finding
	ignores  ignores
}

// A finding is one diagnostic of one rule.
type finding struct {
	rule string
	pos  token.Pos
	msg  string
}

func rule(name, doc string) *analysis.Analyzer {
	a := &analysis.Analyzer{Name: name, Doc: doc, Requires: []*analysis.Analyzer{engine}}
	a.Run = func(pass *analysis.Pass) (any, error) {
		res := pass.ResultOf[engine].(*result)
		for _, f := range res.findings {
			if f.rule != name {
				continue
			}
			if name != "ignorereason" && res.ignores.silenced(pass.Fset, f.pos) {
				continue
			}
			pass.Report(analysis.Diagnostic{Pos: f.pos, Category: name, Message: f.msg})
		}
		return nil, nil
	}
	return a
}
