// Package reach holds the cases of rule nondetreach: the clock,
// randomness, ids, the environment, mutable package variables and timers
// reached outside a step, through helpers of any package and depth that
// take no fx, function values and method values.
package reach

import (
	"context"
	"os"
	"time"

	"clock"
	"deep"

	"github.com/okengine/oke"
)

type In struct{ N int }
type Out struct{ S string }

// counter is assigned by bump: reading it in a flow is a finding.
var counter int

func bump() { counter++ }

// limit is only read.
var limit = 10

func work(ctx context.Context) (int, error) { return 0, nil }

// Bad: every class, found.
var Bad = oke.NewFlow("reach.bad", oke.Options{Durable: true},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		s := clock.Stamp()       // want `^call of clock.Stamp outside a step in durable flow "reach.bad" reaches time.Now at deep.go:\d+ \(through clock.Stamp → deep.Stamp → deep.now\): the value changes on every pick-up; move the call into oke.Step\(ctx, "name", …\), or take the time in a step and pass it in$`
		_ = deep.Env()           // want `^call of deep.Env outside a step in durable flow "reach.bad" reaches os.Getenv at deep.go:\d+ \(through deep.Env\): the environment can differ on the next pick-up \(another process, another deploy\); read it once at start-up and keep it in the server the flow is built from, or pass it in the flow's input$`
		_ = os.Getenv("X")       // want `^os.Getenv outside a step in durable flow "reach.bad": the environment can differ on the next pick-up`
		_, _ = os.LookupEnv("X") // want `^os.LookupEnv outside a step`
		_ = deep.Mode            // want `^read of package variable deep.Mode outside a step in durable flow "reach.bad": it can change between pick-ups, and a new process starts again from its initial value; pass the value in the flow's input, or read it in oke.Step\(ctx, "name", …\) so that the value is saved$`
		_ = counter              // want `^read of package variable reach.counter outside a step`
		_ = deep.Clock()         // want `^function variable deep.Clock outside a step in durable flow "reach.bad" reaches time.Now`
		var svc deep.Svc
		now := svc.Now // want `^method value deep.Svc.Now outside a step in durable flow "reach.bad" reaches time.Now at deep.go:\d+ \(through deep.Svc.Now\)`
		_ = now()
		stamp := clock.Stamp // want `^function value clock.Stamp outside a step`
		_ = stamp
		_ = svc.Now()             // want `^call of deep.Svc.Now outside a step`
		_ = svc.Roll()            // want `^call of deep.Svc.Roll outside a step in durable flow "reach.bad" reaches rand.Intn \(math/rand\) at deep.go:\d+ \(through deep.Svc.Roll → deep.Svc.deeper → deep.level1 → deep.level2\): it draws another value on every pick-up`
		<-time.After(time.Second) // want `^time.After outside a step in durable flow "reach.bad": a timer does not survive a pick-up: it starts again from zero, and the wait is not saved; wait with oke.Sleep\(ctx, "name", d\) or oke.SleepUntil, which are durable$`
		time.Sleep(time.Second)   // want `^time.Sleep outside a step`
		svc.Sleep(time.Second)    // want `^call of deep.Svc.Sleep outside a step .* reaches time.Sleep`
		_, _ = deep.Since(1)      // want `^call of deep.Since outside a step .* reaches time.Until at deep.go:\d+ \(through deep.Since\)`
		_ = deep.Save()           // want `^function variable deep.Save outside a step in durable flow "reach.bad" reaches os.Getenv at deep.go:\d+ \(through deep.Save\)`
		viaFx(ctx, fx)            // want `^call of viaFx outside a step in durable flow "reach.bad" reaches time.Now at deep.go:\d+ \(through viaFx → clock.Stamp → deep.Stamp → deep.now\)`
		return oke.OK(Out{S: s}), nil
	})

// viaFx gets fx: the engine follows it, and what it calls is counted at
// the flow's call.
func viaFx(ctx context.Context, fx *oke.Fx) string { return clock.Stamp() }

// Good: the same helpers inside steps, deterministic helpers, constants
// and variables nobody assigns, a helper that takes the time in a step.
var Good = oke.NewFlow("reach.good", oke.Options{Durable: true},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		s, err := oke.Step(ctx, "stamp", func(ctx context.Context) (string, error) {
			_ = os.Getenv("X")
			_ = deep.Mode + deep.Env()
			return clock.Stamp(), nil
		})
		if err != nil {
			return oke.Response[Out]{}, err
		}
		var svc deep.Svc
		oke.Step(ctx, "roll", func(ctx context.Context) (int, error) { return svc.Roll(), nil })
		_ = deep.Pure(1, 2) + clock.Same(1, 2) + svc.Add(1, 2) + limit + len(deep.Fixed) + deep.Total(map[string]int{})
		_, _ = deep.SavedNow(ctx)
		_ = deep.First([]int{1})
		oke.Step(ctx, "stamp again", deep.StampStep) // a step's function, by name
		oke.Sleep(ctx, "nap", time.Second)
		deep.SetMode("b") // a write, not a read
		_ = s + deep.Fixed
		return oke.OK(Out{S: s}), nil
	})

// Ignored: a reason silences the new rules too.
var Ignored = oke.NewFlow("reach.ignored", oke.Options{Durable: true},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		_ = os.Getenv("DEBUG") //oke:ignore only decides whether this pick-up logs more; nothing is saved from it
		//oke:ignore the stamp only goes to a log line
		_ = clock.Stamp()
		return oke.OK(Out{}), nil
	})
