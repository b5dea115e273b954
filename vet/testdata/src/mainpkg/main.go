// Package main: variables set by start-up code (func main, init) are set
// again the same way by the next process; reading them in a flow is not a
// finding. A variable assigned elsewhere is.
package main

import (
	"context"

	"github.com/okengine/oke"
)

type In struct{}
type Out struct{ N int }

var (
	db      oke.DB // opened in main
	workers int    // set in init
	hits    int    // counted by a handler
)

func init() { workers = 4 }

func handle() { hits++ }

var Flow = oke.NewFlow("mainpkg.flow", oke.Options{Durable: true},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		fx.Store(db).QueryRow(ctx, `SELECT 1`)
		return oke.OK(Out{N: workers + hits}), nil // want `^read of package variable main.hits outside a step in durable flow "mainpkg.flow": it can change between pick-ups`
	})

func main() {
	db = struct{}{}
	handle()
}
