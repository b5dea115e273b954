// Package runtime picks a flow's options at run time: extract warns, and
// breaks no rule.
package runtime

import (
	"context"
	"os"

	"github.com/okengine/oke"
)

type In struct {
	ID string `json:"id"`
}

func flow() *oke.Flow[In, In] {
	mode := oke.Required
	if os.Getenv("UNPROTECTED") != "" {
		mode = oke.Off
	}
	return oke.NewFlow("runtime.charge", oke.Options{Idempotency: mode},
		func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[In], error) {
			return oke.OK(in), fx.Emit(ctx, "charged", in)
		})
}

func Bind(app *oke.App) { app.Handle(oke.POST("/charges"), flow()) }
