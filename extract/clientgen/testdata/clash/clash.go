// Package clash is a fixture of clientgen's tests: flows whose names make
// the same Go name, which oke gen client refuses (naming both).
package clash

import (
	"context"

	"github.com/okengine/oke"
)

type In struct {
	ID string `json:"id"`
}

func read(name string) *oke.Flow[In, In] {
	return oke.NewFlow(name, oke.Options{Effects: []oke.Effect{}},
		func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[In], error) { return oke.OK(in), nil })
}

// Bind binds them.
func Bind(app *oke.App) {
	app.Handle(oke.GET("/a"), read("clash.get-item"))
	app.Handle(oke.GET("/b"), read("clash.getItem"))
	app.Handle(oke.GET("/c"), read("client"))
	app.Handle(oke.GET("/d"), read("pay-ments.x"))
	app.Handle(oke.GET("/e"), read("payMents.y"))
}
