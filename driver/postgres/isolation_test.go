package postgres_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
)

// TestTwoAppsOnOneSchema: two services with different flows, each with its
// own driver (its own pool, its own LISTEN) on one schema, as two processes
// would be: every run of each completes after exactly one pick-up — its own
// scheduler's, after its sleep. Before, either scheduler took any due run and
// released one of the other's flows for the retry delay (an hour here).
func TestTwoAppsOnOneSchema(t *testing.T) {
	twoDrivers(t)
	da := newDriver(t)
	db := sameSchema(t, da)
	var ran [2]atomic.Int32
	start := func(i int, d driver.Driver, flow string) *oke.App {
		app := oke.New(oke.Config{Driver: d, PollInterval: 10 * time.Millisecond, RetryDelay: time.Hour, SweepInterval: -1,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		app.Handle(oke.POST("/remind"), oke.NewFlow(flow, oke.Options{Durable: true},
			func(ctx context.Context, in struct{ N int }, fx *oke.Fx) (oke.Response[int], error) {
				if err := oke.Sleep(ctx, "nap", 200*time.Millisecond); err != nil {
					return oke.Response[int]{}, err
				}
				_, err := oke.Step(ctx, "after", func(context.Context) (int, error) { ran[i].Add(1); return in.N, nil })
				return oke.Created(in.N, ""), err
			}))
		if err := app.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			app.Close(ctx)
		})
		return app
	}
	apps := []*oke.App{start(0, da, "billing.remind"), start(1, db, "shipping.remind")}
	const perApp = 6
	for i, app := range apps {
		for n := range perApp {
			r := httptest.NewRequest(http.MethodPost, "/remind", strings.NewReader(fmt.Sprintf(`{"N":%d}`, n)))
			w := httptest.NewRecorder()
			app.ServeHTTP(w, r)
			// 204 while the run sleeps; 201 when the nap was over before
			// its sleep was saved (a loaded machine), which does not park.
			if w.Code != http.StatusNoContent && w.Code != http.StatusCreated {
				t.Fatalf("app %d: %d %s, want 204 (or 201 once the nap is over)", i, w.Code, w.Body)
			}
		}
	}
	deadline := time.Now().Add(wait)
	for {
		runs, err := da.ListRuns(t.Context(), driver.RunFilter{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		done := 0
		for _, r := range runs {
			if r.Status.Finished() {
				done++
			}
		}
		if done == 2*perApp {
			for _, r := range runs {
				// Created by its request, picked up by its own scheduler when
				// the sleep ended (or never parked, if saving the sleep took
				// longer than the nap): no other pick-up.
				if r.Status != driver.RunCompleted || r.Attempts > 2 {
					t.Errorf("run %s of %s: %s after %d pick-ups, want completed after at most 2", r.ID, r.Flow, r.Status, r.Attempts)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d runs finished: a scheduler holds the other app's runs", done, 2*perApp)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if ran[0].Load() != perApp || ran[1].Load() != perApp {
		t.Fatalf("the steps ran %d and %d times, want %d each", ran[0].Load(), ran[1].Load(), perApp)
	}
}
