package oke_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/okengine/oke"
)

// benchApp binds the same charge handler twice: once with idempotency off,
// once auto, on the memory driver.
func benchApp(b *testing.B) *oke.App {
	var n atomic.Int64
	do := func(ctx context.Context, in ChargeIn, fx *oke.Fx) (oke.Response[Charge], error) {
		id := "ch_" + strconv.FormatInt(n.Add(1), 10)
		fx.Raw(ctx, "insert", func(context.Context) error { return nil })
		return oke.Created(Charge{ID: id, Amount: in.Amount, Currency: in.Currency}, "/charges/"+id), nil
	}
	app := oke.New(oke.Config{SweepInterval: -1, Logger: quiet()})
	b.Cleanup(func() { app.Close(context.Background()) })
	app.Handle(oke.POST("/plain"), oke.NewFlow("bench.plain", oke.Options{Idempotency: oke.Off}, do))
	app.Handle(oke.POST("/keyed"), oke.NewFlow("bench.keyed", oke.Options{}, do))
	if err := app.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	return app
}

// discard is a ResponseWriter that keeps nothing, so the benchmark measures
// oke and not the recorder.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(int)             {}

const benchBody = `{"amount":1000,"currency":"usd"}`

// BenchmarkPOST compares the same handler without idempotency (plain), with
// a fresh Idempotency-Key per request (keyed: claim + complete), and a retry
// of one key (replay).
func BenchmarkPOST(b *testing.B) {
	app := benchApp(b)
	run := func(b *testing.B, path string, key func(i int64) string) {
		b.ReportAllocs()
		var seq atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			w := &discard{h: http.Header{}}
			body := strings.NewReader(benchBody)
			r := httptest.NewRequest("POST", path, body)
			for pb.Next() {
				body.Reset(benchBody)
				r.Body = http.NoBody
				r.Body = readCloser{body}
				clear(w.h)
				if key != nil {
					r.Header.Set("Idempotency-Key", key(seq.Add(1)))
				}
				app.ServeHTTP(w, r)
			}
		})
	}
	b.Run("plain", func(b *testing.B) { run(b, "/plain", nil) })
	b.Run("keyed", func(b *testing.B) {
		run(b, "/keyed", func(i int64) string { return "bench-key-" + strconv.FormatInt(i, 10) + "-000000" })
	})
	b.Run("replay", func(b *testing.B) {
		r := httptest.NewRequest("POST", "/keyed", strings.NewReader(benchBody))
		r.Header.Set("Idempotency-Key", "bench-replay-key-0001")
		app.ServeHTTP(httptest.NewRecorder(), r)
		run(b, "/keyed", func(int64) string { return "bench-replay-key-0001" })
	})
}

type readCloser struct{ *strings.Reader }

func (readCloser) Close() error { return nil }
