// Package bad is a durable flow that breaks oke vet's rules, with the real
// oke package: the fixture of cmd/oke-vet's test.
package bad

import (
	"context"
	"time"

	"github.com/okengine/oke"
)

type In struct{ Tags map[string]int }

var Flow = oke.NewFlow("bad.flow", oke.Options{Durable: true},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[struct{}], error) {
		if err := fx.Emit(ctx, "bad.started", in); err != nil {
			return oke.Response[struct{}]{}, err
		}
		started := time.Now()
		for k := range in.Tags {
			if _, err := oke.Step(ctx, "tag "+k, func(ctx context.Context) (int, error) { return 0, nil }); err != nil {
				return oke.Response[struct{}]{}, err
			}
		}
		go fx.Emit(ctx, "bad.took", time.Since(started).String())
		return oke.OK(struct{}{}), nil
	})
