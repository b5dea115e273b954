// Package tag breaks the tag rule: input fields whose validation tags do
// not parse (oke's decoder would refuse to start on them).
package tag

import (
	"context"
	"net/http"

	"github.com/okengine/oke"
)

type In struct {
	Amount int64  `json:"amount" minimum:"one"`
	Code   string `json:"code" pattern:"(["`
	Items  []Item `json:"items,omitempty"`
}

type Item struct {
	N int `json:"n" minLength:"1"`
}

var Pay = oke.NewFlow("tag.pay", oke.Options{},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[In], error) {
		return oke.OK(in), fx.Emit(ctx, "paid", in)
	})

func Bind(app *oke.App) {
	app.Handle(oke.POST("/pay"), Pay)
}

// gate reads X-Foo; its directive's pattern does not parse.
//
//oke:header X-Foo pattern:"("
func gate(r *http.Request, flow string) (oke.Identity, error) {
	if r.Header.Get("X-Foo") == "" {
		return oke.Identity{}, oke.Unauthorized("no foo")
	}
	return oke.Identity{Tenant: "t", Principal: "anon"}, nil
}

// New is the app, with the gate.
func New() *oke.App {
	app := oke.New(oke.Config{Gate: gate})
	Bind(app)
	return app
}
