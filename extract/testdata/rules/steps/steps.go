// Package steps breaks the step-name rule: a durable flow that uses one
// constant step name twice, and one that uses a constant name in a loop.
// Names from the loop index, and one name in two exclusive branches, are
// fine.
package steps

import (
	"context"
	"fmt"

	"github.com/okengine/oke"
)

type In struct {
	N    int  `json:"n"`
	Fast bool `json:"fast"`
}

func charge(ctx context.Context) (int, error) { return 1, nil }

var Twice = oke.NewFlow("steps.twice", oke.Options{Durable: true},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[In], error) {
		if _, err := oke.Step(ctx, "charge", charge); err != nil {
			return oke.Response[In]{}, err
		}
		if _, err := oke.NewID(ctx, "charge"); err != nil {
			return oke.Response[In]{}, err
		}
		return oke.OK(in), nil
	})

var Loop = oke.NewFlow("steps.loop", oke.Options{Durable: true},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[In], error) {
		for i := 0; i < in.N; i++ {
			if _, err := oke.Step(ctx, "charge", charge); err != nil {
				return oke.Response[In]{}, err
			}
		}
		return oke.OK(in), nil
	})

var Fine = oke.NewFlow("steps.fine", oke.Options{Durable: true},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[In], error) {
		for i := 0; i < in.N; i++ {
			if _, err := oke.Step(ctx, fmt.Sprintf("charge %d", i), charge); err != nil {
				return oke.Response[In]{}, err
			}
		}
		var err error
		if in.Fast {
			_, err = oke.Step(ctx, "finish", charge)
		} else {
			_, err = oke.Step(ctx, "finish", charge)
		}
		return oke.OK(in), err
	})

// NotDurable may reuse a name: Step just calls the function.
var NotDurable = oke.NewFlow("steps.notDurable", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[In], error) {
		oke.Step(ctx, "again", charge)
		oke.Step(ctx, "again", charge)
		return oke.OK(in), nil
	})

func Bind(app *oke.App) {
	app.Handle(oke.POST("/twice"), Twice)
	app.Handle(oke.POST("/loop"), Loop)
	app.Handle(oke.POST("/fine"), Fine)
	app.Handle(oke.POST("/not-durable"), NotDurable)
}
