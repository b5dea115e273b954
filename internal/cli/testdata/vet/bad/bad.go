// Package bad is a durable flow with problems for oke vet to find: the
// fixture of internal/cli's vet tests.
package bad

import (
	"context"
	"fmt"
	"time"

	"github.com/okengine/oke"
)

type In struct{ Order string }

var Flow = oke.NewFlow("bad.checkout", oke.Options{Durable: true},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[struct{}], error) {
		at := time.Now()
		if _, err := oke.Step(ctx, fmt.Sprintf("charge at %d", at.Unix()), func(ctx context.Context) (bool, error) {
			return true, nil
		}); err != nil {
			return oke.Response[struct{}]{}, err
		}
		if err := fx.Emit(ctx, "order.paid", in); err != nil {
			return oke.Response[struct{}]{}, err
		}
		//oke:ignore the console's progress feed: at least once is fine
		fx.Emit(ctx, "order.progress", in)
		return oke.OK(struct{}{}), nil
	})
