package journal

import (
	"testing"
	"time"

	"github.com/okengine/oke/driver"
)

// TestWaiting: a run waits for a signal exactly when its last saved step is
// a wait's first step (its deadline), not yet followed by its outcome.
func TestWaiting(t *testing.T) {
	until := time.Date(2026, 12, 3, 4, 5, 6, 0, time.UTC)
	wait := driver.Step{Seq: 1, Name: "approval", Result: []byte(`{"signal":"approval","until":"2026-12-03T04:05:06Z"}`)}
	for _, tc := range []struct {
		name   string
		steps  []driver.Step
		signal string
	}{
		{"no steps", nil, ""},
		{"the wait's deadline is the last step", []driver.Step{wait}, "approval"},
		{"the outcome follows it", []driver.Step{wait, {Seq: 2, Name: OutcomeStep("approval"), Result: []byte(`{"received":false}`)}}, ""},
		{"a step result with more fields", []driver.Step{{Seq: 1, Name: "x", Result: []byte(`{"signal":"a","until":"2026-12-03T04:05:06Z","n":1}`)}}, ""},
		{"a step result of another shape", []driver.Step{{Seq: 1, Name: "x", Result: []byte(`"approval"`)}}, ""},
		{"a declared failure", []driver.Step{{Seq: 1, Name: "x", Failure: []byte(`{"status":402}`)}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			signal, got, ok := Waiting(tc.steps)
			if signal != tc.signal || ok != (tc.signal != "") || (ok && !got.Equal(until)) {
				t.Fatalf("Waiting = %q, %v, %v; want %q", signal, got, ok, tc.signal)
			}
		})
	}
}
