// Package shop is a fixture of clientgen's tests: a flow for each shape of
// generated method — a required POST with an RPC binding too, GETs with
// path and query parameters, a read-only POST, a PUT with a path
// parameter and a 204, a wildcard path with a parameter the input lacks,
// a stream, a live feed, a webhook and an event (not generated), a flow
// whose name has no dot, and one whose output is in an internal package.
package shop

import (
	"context"
	"database/sql"
	"net/http"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/extract/clientgen/testdata/shop/internal/kinds"
)

var db *sql.DB

// Item is an item of the shop. Its Kind is from an internal package, but
// Item itself can be imported.
type Item struct {
	ID    string     `json:"id"`
	Name  string     `json:"name"`
	Price int64      `json:"price"`
	Kind  kinds.Kind `json:"kind,omitempty"`
	Added time.Time  `json:"added"`
}

// CreateIn is shop.create's input.
type CreateIn struct {
	Name  string `json:"name"`
	Price int64  `json:"price"`
}

// Create requires an Idempotency-Key.
var Create = oke.NewFlow("shop.create", oke.Options{Idempotency: oke.Required, Description: "Create an item."},
	func(ctx context.Context, in CreateIn, fx *oke.Fx) (oke.Response[Item], error) {
		var it Item
		err := fx.Store(db).QueryRow(ctx, `INSERT INTO items (name, price) VALUES ($1, $2) RETURNING id`, in.Name, in.Price).Scan(&it.ID)
		return oke.Created(it, "/items/"+it.ID), err
	})

// GetIn holds GET /items/{id}'s path parameter.
type GetIn struct {
	ID string `json:"id"`
}

// Get reads one item.
var Get = oke.NewFlow("shop.get", oke.Options{},
	func(ctx context.Context, in GetIn, fx *oke.Fx) (oke.Response[Item], error) {
		var it Item
		err := fx.Store(db).QueryRow(ctx, `SELECT id, name FROM items WHERE id = $1`, in.ID).Scan(&it.ID, &it.Name)
		return oke.OK(it), err
	})

// SearchIn is a search: in the query of GET /items, or the body of POST
// /search.
type SearchIn struct {
	Q        string     `json:"q"`
	Limit    int        `json:"limit,omitempty"`
	MinPrice *int64     `json:"minPrice"`
	InStock  bool       `json:"inStock"`
	Kind     kinds.Kind `json:"kind"`
	Tags     []string   `json:"tags"` // not a URL parameter
}

// Results are a search's answer.
type Results struct {
	Items []Item `json:"items"`
}

// Search only reads: its POST binding does not honor the header.
var Search = oke.NewFlow("shop.search", oke.Options{},
	func(ctx context.Context, in SearchIn, fx *oke.Fx) (oke.Response[Results], error) {
		rows, err := fx.Store(db).Query(ctx, `SELECT id FROM items WHERE name LIKE $1`, in.Q)
		if err != nil {
			return oke.Response[Results]{}, err
		}
		rows.Close()
		return oke.OK(Results{}), nil
	})

// TagIn is PUT /items/{itemId}/tags' input: the item from the path, the
// tag from the body.
type TagIn struct {
	ItemID string `json:"itemId"`
	Tag    string `json:"tag"`
}

// Tag writes and answers 204.
var Tag = oke.NewFlow("shop.tag", oke.Options{Idempotency: oke.Idempotency{TTL: "1h"}},
	func(ctx context.Context, in TagIn, fx *oke.Fx) (oke.Response[struct{}], error) {
		_, err := fx.Store(db).Exec(ctx, `INSERT INTO tags (item, tag) VALUES ($1, $2)`, in.ItemID, in.Tag)
		return oke.NoContent[struct{}](), err
	})

// FileIn names a file by its path; the shelf is only in the route.
type FileIn struct {
	Path string `json:"path"`
}

// File reads a file of a shelf.
var File = oke.NewFlow("shop.file", oke.Options{},
	func(ctx context.Context, in FileIn, fx *oke.Fx) (oke.Response[Item], error) {
		var it Item
		err := fx.Store(db).QueryRow(ctx, `SELECT id FROM files WHERE path = $1`, in.Path).Scan(&it.ID)
		return oke.OK(it), err
	})

// Dims answers a type of the internal package: the client copies it.
var Dims = oke.NewFlow("shop.dims", oke.Options{},
	func(ctx context.Context, in GetIn, fx *oke.Fx) (oke.Response[kinds.Dims], error) {
		var d kinds.Dims
		err := fx.Store(db).QueryRow(ctx, `SELECT w, h FROM dims WHERE id = $1`, in.ID).Scan(&d.W, &d.H)
		return oke.OK(d), err
	})

// Export streams lines.
var Export = oke.NewStream("shop.export", oke.Options{},
	func(ctx context.Context, in CreateIn, fx *oke.Fx, w http.ResponseWriter) error {
		_, err := w.Write([]byte("{\"line\":1}\n"))
		return err
	})

// Feed is a live feed.
var Feed = oke.NewLive("shop.feed", oke.Options{},
	func(ctx context.Context, _ struct{}, fx *oke.Fx, send func(oke.Event) error) error {
		return send(oke.Event{Name: "tick"})
	})

// Hook is a provider's webhook.
var Hook = oke.NewFlow("shop.hook", oke.Options{},
	func(ctx context.Context, in GetIn, fx *oke.Fx) (oke.Response[struct{}], error) {
		_, err := fx.Store(db).Exec(ctx, `INSERT INTO hooks (id) VALUES ($1)`, in.ID)
		return oke.OK(struct{}{}), err
	})

// Restock runs on an event.
var Restock = oke.NewFlow("shop.restock", oke.Options{},
	func(ctx context.Context, in GetIn, fx *oke.Fx) (oke.Response[struct{}], error) {
		_, err := fx.Store(db).Exec(ctx, `UPDATE items SET stock = stock + 1 WHERE id = $1`, in.ID)
		return oke.OK(struct{}{}), err
	})

// Health has a name without a dot: a method of the Client itself.
var Health = oke.NewFlow("health", oke.Options{Effects: []oke.Effect{}},
	func(ctx context.Context, _ struct{}, fx *oke.Fx) (oke.Response[map[string]string], error) {
		return oke.OK(map[string]string{"status": "ok"}), nil
	})

// Bind binds the flows.
func Bind(app *oke.App) {
	app.Handle(oke.POST("/items"), Create)
	app.Handle(oke.RPC(), Create)
	app.Handle(oke.GET("/items/{id}"), Get)
	app.Handle(oke.GET("/items"), Search)
	app.Handle(oke.POST("/search"), Search)
	app.Handle(oke.PUT("/items/{itemId}/tags"), Tag)
	app.Handle(oke.GET("/shelves/{shelf}/files/{path...}"), File)
	app.Handle(oke.GET("/items/{id}/dims"), Dims)
	app.Handle(oke.POST("/export"), Export)
	app.Handle(oke.GET("/feed"), Feed)
	app.Handle(oke.Webhook("/hooks/provider", "id"), Hook)
	app.Handle(oke.OnEvent("stock.low"), Restock)
	app.Handle(oke.GET("/healthz"), Health)
}
