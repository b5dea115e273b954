package admin_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/okengine/oke/admin"
	"github.com/okengine/oke/driver"
)

// TestViewRunMarksStepsAtTheSameTime: steps that ran at the same time (one
// began before the one before it finished: oke.Go) are marked Concurrent;
// steps one after another (each begins when the one before ended) are not.
func TestViewRunMarksStepsAtTheSameTime(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	run := driver.Run{ID: "run_1", Flow: "f", Status: driver.RunCompleted, CreatedAt: t0, UpdatedAt: at(100)}
	steps := []driver.Step{
		{Seq: 1, Name: "a", Attempts: 1, StartedAt: at(0), FinishedAt: at(10)},
		{Seq: 2, Name: "price", Attempts: 1, StartedAt: at(10), FinishedAt: at(40)}, // oke.Go
		{Seq: 3, Name: "stock", Attempts: 1, StartedAt: at(10), FinishedAt: at(40)}, // oke.Go, finished first, saved after
		{Seq: 4, Name: "d", Attempts: 1, StartedAt: at(41), FinishedAt: at(50)},     // when the last save of the two ended
		{Seq: 5, Name: "e", Attempts: 1, StartedAt: at(60), FinishedAt: at(70)},     // after a wait
	}
	steps[2].FinishedAt = at(41)
	v := admin.ViewRun(run, steps)
	want := []bool{false, true, true, false, false}
	for i, s := range v.Steps {
		if s.Concurrent != want[i] {
			t.Errorf("step %d %s: concurrent %v, want %v", s.Seq, s.Name, s.Concurrent, want[i])
		}
	}
}

// TestViewRunTimingIsRounded: a run's timing adds its steps' durations; the
// sums are whole microseconds, as each step's ms is, never float noise
// ("runMs": 2.4509999999999996).
func TestViewRunTimingIsRounded(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	at := func(us int) time.Time { return t0.Add(time.Duration(us) * time.Microsecond) }
	run := driver.Run{ID: "run_1", Flow: "f", Status: driver.RunCompleted, CreatedAt: t0, UpdatedAt: at(10000)}
	steps := []driver.Step{
		{Seq: 1, Name: "a", Attempts: 1, StartedAt: at(0), FinishedAt: at(817)},
		{Seq: 2, Name: "b", Attempts: 1, StartedAt: at(1000), FinishedAt: at(1817)},
		{Seq: 3, Name: "c", Attempts: 1, StartedAt: at(2100), FinishedAt: at(2917)},
	}
	v := admin.ViewRun(run, steps)
	b, err := json.Marshal(v.Timing)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"queueMs":0,"runMs":2.451,"waitMs":0.466,"totalMs":10}`; string(b) != want {
		t.Errorf("timing %s, want %s", b, want)
	}
}
