package journal

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/memory"
	"github.com/okengine/oke/internal/token"
)

// TestPatch: what a patch check decides, from the steps a run saved before
// this execution, and what it saves.
func TestPatch(t *testing.T) {
	const marker = PatchPrefix + "p"
	for _, c := range []struct {
		name       string
		saved      []string // the run's journal before the execution
		before     []string // steps the code takes before the check
		deprecated bool
		want       bool
		wantSaved  []string // the journal after the check
	}{
		{"new run: saves the marker, new code", nil, []string{"a"}, false, true, []string{"a", marker}},
		{"old run past the point: old code", []string{"a", "b"}, []string{"a"}, false, false, []string{"a", "b"}},
		{"run that saved the marker: new code", []string{"a", marker, "c"}, []string{"a"}, false, true, []string{"a", marker, "c"}},
		{"old run short of the point: new code", []string{"a"}, []string{"a"}, false, true, []string{"a", marker}},
		{"deprecated, new run: saves nothing", nil, []string{"a"}, true, true, []string{"a"}},
		{"deprecated, run with the marker: consumed", []string{"a", marker, "c"}, []string{"a"}, true, true, []string{"a", marker, "c"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			d := memory.New()
			run, err := d.CreateRun(ctx, driver.Run{ID: token.RunID(), Flow: "f", Owner: "o"}, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			for i, n := range c.saved {
				if err := d.SaveStep(ctx, run.ID, "o", driver.Step{Seq: i + 1, Name: n, Result: []byte("1")}); err != nil {
					t.Fatal(err)
				}
			}
			_, saved, err := d.GetRun(ctx, run.ID)
			if err != nil {
				t.Fatal(err)
			}
			x := Start(testPool(t), d, run, saved, "o", time.Minute, nil)
			defer x.Stop()
			for _, n := range c.before {
				if _, _, err := x.Step(ctx, n, func(context.Context) ([]byte, []byte, error) { return []byte("1"), nil, nil }); err != nil {
					t.Fatal(err)
				}
			}
			got, err := x.Patch(ctx, "p", c.deprecated)
			if err != nil || got != c.want {
				t.Fatalf("Patch = %v, %v; want %v", got, err, c.want)
			}
			// A second check in the same execution answers the same, and
			// saves nothing more.
			if again, err := x.Patch(ctx, "p", c.deprecated); err != nil || again != got {
				t.Fatalf("second Patch = %v, %v; want %v", again, err, got)
			}
			_, steps, err := d.GetRun(ctx, run.ID)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, s := range steps {
				names = append(names, s.Name)
			}
			if !slices.Equal(names, c.wantSaved) {
				t.Fatalf("journal %q, want %q", names, c.wantSaved)
			}
			// The code's next step follows: on the old branch it is the
			// saved "b" (no mismatch), on the new one "c".
			next := "c"
			if !got {
				next = "b"
			}
			if _, _, err := x.Step(ctx, next, func(context.Context) ([]byte, []byte, error) { return []byte("1"), nil, nil }); err != nil {
				t.Fatalf("step %q after the check: %v", next, err)
			}
		})
	}
}
