package flows

import (
	"context"
	"encoding/json"
	"time"

	"github.com/okengine/oke"
)

// Base is embedded in Shapes: its fields are promoted.
type Base struct {
	Kind string `json:"kind"`
	Seq  int    // no tag: the Go name
}

// Extra is embedded through a pointer: its fields may be absent.
type Extra struct {
	Note string `json:"note"`
}

// Shapes has a field of every kind extract writes a schema for.
type Shapes struct {
	Base
	*Extra
	Name     string            `json:"name"`           // a required string
	Nick     string            `json:"nick,omitempty"` // optional
	Secret   string            `json:"-"`              // skipped
	hidden   string            // unexported: skipped
	Age      *int              `json:"age"`    // nullable
	Tags     []string          `json:"tags"`   // array or null
	Scores   map[string]uint16 `json:"scores"` // object or null
	At       time.Time         `json:"at"`     // a date-time string
	Raw      json.RawMessage   `json:"raw"`    // anything
	Any      any               `json:"any"`    // anything
	Count    int64             `json:"count,string"`
	Data     []byte            `json:"data"`
	Children []Shapes          `json:"children"` // a reference to itself
	Pair     [2]float64        `json:"pair"`
	Wait     time.Duration     `json:"wait"`
}

var _ = Shapes{}.hidden

// strictOptions returns the options of fixture.shapes: read through a
// function that returns them.
func strictOptions() oke.Options {
	return oke.Options{Idempotency: oke.Idempotency{Mode: oke.ModeRequired, TTL: "10m"}, Description: "Echo shapes."}
}

// Shaped echoes its input; its options come from strictOptions.
var Shaped = oke.NewFlow("fixture.shapes", strictOptions(),
	func(ctx context.Context, in Shapes, fx *oke.Fx) (oke.Response[Shapes], error) {
		return oke.OK(in), fx.Emit(ctx, "shapes", in)
	})

// packageOptions are fixture.generic's options, in a package variable.
var packageOptions = oke.Options{Idempotency: oke.Off, Durable: false}

// echo builds a flow from a generic helper.
func echo[T any](name string, opts oke.Options) *oke.Flow[T, T] {
	return oke.NewFlow(name, opts, func(ctx context.Context, in T, fx *oke.Fx) (oke.Response[T], error) {
		return oke.Accepted(in), fx.Emit(ctx, name, in)
	})
}

// BindShapes binds the flows of this file.
func BindShapes(app *oke.App) {
	app.Handle(oke.POST("/shapes"), Shaped)
	app.Handle(oke.POST("/generic"), echo[Base]("fixture.generic", packageOptions))
}
