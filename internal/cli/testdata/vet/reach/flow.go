// Package reach is a durable flow that reaches time.Now through a helper of
// another package: oke vet follows it across the package boundary.
package reach

import (
	"context"

	"github.com/okengine/oke"
	"github.com/okengine/oke/internal/cli/testdata/vet/reach/clock"
)

type In struct{}
type Out struct{ At string }

var Flow = oke.NewFlow("reach.flow", oke.Options{Durable: true},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		return oke.OK(Out{At: clock.Stamp()}), nil
	})
