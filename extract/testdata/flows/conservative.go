package flows

import (
	"context"

	"github.com/okengine/oke"
)

// hook is a function value set elsewhere: extract cannot see what it does.
var hook func(ctx context.Context, fx *oke.Fx) error

type fxKey struct{}

// Hooked passes fx to a function value from elsewhere, and to a function
// whose source extract does not read (context.WithValue, in the standard
// library): both are conservative writes.
var Hooked = oke.NewFlow("fixture.hooked", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		ctx = context.WithValue(ctx, fxKey{}, fx)
		return oke.OK(Out{}), hook(ctx, fx)
	})

// BindConservative binds the flow of this file.
func BindConservative(app *oke.App) { app.Handle(oke.POST("/hooked"), Hooked) }
