// Package nondurable: flows that are not durable may do everything the
// rules report in a durable one. Nothing here is reported.
package nondurable

import (
	"context"
	"fmt"
	"math/rand"
	"net/http"
	"os"
	"time"

	"clock"
	"deep"

	"github.com/google/uuid"
	"github.com/okengine/oke"
)

var db oke.DB

type In struct{ Tags map[string]int }
type Out struct{ Keys []string }

func work(ctx context.Context) (int, error) { return 0, nil }

func everything(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
	fx.Emit(ctx, "x", nil)
	fx.Store(db).Exec(ctx, `INSERT INTO t VALUES (1)`)
	_ = time.Now()
	_ = rand.Intn(3)
	_ = uuid.NewString()
	oke.Step(ctx, "at "+time.Now().String(), work)
	for k := range in.Tags {
		oke.Step(ctx, fmt.Sprintf("tag %s", k), work)
	}
	go fx.Emit(ctx, "y", nil)
	helper(ctx, fx)
	_ = clock.Stamp() + deep.Env() + os.Getenv("X") + deep.Mode
	http.Get("http://example.com")
	a, b := make(chan int), make(chan int)
	select {
	case <-a:
	case <-b:
	}
	var keys []string
	for k := range in.Tags {
		keys = append(keys, k)
	}
	_ = deep.Keys(in.Tags)
	return oke.OK(Out{Keys: keys}), nil
}

func helper(ctx context.Context, fx *oke.Fx) { fx.Emit(ctx, "z", nil) }

var (
	Plain   = oke.NewFlow("nondurable.plain", oke.Options{}, everything)
	Off     = oke.NewFlow("nondurable.off", oke.Options{Durable: false}, everything)
	Literal = oke.NewFlow("nondurable.literal", oke.Options{Description: "not durable"},
		func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
			fx.Emit(ctx, "x", nil)
			_ = time.Now()
			go fx.Emit(ctx, "y", nil)
			return oke.OK(Out{}), nil
		})
)

// Not a flow at all.
func NotAFlow(ctx context.Context, fx *oke.Fx) {
	fx.Emit(ctx, "x", nil)
	_ = time.Now()
}
