package postgres_test

import (
	"errors"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/postgres"
	"github.com/okengine/oke/internal/pgtest"
)

// TestRetentionDeletesFinishedRunsOnly: with WithRetention, Sweep deletes
// runs that finished longer ago than the retention, with their steps and the
// business keys they claimed; running and sleeping runs stay.
func TestRetentionDeletesFinishedRunsOnly(t *testing.T) {
	url, _ := server(t)
	pgtest.Need(t, 2*pgtest.DriverConns(testPool))
	base := newDriver(t)
	d := openDriver(t, url, testPool, postgres.WithSchema(base.Schema()), postgres.WithRetention(time.Millisecond))
	ctx := t.Context()
	start := func(id string) {
		t.Helper()
		if _, err := d.CreateRun(ctx, driver.Run{ID: id, Flow: "f", Tenant: "t", Principal: "p", Owner: "o-" + id}, time.Minute); err != nil {
			t.Fatalf("CreateRun %s: %v", id, err)
		}
		if err := d.SaveStep(ctx, id, "o-"+id, driver.Step{Seq: 1, Name: "s", Result: []byte(`1`), Attempts: 1}); err != nil {
			t.Fatalf("SaveStep %s: %v", id, err)
		}
	}
	start("run-completed")
	start("run-failed")
	start("run-running")
	start("run-sleeping")
	if got, err := d.ClaimKey(ctx, "order:1", "run-completed"); err != nil || got != "run-completed" {
		t.Fatalf("ClaimKey: %q %v", got, err)
	}
	for id, f := range map[string]driver.Finish{
		"run-completed": {Status: driver.RunCompleted, Result: &driver.Response{Status: 200, Body: []byte(`{}`)}},
		"run-failed":    {Status: driver.RunFailed, Error: "boom"},
		"run-sleeping":  {Status: driver.RunSleeping, WakeAt: time.Now().Add(time.Hour)},
	} {
		if err := d.FinishRun(ctx, id, "o-"+id, f); err != nil {
			t.Fatalf("FinishRun %s: %v", id, err)
		}
	}
	time.Sleep(20 * time.Millisecond) // past the 1 ms retention

	// Without a retention, Sweep keeps every run.
	if _, err := base.Sweep(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := base.GetRun(ctx, "run-completed"); err != nil {
		t.Fatalf("a driver without WithRetention deleted a run: %v", err)
	}

	if _, err := d.Sweep(ctx, 0); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"run-completed", "run-failed"} {
		if _, _, err := d.GetRun(ctx, id); !errors.Is(err, driver.ErrNotFound) {
			t.Errorf("finished %s after the sweep: err = %v, want ErrNotFound", id, err)
		}
	}
	for _, id := range []string{"run-running", "run-sleeping"} {
		if _, steps, err := d.GetRun(ctx, id); err != nil || len(steps) != 1 {
			t.Errorf("unfinished %s after the sweep: %d steps, err = %v; want it kept with its step", id, len(steps), err)
		}
	}
	// The deleted run's claim went with it: a new run may claim the key.
	if got, err := d.ClaimKey(ctx, "order:1", "run-running"); err != nil || got != "run-running" {
		t.Fatalf("ClaimKey after the claiming run was deleted: %q %v, want run-running", got, err)
	}
}
