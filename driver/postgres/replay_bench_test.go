package postgres_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/okengine/oke"
)

// BenchmarkReplay is a retry of one completed keyed charge (a flow that
// inserts through Fx.Tx), served in process on one Postgres connection at a
// time, in each claim mode: what a replay costs in oke and the driver, its
// round trips included. Run with -benchmem.
func BenchmarkReplay(b *testing.B) {
	for _, m := range []struct {
		name string
		mode oke.Idempotency
	}{
		{"claim-first", oke.Idempotency{Mode: oke.ModeRequired, Claim: oke.ClaimFirst}},
		{"claim-in-tx", oke.Idempotency{Mode: oke.ModeRequired, Claim: oke.ClaimInTx}},
	} {
		b.Run(m.name, func(b *testing.B) {
			d := newDriver(b)
			table := chargesTable(b, d)
			app := oke.New(oke.Config{Driver: d, SweepInterval: -1, PollInterval: -1})
			app.Handle(oke.POST("/charges"), oke.NewFlow("bench.charge", oke.Options{Idempotency: m.mode},
				func(ctx context.Context, in struct{ Amount int64 }, fx *oke.Fx) (oke.Response[map[string]int64], error) {
					id, err := txCharge(ctx, fx, table, in.Amount)
					if err != nil {
						return oke.Response[map[string]int64]{}, err
					}
					return oke.Created(map[string]int64{"id": id}, fmt.Sprint("/charges/", id)), nil
				}))
			if err := app.Start(b.Context()); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { app.Close(context.Background()) })
			r := httptest.NewRequest(http.MethodPost, "/charges", nil)
			r.Header.Set("Idempotency-Key", "bench-replay-key-0000001")
			r.Header.Set("Content-Type", "application/json")
			body := strings.NewReader(`{"Amount":100}`)
			w := httptest.NewRecorder()
			post := func(replayed bool) {
				body.Reset(`{"Amount":100}`)
				r.Body = readCloser{body}
				w.Body.Reset()
				clear(w.Header())
				app.ServeHTTP(w, r)
				if w.Code != http.StatusCreated || (w.Header().Get("Idempotent-Replayed") == "true") != replayed {
					b.Fatalf("%d %s (replayed %q)", w.Code, w.Body, w.Header().Get("Idempotent-Replayed"))
				}
			}
			post(false) // the charge
			post(true)  // its first replay prepares the statements
			post(true)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				post(true)
			}
		})
	}
}

type readCloser struct{ *strings.Reader }

func (readCloser) Close() error { return nil }
