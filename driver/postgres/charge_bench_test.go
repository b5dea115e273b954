package postgres_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/okengine/oke"
)

// BenchmarkKeyedCharge is a keyed request of a flow that inserts a charge
// through Fx.Tx, each with a fresh Idempotency-Key, served in process (no
// socket for HTTP) on one Postgres connection at a time: what oke and the
// driver cost per request in each claim mode, round trips included. Run
// with -benchmem; the allocations are oke's, pgx's and net/http's test
// request's.
func BenchmarkKeyedCharge(b *testing.B) {
	for _, m := range benchClaimModes {
		b.Run(m.name, func(b *testing.B) {
			app := benchChargeApp(b, m.mode)
			post := func(i int) {
				r := httptest.NewRequest(http.MethodPost, "/charges", strings.NewReader(`{"Amount":100}`))
				r.Header.Set("Idempotency-Key", fmt.Sprintf("bench-key-%016d", i))
				r.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				app.ServeHTTP(w, r)
				if w.Code != http.StatusCreated {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
			}
			post(-1) // prepare the statements
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU(b)
			for i := 0; i < b.N; i++ {
				post(i)
			}
			b.ReportMetric(float64(processCPU(b)-cpu0)/1e3/float64(b.N), "cpu-µs/op")
		})
	}
}

// processCPU is the CPU time (user and system) the process has used so
// far: per request, less swayed than ns/op by the round trips' waits and
// by what else the machine runs. It is the whole process's, the test's
// own goroutines and the pool's included.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchClaimModes are the claim modes the charge benchmarks compare.
var benchClaimModes = []struct {
	name string
	mode oke.Idempotency
}{
	{"claim-first", oke.Idempotency{Mode: oke.ModeRequired, Claim: oke.ClaimFirst}},
	{"claim-in-tx", oke.Idempotency{Mode: oke.ModeRequired, Claim: oke.ClaimInTx}},
}

// benchChargeApp is an app on a fresh driver with POST /charges, a flow
// that inserts a charge through Fx.Tx under idempotency mode, started, and
// closed when b ends.
func benchChargeApp(b *testing.B, mode oke.Idempotency) *oke.App {
	d := newDriver(b)
	table := chargesTable(b, d)
	app := oke.New(oke.Config{Driver: d, SweepInterval: -1, PollInterval: -1})
	app.Handle(oke.POST("/charges"), oke.NewFlow("bench.charge", oke.Options{Idempotency: mode},
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
	return app
}
