// Package stepnames holds the cases of rule nondetstepname.
package stepnames

import (
	"context"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"strconv"
	"time"

	"github.com/okengine/oke"
)

type In struct {
	Order string
	Items []string
	Tags  map[string]int
	N     int
}
type Out struct{}

func work(ctx context.Context) (int, error) { return 0, nil }

// Bad: names from the clock, randomness and map order.
var Bad = oke.NewFlow("stepnames.bad", oke.Options{Durable: true},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		oke.Step(ctx, "at "+time.Now().String(), work) // want `^step name of oke.Step in durable flow "stepnames.bad" comes from time.Now \(stepnames.go:\d+\): it differs on every pick-up, so the run never finds the step it saved and runs it again; name the step with a constant, the input, or a loop index over a slice$`
		stamp := time.Now().Format(time.RFC3339)
		name := fmt.Sprintf("batch %s", stamp)
		oke.Step(ctx, name, work)                                          // want `^step name of oke.Step .* comes from time.Now`
		oke.NewID(ctx, "id "+strconv.Itoa(rand.Intn(100)))                 // want `^step name of oke.NewID .* comes from rand.Intn \(math/rand\)`
		oke.Sleep(ctx, fmt.Sprint("nap ", time.Now().Unix()), time.Second) // want `^step name of oke.Sleep`
		for k, v := range in.Tags {
			oke.Step(ctx, fmt.Sprintf("tag %s", k), work) // want `^step name of oke.Step in durable flow "stepnames.bad" comes from the order of a range over a map \(stepnames.go:\d+\): map order changes from one pick-up to the next, so the steps come in another order than the journal saved them and the run fails \(StepMismatchError\); range over sorted keys \(for _, k := range slices.Sorted\(maps.Keys\(m\)\)\)$`
			label := "count " + strconv.Itoa(v)
			oke.Step(ctx, label, work) // want `comes from the order of a range over a map`
		}
		n := 0
		for range in.Tags {
			oke.Step(ctx, fmt.Sprintf("item %d", n), work) // want `^step name of oke.Step in durable flow "stepnames.bad" is taken inside a range over a map \(stepnames.go:\d+\): the steps come in map order, which changes from one pick-up to the next, so each gets back the result another one saved, or the run fails \(StepMismatchError\); range over sorted keys`
			n++
		}
		for k := range maps.Keys(in.Tags) {
			oke.Step(ctx, "key "+k, work) // want `comes from the order of a range over a map`
		}
		keys := slices.Collect(maps.Keys(in.Tags))
		for i, k := range keys {
			oke.Step(ctx, k, work)                       // want `comes from the order of a map \(Collect of maps.Keys\(in.Tags\)\)`
			oke.Step(ctx, "item "+strconv.Itoa(i), work) // the index of a slice is fine
		}
		oke.Claim(ctx, "order:"+time.Now().String()) // want `^claim key of oke.Claim .* comes from time.Now .*: it differs on every pick-up, so the claim stops no duplicate run; build the key from the input`
		every(ctx, "every "+time.Now().String())     // want `^step name passed to every in durable flow "stepnames.bad" comes from time.Now`
		return oke.OK(Out{}), nil
	})

// every takes a step named name.
func every(ctx context.Context, name string) error {
	_, err := oke.Step(ctx, name, work)
	return err
}

// Good: names from constants, the input, loop indexes over slices and ints,
// and sorted map keys.
var Good = oke.NewFlow("stepnames.good", oke.Options{Durable: true},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		oke.Step(ctx, "charge", work)
		oke.Step(ctx, "order "+in.Order, work)
		for i, item := range in.Items {
			oke.Step(ctx, fmt.Sprintf("item %d", i), work)
			oke.Step(ctx, "item "+item, work)
		}
		for i := range in.N {
			oke.Step(ctx, "round "+strconv.Itoa(i), work)
		}
		for i := 0; i < in.N; i++ {
			oke.Sleep(ctx, fmt.Sprintf("nap %d", i), time.Second)
		}
		for _, k := range slices.Sorted(maps.Keys(in.Tags)) {
			oke.Step(ctx, "tag "+k, work)
			oke.Step(ctx, fmt.Sprintf("tag %s is %d", k, in.Tags[k]), work)
		}
		oke.Claim(ctx, "order:"+in.Order)
		for tag := range in.Tags {
			oke.Claim(ctx, "tag:"+tag) // a claim is found by its key, not by its place
		}
		every(ctx, "every "+in.Order)
		// A time drawn in a step is saved: a name from it is the same on
		// every pick-up.
		day, _ := oke.Step(ctx, "today", func(ctx context.Context) (string, error) {
			return time.Now().Format(time.DateOnly), nil
		})
		oke.Step(ctx, "report "+day, work)
		return oke.OK(Out{}), nil
	})

// Nested: names of steps inside steps are checked too.
var Nested = oke.NewFlow("stepnames.nested", oke.Options{Durable: true},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		oke.Step(ctx, "outer", func(ctx context.Context) (int, error) {
			return oke.Step(ctx, "inner "+time.Now().String(), work) // want `^step name of oke.Step in durable flow "stepnames.nested" comes from time.Now`
		})
		return oke.OK(Out{}), nil
	})
