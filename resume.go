package oke

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/internal/deadline"
)

// ErrRunDead is the cause of the 503 OutcomeUnknown a request gets for a
// run that is dead-lettered (driver.RunDead): it will not go on until an
// operator resumes it (App.Resume).
var ErrRunDead = errors.New("oke: the run is dead-lettered; an operator must resume it (oke runs resume)")

// ErrCannotResume is returned by Resume when the driver cannot resume runs
// (it does not implement driver.RunResumer).
var ErrCannotResume = errors.New("oke: the driver cannot resume runs (it does not implement driver.RunResumer)")

// Resume makes a dead-lettered run (driver.RunDead, see
// Config.DeadLetterAfter) due again, with its failed pick-ups (Strikes) and
// its next step's attempts reset: the scheduler picks it up at once, and it
// goes on from its last saved step with the step's whole retry policy ahead
// of it. It returns the run as resumed, or an error wrapping
// driver.ErrRunNotDead (the run is not dead), driver.ErrNotFound or
// ErrCannotResume. Fix what killed the run first: a run that fails the same
// way goes dead again after as many pick-ups.
func (a *App) Resume(ctx context.Context, runID string) (driver.Run, error) {
	if a.journal == nil {
		return driver.Run{}, fmt.Errorf("resume %s: %w", runID, ErrNotDurable)
	}
	run, err := resumeRun(ctx, a.journal, a.cfg.StoreTimeout, runID)
	if err == nil {
		a.wake()
	}
	return run, err
}

// ResumeRun is App.Resume on a journal of its own, for tools that open a
// store without an app (oke runs resume -data DIR): the run is due again,
// and the next app started on the store picks it up.
func ResumeRun(ctx context.Context, j driver.Journal, runID string) (driver.Run, error) {
	return resumeRun(ctx, j, DefaultStoreTimeout, runID)
}

// resumeRun resumes run runID on j, the store call bounded by timeout.
func resumeRun(ctx context.Context, j driver.Journal, timeout time.Duration, runID string) (driver.Run, error) {
	r, ok := j.(driver.RunResumer)
	if !ok {
		return driver.Run{}, fmt.Errorf("resume %s: %w", runID, ErrCannotResume)
	}
	ctx, end := deadline.Call(ctx, timeout, "resume_run")
	run, err := r.ResumeRun(ctx, runID)
	err = end(err)
	if err != nil {
		return driver.Run{}, fmt.Errorf("resume %s: %w", runID, err)
	}
	return run, nil
}
