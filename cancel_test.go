package oke_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/memory"
)

// TestCancel: a sleeping run is cancelled — failed with the 409 RunCancelled
// envelope, its later steps never run; a run an execution holds is refused
// with ErrRunRunning and goes on; a finished run is ErrRunFinished; an
// unknown one driver.ErrNotFound.
func TestCancel(t *testing.T) {
	d := memory.New()
	var woke atomic.Int32
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	app := newApp(t, oke.Config{Driver: d}, func(app *oke.App) {
		app.Handle(oke.POST("/nap"), oke.NewFlow("t.nap", oke.Options{Durable: true},
			func(ctx context.Context, in noIn, fx *oke.Fx) (oke.Response[int], error) {
				if err := oke.Sleep(ctx, "nap", time.Hour); err != nil {
					return oke.Response[int]{}, err
				}
				woke.Add(1)
				return oke.OK(1), nil
			}))
		app.Handle(oke.POST("/busy"), oke.NewFlow("t.busy", oke.Options{Durable: true},
			func(ctx context.Context, in noIn, fx *oke.Fx) (oke.Response[int], error) {
				n, err := oke.Step(ctx, "wait", func(context.Context) (int, error) {
					entered <- struct{}{}
					<-release
					return 1, nil
				})
				return oke.OK(n), err
			}))
	})
	if w := do(app, "POST", "/nap", `{}`); w.Code != http.StatusNoContent {
		t.Fatalf("POST /nap: %d %s, want 204 (parked)", w.Code, w.Body)
	}
	sleeping := onlyRun(t, d, "t.nap")
	if sleeping.Status != driver.RunSleeping {
		t.Fatalf("t.nap run is %v, want sleeping", sleeping.Status)
	}
	got, err := app.Cancel(t.Context(), sleeping.ID)
	if err != nil {
		t.Fatalf("Cancel of a sleeping run: %v", err)
	}
	if got.Status != driver.RunFailed || got.Result == nil || got.Result.Status != http.StatusConflict {
		t.Fatalf("cancelled run: %v, result %+v; want failed with a 409", got.Status, got.Result)
	}
	var env struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(got.Result.Body, &env); err != nil || env.Error.Code != "RunCancelled" {
		t.Fatalf("cancelled run's result body %s (%v), want the RunCancelled envelope", got.Result.Body, err)
	}
	if _, err := app.Cancel(t.Context(), sleeping.ID); !errors.Is(err, oke.ErrRunFinished) {
		t.Errorf("Cancel of a cancelled run: %v, want ErrRunFinished", err)
	}

	// A held run: refused while its step runs, then it completes.
	done := make(chan int, 1)
	go func() { done <- do(app, "POST", "/busy", `{}`).Code }()
	<-entered
	busy := onlyRun(t, d, "t.busy")
	_, err = app.Cancel(t.Context(), busy.ID)
	if !errors.Is(err, oke.ErrRunRunning) || !strings.Contains(err.Error(), "cancel it again when it parks") {
		t.Errorf("Cancel of a held run: %v, want ErrRunRunning naming what to do", err)
	}
	close(release)
	if code := <-done; code != http.StatusOK {
		t.Fatalf("POST /busy after a refused cancel: %d, want 200", code)
	}
	if _, err := app.Cancel(t.Context(), busy.ID); !errors.Is(err, oke.ErrRunFinished) {
		t.Errorf("Cancel of a completed run: %v, want ErrRunFinished", err)
	}
	if _, err := app.Cancel(t.Context(), "run_missing"); !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("Cancel of a missing run: %v, want driver.ErrNotFound", err)
	}
	if woke.Load() != 0 {
		t.Errorf("the cancelled run's code after its sleep ran %d times, want 0", woke.Load())
	}
}

// TestCancelNeedsACanceller: a journal without CancelRun says so.
func TestCancelNeedsACanceller(t *testing.T) {
	app := newApp(t, oke.Config{Driver: noCancel{memory.New()}}, func(app *oke.App) {})
	if _, err := app.Cancel(t.Context(), "run_1"); !errors.Is(err, oke.ErrCannotCancel) {
		t.Fatalf("Cancel on a journal without CancelRun: %v, want ErrCannotCancel", err)
	}
}

// noCancel is a driver and journal without the optional RunCanceller.
type noCancel struct{ *memory.Driver }

func (n noCancel) CancelRun() {} // shadows memory's: not the RunCanceller method

func onlyRun(t *testing.T, d *memory.Driver, flow string) driver.Run {
	t.Helper()
	runs, err := d.ListRuns(t.Context(), driver.RunFilter{Flow: flow}, 0)
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs of %s: %v, %v; want one", flow, runs, err)
	}
	return runs[0]
}
