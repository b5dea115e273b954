package oke

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/internal/deadline"
)

// Cancel ends a durable run that no execution is running now — one that
// sleeps, or waits to be picked up (enqueued, parked for a retry, or whose
// holder's lease lapsed) — as failed, with the 409 RunCancelled envelope as
// its result: its remaining steps never run, and a retry of the request
// that started it gets that answer. A holder whose lease lapsed and that
// comes back is fenced out (it can save nothing more). It returns the run
// as cancelled.
//
// A run an execution holds right now is not cut off mid-step: Cancel
// returns ErrRunRunning, and the run can be cancelled when it parks. A
// finished run is ErrRunFinished; an unknown one driver.ErrNotFound.
func (a *App) Cancel(ctx context.Context, runID string) (driver.Run, error) {
	if a.journal == nil {
		return driver.Run{}, fmt.Errorf("cancel %s: %w", runID, ErrNotDurable)
	}
	run, err := cancelRun(ctx, a.journal, a.cfg.StoreTimeout, runID)
	if err == nil {
		a.ended.done(runID) // results.go: waiters for its result
	}
	return run, err
}

// CancelRun is App.Cancel on a journal of its own, for tools that open a
// store without an app (oke runs cancel -data DIR). The run's flow need not
// be bound.
func CancelRun(ctx context.Context, j driver.Journal, runID string) (driver.Run, error) {
	return cancelRun(ctx, j, DefaultStoreTimeout, runID)
}

// cancelRun cancels run runID on j, the store call bounded by timeout.
func cancelRun(ctx context.Context, j driver.Journal, timeout time.Duration, runID string) (driver.Run, error) {
	c, ok := j.(driver.RunCanceller)
	if !ok {
		return driver.Run{}, fmt.Errorf("cancel %s: %w", runID, ErrCannotCancel)
	}
	e := ErrRunCancelled
	ctx, end := deadline.Call(ctx, timeout, "cancel_run")
	run, err := c.CancelRun(ctx, runID, driver.Response{Status: e.Status, ContentType: "application/json",
		Body: envelopeBytes(e)}, "cancelled: "+e.Message)
	err = end(err)
	switch {
	case errors.Is(err, driver.ErrRunHeld):
		return driver.Run{}, fmt.Errorf("cancel %s: %w", runID, ErrRunRunning)
	case errors.Is(err, driver.ErrRunFinished):
		return driver.Run{}, fmt.Errorf("cancel %s: %w", runID, ErrRunFinished)
	case err != nil:
		return driver.Run{}, fmt.Errorf("cancel %s: %w", runID, err)
	}
	return run, nil
}
