package file

import (
	"context"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/drivertest"
)

// TestSignalAcrossRestart: a new app on the same folder continues a run
// parked in a wait when the signal comes.
func TestSignalAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	drivertest.RunSignalRestart(t, func(t *testing.T) driver.Driver { return open(t, dir) })
}

// TestSignalsSurviveCompactionAndReopen: signals, delivered or not, and the
// wake a send made, are in the log after a compaction and a reopen.
func TestSignalsSurviveCompactionAndReopen(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	d := open(t, dir)
	if _, err := d.CreateRun(ctx, driver.Run{ID: "run_1", Flow: "f", Input: []byte(`{}`), Owner: "me"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"k1", "k2"} {
		if _, err := d.SendSignal(ctx, driver.Signal{RunID: "run_1", Name: "go", Key: k, Payload: []byte(`"` + k + `"`)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, err := d.TakeSignal(ctx, "run_1", "me", "go", driver.Step{Seq: 1, Name: "wait (outcome)", Attempts: 1}); err != nil || !ok {
		t.Fatalf("TakeSignal: %v %v", ok, err)
	}
	if err := d.FinishRun(ctx, "run_1", "me", driver.Finish{Status: driver.RunSleeping, WakeAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if woke, err := d.WakeForSignal(ctx, "run_1", "go"); err != nil || !woke {
		t.Fatalf("WakeForSignal: %v %v", woke, err)
	}
	for _, compact := range []bool{false, true} {
		if compact {
			if err := d.Compact(); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		d = open(t, dir)
		list, err := d.Signals(ctx, "run_1")
		if err != nil || len(list) != 2 || list[0].Step != 1 || list[1].Step != 0 || string(list[1].Payload) != `"k2"` {
			t.Fatalf("compact %v: signals after reopen: %+v (%v)", compact, list, err)
		}
		run, steps, err := d.GetRun(ctx, "run_1")
		if err != nil || len(steps) != 1 || steps[0].Name != "wait (outcome)" {
			t.Fatalf("compact %v: steps %+v %v", compact, steps, err)
		}
		if run.Status != driver.RunSleeping || run.WakeAt.After(time.Now()) {
			t.Fatalf("compact %v: the woken run is %s until %v after reopen, want sleeping and due now", compact, run.Status, run.WakeAt)
		}
	}
}
