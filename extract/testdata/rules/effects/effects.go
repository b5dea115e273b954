// Package effects breaks the declared-effects rule: a flow declared
// read-only that calls fx.Raw (it ran twice on one key before extract).
package effects

import (
	"context"

	"github.com/okengine/oke"
)

type In struct {
	ID string `json:"id"`
}

func publish(ctx context.Context, fx *oke.Fx, id string) error {
	return fx.Raw(ctx, "publish "+id, func(context.Context) error { return nil })
}

var Publish = oke.NewFlow("effects.publish", oke.Options{Effects: []oke.Effect{oke.EffectRead}},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[In], error) {
		return oke.OK(in), publish(ctx, fx, in.ID)
	})

func Bind(app *oke.App) { app.Handle(oke.POST("/publish"), Publish) }
