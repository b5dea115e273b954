package oke_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/memory"
)

// TestParallelStepErrors: a plain error in a step started with Go is not
// saved, and neither is any step started after it (their Wait says why);
// a step started with Go cannot take steps of its own or sleep.
func TestParallelStepErrors(t *testing.T) {
	d := memory.New()
	var later, nested, sleep error
	app := newApp(t, oke.Config{Driver: d}, func(app *oke.App) {
		app.Handle(oke.POST("/p"), oke.NewFlow("par.errors", oke.Options{Durable: true},
			func(ctx context.Context, in noIn, fx *oke.Fx) (oke.Response[int], error) {
				first := oke.Go(ctx, "fails", func(ctx context.Context) (int, error) {
					return 0, errors.New("provider down")
				})
				second := oke.Go(ctx, "after it", func(ctx context.Context) (int, error) {
					_, nested = oke.Step(ctx, "inner", func(context.Context) (int, error) { return 1, nil })
					sleep = oke.Sleep(ctx, "nap", 0)
					return 2, nil
				})
				_, err := first.Wait(ctx)
				_, later = second.Wait(ctx)
				return oke.OK(0), err
			}))
	})
	w := do(app, "POST", "/p", "")
	if w.Code != 500 {
		t.Fatalf("the flow returned the step's plain error: %d %s, want 500", w.Code, w.Body)
	}
	if !errors.Is(later, oke.ErrEarlierStepUnsaved) {
		t.Errorf("the later step's Wait = %v, want ErrEarlierStepUnsaved", later)
	}
	if nested == nil || !strings.Contains(nested.Error(), "cannot take steps of its own") {
		t.Errorf("a step inside a step started with Go: %v", nested)
	}
	if sleep == nil || !strings.Contains(sleep.Error(), "cannot sleep") {
		t.Errorf("a sleep inside a step started with Go: %v", sleep)
	}
	runs, _ := d.ListRuns(context.Background(), driver.RunFilter{}, 0)
	if len(runs) != 1 || runs[0].Steps != 0 {
		t.Fatalf("runs %+v: want one run with no saved step", runs)
	}
}

// TestParallelOutsideADurableFlow: Go and First run their functions in a
// plain flow too, without a journal.
func TestParallelOutsideADurableFlow(t *testing.T) {
	var ran atomic.Int32
	app := newApp(t, oke.Config{}, func(app *oke.App) {
		app.Handle(oke.POST("/p"), oke.NewFlow("par.plain", oke.Options{Idempotency: oke.Off},
			func(ctx context.Context, in noIn, fx *oke.Fx) (oke.Response[int], error) {
				a := oke.Go(ctx, "a", func(context.Context) (int, error) { ran.Add(1); return 1, nil })
				b := oke.Go(ctx, "b", func(context.Context) (int, error) { ran.Add(1); return 2, nil })
				if err := oke.WaitAll(ctx, a, b); err != nil {
					return oke.Response[int]{}, err
				}
				_, c, err := oke.First(ctx, "c", func(context.Context) (int, error) { return 3, nil })
				x, _ := a.Wait(ctx)
				y, _ := b.Wait(ctx)
				return oke.OK(x + y + c), err
			}))
	})
	if w := do(app, "POST", "/p", ""); w.Code != 200 || strings.TrimSpace(w.Body.String()) != "6" || ran.Load() != 2 {
		t.Fatalf("%d %s, ran %d", w.Code, w.Body, ran.Load())
	}
}
