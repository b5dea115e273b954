// Package required breaks the required rule four ways: on a GET binding,
// a stream, a live feed, and a flow with no qualifying effect.
package required

import (
	"context"
	"database/sql"
	"net/http"

	"github.com/okengine/oke"
)

type In struct {
	ID string `json:"id"`
}

var db *sql.DB

var Get = oke.NewFlow("required.get", oke.Options{Idempotency: oke.Required},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[In], error) {
		_, err := fx.Store(db).Exec(ctx, `UPDATE items SET seen = true WHERE id = $1`, in.ID)
		return oke.OK(in), err
	})

var Stream = oke.NewStream("required.stream", oke.Options{Idempotency: oke.Required},
	func(ctx context.Context, in In, fx *oke.Fx, w http.ResponseWriter) error {
		_, err := fx.Store(db).Exec(ctx, `INSERT INTO exports (id) VALUES ($1)`, in.ID)
		return err
	})

var Live = oke.NewLive("required.live", oke.Options{Idempotency: oke.Required},
	func(ctx context.Context, in In, fx *oke.Fx, send func(oke.Event) error) error {
		return send(oke.Event{Name: "tick"})
	})

var ReadOnly = oke.NewFlow("required.readOnly", oke.Options{Idempotency: oke.Idempotency{Mode: oke.ModeRequired}},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[In], error) {
		if _, err := fx.Secret(ctx, "KEY"); err != nil {
			return oke.Response[In]{}, err
		}
		_, err := fx.Store(db).Query(ctx, `SELECT * FROM items WHERE id = $1`, in.ID)
		return oke.OK(in), err
	})

func Bind(app *oke.App) {
	app.Handle(oke.GET("/items/{id}"), Get)
	app.Handle(oke.POST("/export"), Stream)
	app.Handle(oke.GET("/feed"), Live)
	app.Handle(oke.POST("/read"), ReadOnly)
}
