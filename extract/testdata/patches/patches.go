// Package patches is a durable flow changed twice while runs were in
// flight: one patch being retired, one new.
package patches

import (
	"context"

	"github.com/okengine/oke"
)

type in struct {
	ID string `json:"id"`
}

var Ship = oke.NewFlow("patches.ship", oke.Options{Durable: true},
	func(ctx context.Context, in in, fx *oke.Fx) (oke.Response[string], error) {
		one := func(context.Context) (int, error) { return 1, nil }
		if err := oke.DeprecatePatch(ctx, "label-v2"); err != nil {
			return oke.Response[string]{}, err
		}
		if _, err := oke.Step(ctx, "label", one); err != nil {
			return oke.Response[string]{}, err
		}
		fast, err := oke.Patched(ctx, "express")
		if err != nil {
			return oke.Response[string]{}, err
		}
		if fast {
			_, err = oke.Step(ctx, "courier", one)
		} else {
			_, err = oke.Step(ctx, "post", one)
		}
		return oke.OK("shipped"), err
	})

func Bind(app *oke.App) { app.Handle(oke.POST("/ship"), Ship) }
