package withtests

import (
	"context"
	"testing"

	"github.com/okengine/oke"
)

func TestFlow(t *testing.T) {
	oke.NewFlow("withtests.test", oke.Options{Durable: true},
		func(ctx context.Context, in struct{}, fx *oke.Fx) (oke.Response[string], error) {
			return oke.OK(""), fx.Emit(ctx, "tested", nil)
		})
}
