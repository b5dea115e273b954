// Package ttl breaks the TTL rule: an Idempotency TTL and a webhook's
// DedupeTTL that do not parse.
package ttl

import (
	"context"

	"github.com/okengine/oke"
)

type In struct {
	Text string `json:"text"`
}

var Note = oke.NewFlow("ttl.note", oke.Options{Idempotency: oke.Idempotency{TTL: "2 s"}},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[In], error) {
		return oke.OK(in), fx.Emit(ctx, "note", in)
	})

var Hook = oke.NewFlow("ttl.hook", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[In], error) {
		return oke.OK(in), fx.Emit(ctx, "hook", in)
	})

func Bind(app *oke.App) {
	app.Handle(oke.POST("/notes"), Note)
	app.Handle(oke.Webhook("/hook", "id").DedupeTTL("soon"), Hook)
}
