// Package selects holds the cases of rule selectchoice.
package selects

import (
	"context"

	"deep"

	"github.com/okengine/oke"
)

type In struct{}
type Out struct{ N int }

var Bad = oke.NewFlow("selects.bad", oke.Options{Durable: true},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		a, b := make(chan int), make(chan int)
		n := 0
		select { // want `^a select over 2 channels outside a step in durable flow "selects.bad": which ready case runs is chosen at random, so a pick-up may take another branch than the first attempt did; make the choice in oke.Step\(ctx, "name", …\) so that it is saved, or wait on one channel$`
		case n = <-a:
		case n = <-b:
		}
		select { // want `^a select with a default outside a step`
		case n = <-a:
		default:
		}
		n += deep.Wait(a, b) // want `^call of deep.Wait outside a step in durable flow "selects.bad" reaches a select over 2 channels at deep.go:\d+ \(through deep.Wait\): which ready case runs`
		return oke.OK(Out{N: n}), nil
	})

var Good = oke.NewFlow("selects.good", oke.Options{Durable: true},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		a, b := make(chan int), make(chan int)
		n := 0
		select { // one channel: no choice
		case n = <-a:
		}
		n += deep.Recv(a)
		m, _ := oke.Step(ctx, "first", func(ctx context.Context) (int, error) {
			select {
			case x := <-a:
				return x, nil
			case y := <-b:
				return y, nil
			}
		})
		return oke.OK(Out{N: n + m}), nil
	})
