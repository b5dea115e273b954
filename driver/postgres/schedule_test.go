package postgres_test

import (
	"context"
	"encoding/json"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/internal/cron"
)

// TestScheduleTwoInstancesStartOneRunPerTick: two apps, each on a driver of
// its own on one schema (two instances of one app), reach every tick at
// once — one fake clock wakes both loops — and create its run concurrently:
// each tick has one run, executed once. Then both stop, three ticks pass,
// and both start again together: the catch-up (CatchUpLatest) starts the
// newest missed tick once.
func TestScheduleTwoInstancesStartOneRunPerTick(t *testing.T) {
	twoDrivers(t)
	da := newDriver(t)
	db := sameSchema(t, da)
	clock := cron.NewFake(time.Date(2026, 1, 1, 10, 0, 30, 0, time.UTC))
	var mu sync.Mutex
	ran := map[int64]int{}
	start := func(d driver.Driver) *oke.App {
		flow := oke.NewFlow("sched.pg", oke.Options{}, func(ctx context.Context, in oke.Tick, fx *oke.Fx) (oke.Response[bool], error) {
			mu.Lock()
			ran[in.At.Unix()]++
			mu.Unlock()
			return oke.OK(true), nil
		})
		app := oke.New(oke.Config{Driver: d, PollInterval: 10 * time.Millisecond, SweepInterval: -1})
		app.Handle(oke.Cron("*/5 * * * *"), flow)
		cron.UseClock(app, clock)
		if err := app.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		return app
	}
	stop := func(app *oke.App) {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if err := app.Close(ctx); err != nil {
			t.Error(err)
		}
	}
	settle := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), wait)
		defer cancel()
		if err := clock.WaitFor(ctx, 2); err != nil {
			t.Fatalf("both schedule loops did not wait for their next tick: %v", err)
		}
		deadline := time.Now().Add(wait)
		for {
			runs, err := da.ListRuns(t.Context(), driver.RunFilter{Flow: "sched.pg", Status: []driver.RunStatus{driver.RunRunning, driver.RunSleeping}}, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(runs) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d scheduled runs still unfinished after %v", len(runs), wait)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	check := func(want ...string) {
		t.Helper()
		runs, err := da.ListRuns(t.Context(), driver.RunFilter{Flow: "sched.pg"}, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range runs {
			var in oke.Tick
			if err := json.Unmarshal(r.Input, &in); err != nil {
				t.Fatal(err)
			}
			got = append(got, in.At.UTC().Format("15:04"))
			if r.Status != driver.RunCompleted {
				t.Errorf("run %s: %v", r.ID, r.Status)
			}
		}
		sort.Strings(got)
		if len(got) != len(want) {
			t.Fatalf("runs of the ticks %v, want exactly %v", got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("runs of the ticks %v, want exactly %v", got, want)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		for tick, n := range ran {
			if n != 1 {
				t.Errorf("tick %v ran the flow %d times, want 1", time.Unix(tick, 0).UTC(), n)
			}
		}
	}

	a, b := start(da), start(db)
	settle()
	for _, m := range []int{5, 10, 15} {
		clock.Set(time.Date(2026, 1, 1, 10, m, 0, 0, time.UTC))
		settle()
	}
	check("10:05", "10:10", "10:15")

	stop(a)
	stop(b)
	clock.Set(time.Date(2026, 1, 1, 10, 32, 0, 0, time.UTC)) // 10:20, 10:25, 10:30 missed
	a, b = start(da), start(db)
	defer stop(a)
	defer stop(b)
	settle()
	check("10:05", "10:10", "10:15", "10:30")
}
