// Package vet holds the analyzers of `oke vet`: go/analysis passes that
// check durable flows (oke.NewFlow with oke.Options{Durable: true}) against
// the rules of durable steps. A durable flow's function runs again from the
// top every time its run picks up — after a crash, a deploy, a lost
// connection or a durable sleep — and only what happens inside oke.Step is
// saved and given back instead of running again. So:
//
//   - EffectOutsideStep reports an effect (fx.Emit, fx.Send, fx.Fetch,
//     fx.HTTPClient, fx.Ask, fx.Embed, fx.Raw, fx.Tx, a store write,
//     oke.Run, oke.Call) outside a step: it would happen again on every
//     pick-up.
//   - NondetOutsideStep reports time.Now, time.Since, time.Until,
//     math/rand, crypto/rand and new UUIDs outside a step: the value would
//     differ on every pick-up.
//   - NondetStepName reports a step name (oke.Step, Sleep, SleepUntil,
//     NewID; a claim key of oke.Claim) computed from time, randomness or the
//     order of a range over a map.
//   - FxGoroutine reports a goroutine that uses fx (or a *oke.Store or
//     *oke.Tx) and that the function does not wait for before it returns.
//   - NondetReach reports the clock, randomness and new ids reached through
//     helpers of any package and depth that take no fx, and through
//     function and method values; os.Getenv and kin; reads of package
//     variables that something assigns after their declaration; timers
//     (time.After, time.Sleep, …).
//   - RawIO reports raw network, database/sql, file-write and process calls
//     outside a step, direct or through helpers.
//   - SelectChoice reports a select that chooses between channels.
//   - MapOrder reports map iteration order that flows into a result, a
//     string, a send or a first-found answer (a sum, a count, a min or max,
//     filling another map, or ranging over slices.Sorted(maps.Keys(m)) are
//     fine).
//   - IgnoreReason reports an //oke:ignore comment without a reason.
//
// The last four follow calls across packages with analysis facts, recorded
// by the Reach pass for every function of the build's own modules (not the
// standard library, not the module cache): what it reaches outside steps,
// and the chain of calls that leads there.
//
// Scope of the first four: the code lexically inside a durable flow's function (a function
// literal passed to oke.NewFlow, or a function or method passed by name)
// and the closures it defines, plus — two calls deep — functions and
// methods of the same package that it calls with fx, a *oke.Store or a
// *oke.Tx among their arguments. Code is inside a step when it is lexically
// inside the function passed to oke.Step, inside a function literal passed
// to a same-package helper that only ever runs that parameter inside a step,
// or inside a local closure that is only used inside steps.
//
// A comment //oke:ignore REASON on the line of a diagnostic, or alone on the
// line before it, silences the diagnostics of that line. See docs/vet.md for
// every rule, its fix, and what the analyzers cannot see.
//
// Run them with `oke vet [PACKAGES]`, or as a vet tool:
//
//	go install github.com/okengine/oke/cmd/oke-vet
//	go vet -vettool=$(which oke-vet) ./...
package vet
