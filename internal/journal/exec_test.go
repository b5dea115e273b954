package journal

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/memory"
)

func TestRunIDsAreUniqueAndSortByCreation(t *testing.T) {
	seen := make(map[string]bool)
	prev := ""
	for range 1000 {
		id := NewRunID()
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
	id := NewRunID()
	after := time.Now().UnixMilli()
	ms, err := strconv.ParseInt(strings.TrimPrefix(id, "run_")[:11], 16, 64)
	if err != nil || ms < before-1 || ms > after+1 { // the wall clock's and the monotonic clock's rounding
		t.Errorf("run ID %q: time %d (%v), want between %d and %d", id, ms, err, before, after)
	}
}

func TestStepTimesAreWallTimesInOrder(t *testing.T) {
	ctx := context.Background()
	d := memory.New()
	run, err := d.CreateRun(ctx, driver.Run{ID: NewRunID(), Flow: "f", Owner: "o"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	x := Start(d, run, nil, "o", time.Minute, nil)
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
