package journal

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/memory"
	"github.com/okengine/oke/internal/token"
)

func TestRunIDsAreUniqueAndSortByCreation(t *testing.T) {
	seen := make(map[string]bool)
	prev := ""
	for range 1000 {
		id := token.RunID()
		if !strings.HasPrefix(id, "run_") || seen[id] {
			t.Fatalf("run ID %q: want a new ID starting with run_", id)
		}
		seen[id] = true
		ms := strings.TrimPrefix(id, "run_")[:11] // hex milliseconds, 11 digits until the year 2527
		if prev != "" && ms < prev {
			t.Fatalf("run ID %q goes back in time from %q", id, prev)
		}
		prev = ms
	}
	before := time.Now().UnixMilli()
	id := token.RunID()
	after := time.Now().UnixMilli()
	ms, err := strconv.ParseInt(strings.TrimPrefix(id, "run_")[:11], 16, 64)
	if err != nil || ms < before-1 || ms > after+1 { // the wall clock's and the monotonic clock's rounding
		t.Errorf("run ID %q: time %d (%v), want between %d and %d", id, ms, err, before, after)
	}
}

func TestStepTimesAreWallTimesInOrder(t *testing.T) {
	ctx := context.Background()
	d := memory.New()
	run, err := d.CreateRun(ctx, driver.Run{ID: token.RunID(), Flow: "f", Owner: "o"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	x := Start(testPool(t), d, run, nil, "o", time.Minute, nil)
	defer x.Stop()
	for _, name := range []string{"a", "b"} {
		if _, _, err := x.Step(ctx, name, func(context.Context) ([]byte, []byte, error) {
			time.Sleep(2 * time.Millisecond)
			return []byte(`1`), nil, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	after := time.Now()
	_, steps, err := d.GetRun(ctx, run.ID)
	if err != nil || len(steps) != 2 {
		t.Fatalf("GetRun: %d steps, %v", len(steps), err)
	}
	last := before.Add(-time.Millisecond) // the wall clock's and the monotonic clock's rounding
	for _, s := range steps {
		if s.StartedAt.Before(last) || !s.FinishedAt.After(s.StartedAt) || s.FinishedAt.After(after.Add(time.Millisecond)) {
			t.Errorf("step %q ran %v – %v; want in order between %v and %v", s.Name, s.StartedAt, s.FinishedAt, before, after)
		}
		if s.Attempts != 1 {
			t.Errorf("step %q: %d attempts, want 1", s.Name, s.Attempts)
		}
		last = s.FinishedAt
	}
}

// A step's time begins where the execution's previous save ended (or where
// the execution began): code between two steps counts toward the later one,
// and a step that follows another at once starts where it finished.
func TestStepTimeBeginsAtTheExecutionsPreviousSave(t *testing.T) {
	ctx := context.Background()
	d := memory.New()
	run, err := d.CreateRun(ctx, driver.Run{ID: token.RunID(), Flow: "f", Owner: "o"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	x := Start(testPool(t), d, run, nil, "o", time.Minute, nil)
	defer x.Stop()
	step := func(name string, d time.Duration) {
		t.Helper()
		if _, _, err := x.Step(ctx, name, func(context.Context) ([]byte, []byte, error) {
			time.Sleep(d)
			return []byte(`1`), nil, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(20 * time.Millisecond) // the flow's own code before its first step
	step("a", 0)
	step("b", 0)
	time.Sleep(20 * time.Millisecond) // and between two steps
	step("c", 0)
	_, steps, err := d.GetRun(ctx, run.ID)
	if err != nil || len(steps) != 3 {
		t.Fatalf("GetRun: %d steps, %v", len(steps), err)
	}
	if got := steps[0].FinishedAt.Sub(steps[0].StartedAt); got < 20*time.Millisecond {
		t.Errorf("first step took %v; want the 20 ms since the execution began counted", got)
	}
	for i := 1; i < 3; i++ {
		if !steps[i].StartedAt.Equal(steps[i-1].FinishedAt) {
			t.Errorf("step %q started %v; want where %q finished, %v", steps[i].Name, steps[i].StartedAt, steps[i-1].Name, steps[i-1].FinishedAt)
		}
	}
	if got := steps[2].FinishedAt.Sub(steps[2].StartedAt); got < 20*time.Millisecond {
		t.Errorf("step c took %v; want the 20 ms of code before it counted", got)
	}
}

// TestStepAttemptsCountExecutionsThatBeganTheStep: the first step an
// execution runs (the one after the saved ones) has as many attempts as
// executions began it — the driver's Run.NextAttempts, which counts pick-ups
// after a lapse, including one cut off between two steps —; every later
// step of the execution has 1.
func TestStepAttemptsCountExecutionsThatBeganTheStep(t *testing.T) {
	for _, c := range []struct {
		name string
		// cutOff: executions that died before this one, each after saving
		// this many new steps.
		cutOff []int
		want   []int // attempts of steps 1..4 once this execution saved them
	}{
		{"first execution", nil, []int{1, 1, 1, 1}},
		{"cut off in step 1", []int{0}, []int{2, 1, 1, 1}},
		{"cut off in step 1 twice", []int{0, 0}, []int{3, 1, 1, 1}},
		{"cut off after step 2", []int{2}, []int{1, 1, 2, 1}},
		{"cut off after step 1, then in step 2", []int{1, 0}, []int{1, 3, 1, 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			d := memory.New()
			run := func(x *Exec, from, to int) {
				t.Helper()
				for seq := from; seq <= to; seq++ {
					_, _, err := x.Step(ctx, "step "+strconv.Itoa(seq), func(context.Context) ([]byte, []byte, error) {
						return []byte(`1`), nil, nil
					})
					if err != nil {
						t.Fatalf("step %d: %v", seq, err)
					}
				}
			}
			// Each dead execution held the run with a lease that already
			// ended, so the next one takes it over at once.
			r, err := d.CreateRun(ctx, driver.Run{ID: "run-1", Flow: "f", Owner: "o0"}, -time.Second)
			if err != nil {
				t.Fatal(err)
			}
			x, saved := Start(testPool(t), d, r, nil, "o0", time.Minute, nil), 0
			for i, n := range c.cutOff {
				run(x, saved+1, saved+n)
				x.Stop()
				saved += n
				owner := "o" + strconv.Itoa(i+1)
				r, steps, err := d.AcquireRun(ctx, "run-1", owner, -time.Second)
				if err != nil {
					t.Fatal(err)
				}
				x = Start(testPool(t), d, r, steps, owner, time.Minute, nil)
			}
			run(x, 1, 4)
			x.Stop()
			_, steps, err := d.GetRun(ctx, "run-1")
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, s := range steps {
				got = append(got, s.Attempts)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("attempts of steps 1..4 = %v, want %v", got, c.want)
			}
		})
	}
}

// TestRepeatedStepNameIsAMismatch: a name taken before in the execution is
// refused, whether the names are still scanned or kept in a map, and a
// name that only looks alike (same length, first and last byte) is not.
func TestRepeatedStepNameIsAMismatch(t *testing.T) {
	for _, c := range []struct {
		name   string
		before int    // distinct steps taken first
		repeat string // then this name
		dup    bool
	}{
		{"first name again", 3, "step 0", true},
		{"last name again", 3, "step 2", true},
		{"look-alike is new", 3, "sXep 0", false},
		{"a new name whose hash a taken one has is new", 3, hashTwin("step 1"), false},
		{"a repeat after a hash twin was taken", 0, "", true}, // see hashTwin below
		{"repeat among many", 40, "step 5", true},
		{"repeat of a name kept after the scan", 40, "step 33", true},
		{"new name among many", 40, "step 40", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			d := memory.New()
			r, err := d.CreateRun(ctx, driver.Run{ID: "run-1", Flow: "f", Owner: "o"}, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			x := Start(testPool(t), d, r, nil, "o", time.Minute, nil)
			defer x.Stop()
			step := func(name string) error {
				_, _, err := x.Step(ctx, name, func(context.Context) ([]byte, []byte, error) { return []byte(`1`), nil, nil })
				return err
			}
			for i := range c.before {
				if err := step("step " + strconv.Itoa(i)); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
			}
			if c.repeat == "" { // a name, its hash twin, then the name again
				twin := hashTwin("refund")
				for _, n := range []string{"refund", twin} {
					if err := step(n); err != nil {
						t.Fatalf("step %q: %v", n, err)
					}
				}
				c.repeat = twin
			}
			err = step(c.repeat)
			var m *MismatchError
			if got := errors.As(err, &m); got != c.dup {
				t.Errorf("step %q after %d steps: err = %v; want a MismatchError: %v", c.repeat, c.before, err, c.dup)
			}
		})
	}
}

// hashTwin returns another step name with the same nameHash as name, so the
// tests reach the scan behind the hash.
func hashTwin(name string) string {
	for i := 0; ; i++ {
		if twin := "twin " + strconv.Itoa(i); nameHash(twin) == nameHash(name) && twin != name {
			return twin
		}
	}
}
