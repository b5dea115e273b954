// Command depot is a fixture of clientgen's tests: flows whose types live in
// package main, which no client can import, so oke gen client copies them —
// embedded structs (one unexported, through a pointer), a generic type, a
// recursive type, maps, pointers, a type with MarshalText and one with
// MarshalJSON, unexported and "-" fields.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"

	"github.com/okengine/oke"
)

var db *sql.DB

// Base is what every record has.
type Base struct {
	ID      string    `json:"id"`
	Created time.Time `json:"created"`
}

type meta struct {
	Note string `json:"note,omitempty"`
}

// Money is an amount in a currency.
type Money struct {
	Amount   int64  `json:"amount"`
	Currency string `json:"currency,omitempty"`
}

// code is written as text.
type code [2]byte

func (c code) MarshalText() ([]byte, error) { return c[:], nil }

// raw writes its own JSON.
type raw struct{ v any }

func (r raw) MarshalJSON() ([]byte, error) { return json.Marshal(r.v) }

// Crate is stored in the depot.
type Crate struct {
	Base
	*meta
	Label  string           `json:"label"`
	Price  Money            `json:"price"`
	Parts  []Crate          `json:"parts,omitempty"`
	Attrs  map[string]Money `json:"attrs"`
	Code   code             `json:"code"`
	Raw    raw              `json:"raw"`
	Weight float64          `json:",omitempty"`
	Skip   string           `json:"-"`
	secret string
}

// Page is one page of a list.
type Page[T any] struct {
	Items []T     `json:"items"`
	Next  *string `json:"next,omitempty"`
}

type storeIn struct {
	Crate Crate `json:"crate"`
	Keep  bool  `json:"keep"`
}

type listIn struct {
	Cursor string `json:"cursor"`
	Limit  int    `json:"limit"`
}

var store = oke.NewFlow("depot.store", oke.Options{},
	func(ctx context.Context, in storeIn, fx *oke.Fx) (oke.Response[Crate], error) {
		_, err := fx.Store(db).Exec(ctx, `INSERT INTO crates (label) VALUES ($1)`, in.Crate.Label)
		return oke.Created(in.Crate, ""), err
	})

var list = oke.NewFlow("depot.list", oke.Options{},
	func(ctx context.Context, in listIn, fx *oke.Fx) (oke.Response[Page[Crate]], error) {
		rows, err := fx.Store(db).Query(ctx, `SELECT label FROM crates WHERE id > $1 LIMIT $2`, in.Cursor, in.Limit)
		if err != nil {
			return oke.Response[Page[Crate]]{}, err
		}
		rows.Close()
		return oke.OK(Page[Crate]{}), nil
	})

func main() {
	app := oke.New(oke.Config{})
	app.Handle(oke.POST("/crates"), store)
	app.Handle(oke.GET("/crates"), list)
}
