package oke_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

	"github.com/okengine/oke"
)

type stepOut struct {
	N    int    `json:"n"`
	Name string `json:"name"`
}

func work(i int) stepOut { return stepOut{N: i, Name: "step " + strconv.Itoa(i)} }

// BenchmarkTenSteps compares one run of a durable flow with ten steps (each
// result saved as JSON in the memory driver's journal) with the same ten
// function calls plus the JSON encoding of their results, without a journal.
//
// The memory driver keeps every finished run, so the benchmark starts a fresh
// app (and driver) every 1 000 runs, off the clock: otherwise it would
// measure the garbage collector scanning an ever larger journal.
func BenchmarkTenSteps(b *testing.B) {
	for _, path := range []string{"/plain", "/durable", "/plain-nostep", "/durable-nostep"} {
		b.Run(path[1:], func(b *testing.B) {
			b.ReportAllocs()
			w := &discard{h: http.Header{}}
			app := tenStepApp(b)
			n := 0
			for b.Loop() {
				if n++; n%1000 == 0 {
					b.StopTimer()
					app = tenStepApp(b)
					b.StartTimer()
				}
				r, _ := http.NewRequest("POST", path, http.NoBody)
				app.ServeHTTP(w, r)
			}
		})
	}
}

func tenStepApp(b *testing.B) *oke.App {
	app := oke.New(oke.Config{SweepInterval: -1, PollInterval: -1, Logger: quiet()})
	app.Handle(oke.POST("/durable"), oke.NewFlow("bench.durable", oke.Options{Durable: true, Idempotency: oke.Off},
		func(ctx context.Context, in struct{}, fx *oke.Fx) (oke.Response[int], error) {
			sum := 0
			for i := 0; i < 10; i++ {
				out, err := oke.Step(ctx, stepNames[i], func(context.Context) (stepOut, error) { return work(i), nil })
				if err != nil {
					return oke.Response[int]{}, err
				}
				sum += out.N
			}
			return oke.OK(sum), nil
		}))
	app.Handle(oke.POST("/plain"), oke.NewFlow("bench.calls", oke.Options{Idempotency: oke.Off},
		func(ctx context.Context, in struct{}, fx *oke.Fx) (oke.Response[int], error) {
			sum := 0
			for i := 0; i < 10; i++ {
				out := work(i)
				if _, err := json.Marshal(out); err != nil {
					return oke.Response[int]{}, err
				}
				sum += out.N
			}
			return oke.OK(sum), nil
		}))
	// The same two with no step at all: what a run costs on its own.
	app.Handle(oke.POST("/durable-nostep"), oke.NewFlow("bench.durable0", oke.Options{Durable: true, Idempotency: oke.Off},
		func(ctx context.Context, in struct{}, fx *oke.Fx) (oke.Response[int], error) { return oke.OK(0), nil }))
	app.Handle(oke.POST("/plain-nostep"), oke.NewFlow("bench.calls0", oke.Options{Idempotency: oke.Off},
		func(ctx context.Context, in struct{}, fx *oke.Fx) (oke.Response[int], error) { return oke.OK(0), nil }))
	if err := app.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	return app
}

var stepNames = func() []string {
	s := make([]string, 10)
	for i := range s {
		s[i] = "step " + strconv.Itoa(i)
	}
	return s
}()
