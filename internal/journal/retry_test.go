package journal

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/memory"
	"github.com/okengine/oke/internal/token"
)

// After ParkRetry every later step returns ErrRetrying, and Retrying says
// what the run waits for; the step's Pending attempts start from the run's
// NextAttempts, which a release for the retry carries to the next pick-up.
func TestParkRetryStopsLaterStepsAndCarriesTheAttempts(t *testing.T) {
	ctx := context.Background()
	d := memory.New()
	run, err := d.CreateRun(ctx, driver.Run{ID: token.RunID(), Flow: "f", Owner: "o"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	x := Start(testPool(t), d, run, nil, "o", time.Minute, nil)
	_, p, err := x.Next(ctx, "flaky")
	if err != nil || p.Attempts != 1 {
		t.Fatalf("Next: attempts %d, %v; want 1", p.Attempts, err)
	}
	if x.Retrying() != nil {
		t.Fatal("Retrying before ParkRetry")
	}
	cause := errors.New("timeout")
	wake := time.Now().Add(-time.Millisecond)
	x.ParkRetry(RetryPark{Step: "flaky", WakeAt: wake, Attempts: 2, Err: cause})
	if r := x.Retrying(); r == nil || r.Step != "flaky" || r.Attempts != 2 || !errors.Is(r.Err, cause) {
		t.Fatalf("Retrying = %+v", r)
	}
	if _, _, err := x.Next(ctx, "later"); !errors.Is(err, ErrRetrying) {
		t.Fatalf("Next after ParkRetry: %v, want ErrRetrying", err)
	}
	x.Stop()
	if err := d.FinishRun(ctx, run.ID, "o", driver.Finish{Status: driver.RunRunning, WakeAt: wake, NextAttempts: 2}); err != nil {
		t.Fatal(err)
	}
	run, steps, err := d.AcquireRun(ctx, run.ID, "o2", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	y := Start(testPool(t), d, run, steps, "o2", time.Minute, nil)
	defer y.Stop()
	if _, p, err := y.Next(ctx, "flaky"); err != nil || p.Attempts != 3 {
		t.Fatalf("Next after the parked retry: attempts %d, %v; want 3", p.Attempts, err)
	}
}
