// Package patches is a durable flow changed twice while runs were in
// flight: one patch being retired, one new.
package patches

import (
	"context"

	"github.com/okengine/oke"
)

var db oke.DB

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

func Bind(app *oke.App) {
	app.Handle(oke.POST("/ship"), Ship)
	app.Handle(oke.POST("/quote"), Quote)
}

// Quote's steps run at the same time; their writes are its effects.
var Quote = oke.NewFlow("patches.quote", oke.Options{Durable: true},
	func(ctx context.Context, in in, fx *oke.Fx) (oke.Response[string], error) {
		a := oke.Go(ctx, "rate", func(ctx context.Context) (int, error) {
			_, err := fx.Store(db).Exec(ctx, `INSERT INTO rates (id) VALUES ($1)`, in.ID)
			return 1, err
		})
		_, v, err := oke.First(ctx, "fastest", func(ctx context.Context) (string, error) {
			return "a", nil
		}, func(ctx context.Context) (string, error) {
			return "b", fx.Send(ctx, oke.Message{Channel: "email", To: in.ID})
		})
		if err != nil {
			return oke.Response[string]{}, err
		}
		if _, err := a.Wait(ctx); err != nil {
			return oke.Response[string]{}, err
		}
		return oke.OK(v), nil
	})
