// Package newapi has flows written against the planned Idempotency form.
package newapi

import (
	"context"

	"github.com/okengine/oke"
)

type In struct {
	ID string `json:"id"`
}

const strict = oke.ModeRequired

var InTx = oke.NewFlow("newapi.inTx", oke.Options{Idempotency: oke.Idempotency{Mode: strict, TTL: "1h", Claim: oke.ClaimInTx}},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[In], error) {
		tx, err := fx.Tx(ctx)
		if err != nil {
			return oke.Response[In]{}, err
		}
		_, err = tx.Exec(ctx, `INSERT INTO items (id) VALUES ($1)`, in.ID)
		return oke.OK(in), err
	})

var Auto = oke.NewFlow("newapi.auto", oke.Options{Idempotency: oke.Required},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[In], error) {
		tx, err := fx.Tx(ctx)
		if err != nil {
			return oke.Response[In]{}, err
		}
		_, err = tx.Exec(ctx, `UPDATE items SET n = 1 WHERE id = $1`, in.ID)
		return oke.OK(in), err
	})

var First = oke.NewFlow("newapi.first", oke.Options{Idempotency: oke.Idempotency{Claim: oke.ClaimFirst}},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[In], error) {
		return oke.OK(in), fx.Emit(ctx, "x", in)
	})

var Off = oke.NewFlow("newapi.off", oke.Options{Idempotency: oke.Off},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[In], error) {
		return oke.OK(in), fx.Emit(ctx, "x", in)
	})

func Bind(app *oke.App) {
	app.Handle(oke.POST("/in-tx"), InTx)
	app.Handle(oke.POST("/auto"), Auto)
	app.Handle(oke.POST("/first"), First)
	app.Handle(oke.POST("/off"), Off)
}
