package drivertest

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/internal/cron"
)

// RunSchedules runs the rules of schedules (oke.Cron) end to end: apps on
// the driver under test, which must implement driver.Journal, with a fake
// clock that the tests move (no test waits for a real minute).
func RunSchedules(t *testing.T, newDriver func(t *testing.T) driver.Driver) {
	t.Helper()
	runRules(t, newDriver, scheduleRules)
}

var scheduleRules = []rowRule{
	{"ScheduleStartsOneRunPerTickAcrossTwoApps", testScheduleTwoApps},
	{"NewScheduleStartsWithItsNextTick", testScheduleNew},
	{"CatchUpLatestRunsTheNewestMissedTickOnce", catchUpRule(oke.CatchUpLatest, 6)},
	{"CatchUpSkipRunsNoMissedTick", catchUpRule(oke.CatchUpSkip)},
	{"CatchUpAllRunsTheNewestNMissedTicks", catchUpRule(oke.CatchUpAll(3), 4, 5, 6)},
	{"CatchUpAllRunsEveryMissedTickUpToN", catchUpRule(oke.CatchUpAll(10), 2, 3, 4, 5, 6)},
}

// schedT0 is the fake clock's start: 30 s before the tick 10:01.
var schedT0 = time.Date(2026, 1, 1, 10, 0, 30, 0, time.UTC)

// minute is the tick 10:00 + m minutes, the ticks of "* * * * *".
func minute(m int) time.Time { return time.Date(2026, 1, 1, 10, m, 0, 0, time.UTC) }

// schedHarness is apps on one driver with schedules on one fake clock.
type schedHarness struct {
	t     *testing.T
	d     driver.Driver
	jr    driver.Journal
	clock *cron.Fake
	mu    sync.Mutex
	ran   map[int64]int // tick (Unix) → executions of the flow's function
}

func newSchedHarness(t *testing.T, d driver.Driver) *schedHarness {
	jr, ok := d.(driver.Journal)
	if !ok {
		t.Fatalf("%T does not implement driver.Journal", d)
	}
	return &schedHarness{t: t, d: d, jr: jr, clock: cron.NewFake(schedT0), ran: map[int64]int{}}
}

const schedFlow = "sched.tick"

// app starts an app with "* * * * *" bound to the flow under policy p.
func (h *schedHarness) app(p oke.CatchUpPolicy) *oke.App {
	h.t.Helper()
	flow := oke.NewFlow(schedFlow, oke.Options{}, func(ctx context.Context, in oke.Tick, fx *oke.Fx) (oke.Response[string], error) {
		h.mu.Lock()
		h.ran[in.At.Unix()]++
		h.mu.Unlock()
		return oke.OK(in.At.UTC().Format(time.RFC3339)), nil
	})
	app := oke.New(oke.Config{Driver: h.d, PollInterval: 10 * time.Millisecond, SweepInterval: -1, Logger: quietLogger()})
	app.Handle(oke.Cron("* * * * *").CatchUp(p), flow)
	cron.UseClock(app, h.clock)
	if err := app.Start(context.Background()); err != nil {
		h.t.Fatalf("start app: %v", err)
	}
	h.t.Cleanup(func() { h.close(app) })
	return app
}

func (h *schedHarness) close(app *oke.App) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := app.Close(ctx); err != nil {
		h.t.Errorf("close app: %v", err)
	}
}

// settle waits until loops schedule loops wait for their next tick — so
// every run due by the fake clock has been created — and every run has
// finished.
func (h *schedHarness) settle(loops int) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.clock.WaitFor(ctx, loops); err != nil {
		h.t.Fatalf("the %d schedule loops did not all wait for a next tick: %v (waits armed: %v)", loops, err, h.clock.Waits())
	}
	eventually(h.t, "every scheduled run to finish", func() bool {
		for _, r := range h.runs() {
			if !r.Status.Finished() {
				return false
			}
		}
		return true
	})
}

func (h *schedHarness) runs() []driver.Run {
	runs, err := h.jr.ListRuns(context.Background(), driver.RunFilter{Flow: schedFlow}, 0)
	if err != nil {
		h.t.Fatal(err)
	}
	return runs
}

// check asserts that the journal holds exactly one completed run of each
// of the ticks (minutes past 10:00), each with the tick's dedupe key and
// input, and that each ran the flow's function once.
func (h *schedHarness) check(minutes ...int) {
	h.t.Helper()
	var got []string
	for _, r := range h.runs() {
		var in oke.Tick
		if err := json.Unmarshal(r.Input, &in); err != nil {
			h.t.Fatalf("run %s: input %s: %v", r.ID, r.Input, err)
		}
		if want := fmt.Sprintf("cron:%s:%d", schedFlow, in.At.Unix()); r.DedupeKey != want {
			h.t.Errorf("run %s: dedupe key %q, want %q", r.ID, r.DedupeKey, want)
		}
		if r.Status != driver.RunCompleted {
			h.t.Errorf("run %s (tick %v): %v, want completed", r.ID, in.At, r.Status)
		}
		got = append(got, in.At.UTC().Format("15:04"))
	}
	sort.Strings(got)
	var want []string
	for _, m := range minutes {
		want = append(want, minute(m).Format("15:04"))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		h.t.Fatalf("runs of the ticks %v, want exactly %v", got, want)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range minutes {
		if n := h.ran[minute(m).Unix()]; n != 1 {
			h.t.Errorf("the tick %s ran the flow %d times, want 1", minute(m).Format("15:04"), n)
		}
	}
}

// testScheduleTwoApps: two apps on one store reach each tick together (one
// fake clock wakes both loops at once); each tick starts one run, executed
// once.
func testScheduleTwoApps(t *testing.T, d driver.Driver) {
	h := newSchedHarness(t, d)
	h.app(oke.CatchUpLatest)
	h.app(oke.CatchUpLatest)
	h.settle(2)
	h.check()
	for m := 1; m <= 4; m++ {
		h.clock.Set(minute(m))
		h.settle(2)
		var ms []int
		for i := 1; i <= m; i++ {
			ms = append(ms, i)
		}
		h.check(ms...)
	}
}

// testScheduleNew: a schedule the store has never run starts with its next
// tick, whatever the policy: the ticks before the app's first start are not
// missed ones.
func testScheduleNew(t *testing.T, d driver.Driver) {
	h := newSchedHarness(t, d)
	h.clock.Set(minute(5).Add(30 * time.Second))
	h.app(oke.CatchUpAll(10))
	h.settle(1)
	h.check()
	if w := h.clock.Waits(); len(w) != 1 || !w[0].Equal(minute(6)) {
		t.Fatalf("the loop waits for %v, want the next tick %v", w, minute(6))
	}
	h.clock.Set(minute(6))
	h.settle(1)
	h.check(6)
}

// catchUpRule: an app runs the tick 10:01 and stops; five ticks pass with
// no app up (10:02–10:06); an app that starts at 10:06:30 with policy p
// starts the runs of the missed ticks want, and then goes on with 10:07.
func catchUpRule(p oke.CatchUpPolicy, want ...int) func(t *testing.T, d driver.Driver) {
	return func(t *testing.T, d driver.Driver) {
		h := newSchedHarness(t, d)
		first := h.app(p)
		h.settle(1)
		h.clock.Set(minute(1))
		h.settle(1)
		h.check(1)
		h.close(first)

		h.clock.Set(minute(6).Add(30 * time.Second))
		h.app(p)
		h.settle(1)
		h.check(append([]int{1}, want...)...)

		h.clock.Set(minute(7))
		h.settle(1)
		h.check(append(append([]int{1}, want...), 7)...)
	}
}
