// Package name breaks the name rule: two constructors give their flows one
// name, so the contract (keyed by name) cannot say which is which.
package name

import (
	"context"

	"github.com/okengine/oke"
)

type In struct {
	ID string `json:"id"`
}

var Charge = oke.NewFlow("name.charge", oke.Options{Idempotency: oke.Required},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[In], error) {
		return oke.OK(in), fx.Emit(ctx, "charged", in)
	})

var Unprotected = oke.NewFlow("name.charge", oke.Options{Idempotency: oke.Off},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[In], error) {
		return oke.OK(in), fx.Emit(ctx, "charged", in)
	})
