package oketest_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/oketest"
)

type shipIn struct {
	Order string `json:"order"`
}

// shipFlow: a label, a day's durable sleep, a notification; each step
// counts its runs.
func shipFlow(label, notify *atomic.Int32) *oke.Flow[shipIn, string] {
	return oke.NewFlow("shop.ship", oke.Options{Durable: true},
		func(ctx context.Context, in shipIn, fx *oke.Fx) (oke.Response[string], error) {
			if _, err := oke.Step(ctx, "label", func(context.Context) (string, error) {
				label.Add(1)
				return "lbl_" + in.Order, nil
			}); err != nil {
				return oke.Response[string]{}, err
			}
			if err := oke.Sleep(ctx, "a day", 24*time.Hour); err != nil {
				return oke.Response[string]{}, err
			}
			_, err := oke.Step(ctx, "notify", func(context.Context) (bool, error) {
				notify.Add(1)
				return true, nil
			})
			return oke.Created("shipped", ""), err
		})
}

// TestDurableCrashAndFakeClock: a crash right after step 1 and a day's
// sleep, with no real waiting: each step runs once.
func TestDurableCrashAndFakeClock(t *testing.T) {
	var label, notify atomic.Int32
	d := oketest.NewDurable(t, oke.Config{}, func(app *oke.App) {
		app.Handle(oke.POST("/ship"), shipFlow(&label, &notify))
	})
	d.CrashAfter("shop.ship", 1)
	if r := oketest.Call(t, d.App, "POST", "/ship", `{"order":"o_1"}`, "Idempotency-Key", oketest.Key()); r.Status != 503 {
		t.Fatalf("the crashed execution's request: %d %s, want 503", r.Status, r.Body)
	}
	<-d.Crashed()
	run := d.Runs(t, "shop.ship")[0]
	if steps := d.Steps(t, run.ID); len(steps) != 1 || steps[0].Name != "label" || run.Status != driver.RunRunning || run.Owner == "" {
		t.Fatalf("after the crash: run %s owned by %q, steps %+v; want running, held by the dead owner, with label saved", run.Status, run.Owner, steps)
	}
	d.Clock.Advance(d.Lease()) // the dead owner's lease lapses
	d.AwaitStatus(t, "shop.ship", driver.RunSleeping)
	d.Clock.Advance(24 * time.Hour)
	run = d.AwaitFlow(t, "shop.ship")
	if run.Status != driver.RunCompleted || label.Load() != 1 || notify.Load() != 1 {
		t.Fatalf("run %s (%s); label ran %d, notify %d; want completed, once each", run.Status, run.Error, label.Load(), notify.Load())
	}
	if run.Attempts != 3 {
		t.Errorf("run picked up %d times, want 3 (the request, after the crash, after the sleep)", run.Attempts)
	}
}

// TestDurableSleepWaitsForTheClock: without Advance the sleep does not end,
// however long real time goes on.
func TestDurableSleepWaitsForTheClock(t *testing.T) {
	var label, notify atomic.Int32
	d := oketest.NewDurable(t, oke.Config{}, func(app *oke.App) {
		app.Handle(oke.POST("/ship"), shipFlow(&label, &notify))
	})
	if r := oketest.Call(t, d.App, "POST", "/ship", `{"order":"o_2"}`); r.Status != 204 {
		t.Fatalf("%d %s, want 204", r.Status, r.Body)
	}
	d.AwaitStatus(t, "shop.ship", driver.RunSleeping)
	d.Clock.Advance(23 * time.Hour)
	time.Sleep(20 * time.Millisecond) // ten polls of the scheduler
	if run := d.Runs(t, "shop.ship")[0]; run.Status != driver.RunSleeping || notify.Load() != 0 {
		t.Fatalf("an hour before the wake time: run %s, notify ran %d", run.Status, notify.Load())
	}
	d.Clock.Advance(time.Hour)
	if run := d.AwaitFlow(t, "shop.ship"); run.Status != driver.RunCompleted || notify.Load() != 1 {
		t.Fatalf("run %s, notify ran %d", run.Status, notify.Load())
	}
}
