package postgres_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
)

// TestConcurrentSaveStepOfOneSeqSavesItOnce: an owner's duplicate SaveStep
// calls racing each other (a retry that overlaps the first try) save the
// step once; the others get ErrStepOrder, never a raw unique violation.
func TestConcurrentSaveStepOfOneSeqSavesItOnce(t *testing.T) {
	d := newDriver(t)
	defer d.Close()
	const racers = 10
	for round := range 20 {
		id := "run-" + string(rune('a'+round))
		if _, err := d.CreateRun(t.Context(), driver.Run{ID: id, Flow: "f", Owner: "w"}, time.Minute); err != nil {
			t.Fatal(err)
		}
		errs := make([]error, racers)
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() {
				errs[i] = d.SaveStep(t.Context(), id, "w", driver.Step{Seq: 1, Name: "one", Result: []byte(`1`), Attempts: 1})
			})
		}
		wg.Wait()
		saved := 0
		for i, err := range errs {
			switch {
			case err == nil:
				saved++
			case !errors.Is(err, driver.ErrStepOrder):
				t.Fatalf("round %d: SaveStep %d: %v, want nil or ErrStepOrder", round, i, err)
			}
		}
		_, steps, err := d.GetRun(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if saved != 1 || len(steps) != 1 {
			t.Fatalf("round %d: %d calls saved, %d steps stored; want 1 and 1", round, saved, len(steps))
		}
	}
}
