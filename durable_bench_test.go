package oke_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

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

// BenchmarkTenStepsPaired measures the same two cases as BenchmarkTenSteps
// (plain and durable) in one run, alternating blocks of 100 requests of
// each, so that other work on the machine weighs on both alike. Each side
// has its own app, made afresh every 1 000 of its runs, off the clock. It
// reports the median over blocks of each side's ns per request and of the
// ratio durable/plain of neighbouring blocks; ns/op is per pair of blocks.
func BenchmarkTenStepsPaired(b *testing.B) {
	const block = 100
	w := &discard{h: http.Header{}}
	type side struct {
		path string
		app  *oke.App
		runs int
	}
	plain, durable := &side{path: "/plain", app: tenStepApp(b)}, &side{path: "/durable", app: tenStepApp(b)}
	run := func(s *side) time.Duration {
		if s.runs >= 1000 {
			s.app, s.runs = tenStepApp(b), 0
		}
		s.runs += block
		start := time.Now()
		for range block {
			r, _ := http.NewRequest("POST", s.path, http.NoBody)
			s.app.ServeHTTP(w, r)
		}
		return time.Since(start)
	}
	var ps, ds, ratios []float64
	for b.Loop() {
		p, d := run(plain), run(durable)
		ps = append(ps, float64(p)/block)
		ds = append(ds, float64(d)/block)
		ratios = append(ratios, float64(d)/float64(p))
	}
	b.ReportMetric(median(ps), "plain-ns/req")
	b.ReportMetric(median(ds), "durable-ns/req")
	b.ReportMetric(median(ratios), "ratio")
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[len(v)/2]
}

func tenStepApp(b *testing.B) *oke.App {
	app := oke.New(oke.Config{SweepInterval: -1, PollInterval: -1, Logger: quiet()})
	b.Cleanup(func() { app.Close(context.Background()) })
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
