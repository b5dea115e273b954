package oke_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
)

// A flow bound with oke.Cron runs at each tick of its schedule, once per
// tick across every instance that shares the store. Its input is the tick.
func ExampleCron() {
	sweep := oke.NewFlow("nightly.sweep", oke.Options{},
		func(ctx context.Context, in oke.Tick, fx *oke.Fx) (oke.Response[int], error) {
			// Work "up to in.At", not "up to now": a run that starts late
			// (a catch-up after downtime) does the same work.
			return oke.OK(0), nil
		})

	app := oke.New(oke.Config{}) // the memory driver keeps a journal
	// In production: oke.Cron("0 3 * * *").In(paris), for 03:00 every night.
	app.Handle(oke.Cron("@every 1s"), sweep)
	if err := app.Start(context.Background()); err != nil {
		panic(err)
	}
	defer app.Close(context.Background())

	// Wait for the first tick's run (at most a second away) to finish.
	var run driver.Run
	for run.Status != driver.RunCompleted {
		time.Sleep(10 * time.Millisecond)
		runs, _ := app.Journal().ListRuns(context.Background(), driver.RunFilter{Flow: "nightly.sweep"}, 1)
		if len(runs) == 1 {
			run = runs[0]
		}
	}
	fmt.Println(run.Flow, run.Status, strings.HasPrefix(run.DedupeKey, "cron:nightly.sweep:"))

	schedules, _ := app.Schedules(context.Background())
	for _, s := range schedules {
		fmt.Println(s.Flow, s.Spec, s.Location, "catch-up:", s.CatchUp)
	}
	// Output:
	// nightly.sweep completed true
	// nightly.sweep @every 1s UTC catch-up: latest
}
