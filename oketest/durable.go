package oketest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/memory"
)

// Clock is a fake clock for durable flows: durable sleeps, retry delays,
// leases and TTLs move when Advance says, not with time. It starts at the
// time it was made.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock that reads the time now until advanced.
func NewClock() *Clock { return &Clock{now: time.Now()} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (a durable sleep of d ends; a lease
// of d lapses). The scheduler of a Durable app sees it within a
// millisecond or two of real time.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Durable is an app for testing durable flows: the memory driver and the
// app on one fake Clock, a scheduler that looks every couple of
// milliseconds, and a switch that cuts an execution off right after a step
// is saved, as a crash (kill -9) would:
//
//	func TestShipRunsEachStepOnce(t *testing.T) {
//		d := oketest.NewDurable(t, oke.Config{}, func(app *oke.App) {
//			app.Handle(oke.POST("/ship"), ShipFlow) // steps "label", a sleep of a day, "notify"
//		})
//		d.CrashAfter("shop.ship", 1)      // the first execution dies once "label" is saved
//		oketest.Call(t, d.App, "POST", "/ship", `{"order":"o_1"}`)
//		d.Clock.Advance(d.Lease())        // its lease lapses: the scheduler resumes the run
//		d.AwaitStatus(t, "shop.ship", driver.RunSleeping)
//		d.Clock.Advance(24 * time.Hour)   // the sleep ends at once
//		run := d.AwaitFlow(t, "shop.ship")
//		// run.Status is completed; the flow's own counters show each step ran once
//	}
type Durable struct {
	App   *oke.App
	Clock *Clock
	// Journal is the app's journal (the memory driver, behind the crash
	// switch): read runs and steps with it.
	Journal driver.Journal

	j     *crashJournal
	lease time.Duration
}

// NewDurable returns a started app for durable flows with cfg as given,
// except: the driver is a new memory driver on the returned Clock (cfg.Driver
// must be nil), the app's Clock is that one, and the scheduler looks every
// 2 ms of real time (unless cfg.PollInterval is set). The app closes when
// the test ends.
func NewDurable(t testing.TB, cfg oke.Config, bind func(app *oke.App)) *Durable {
	t.Helper()
	if cfg.Driver != nil {
		t.Fatalf("oketest: NewDurable makes its own memory driver on its clock; leave Config.Driver nil")
	}
	clk := NewClock()
	j := &crashJournal{Driver: memory.New(memory.WithClock(clk.Now)), dead: map[string]bool{}}
	cfg.Driver = j
	cfg.Clock = clk.Now
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 2 * time.Millisecond
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 30 * time.Second
	}
	return &Durable{App: NewApp(t, cfg, bind), Clock: clk, Journal: j, j: j, lease: cfg.Lease}
}

// Lease is the app's lease: advance the clock by it after a crash, and the
// run's lease has lapsed.
func (d *Durable) Lease() time.Duration { return d.lease + time.Millisecond }

// CrashAfter arms the switch: the next execution of a run of flow that
// saves step n (counting from 1) dies right after that save — the step is
// in the journal, and the execution does nothing more: its later saves,
// lease renewals and the run's end are refused, as for a process that is
// gone. The run keeps its dead owner until its lease lapses (Clock.Advance
// by Lease), then the scheduler takes it and goes on from step n+1. The
// request that was running it gets the answer of a lost run (503). Crashed
// is closed when the switch has fired. One crash is armed at a time.
func (d *Durable) CrashAfter(flow string, n int) {
	d.j.mu.Lock()
	defer d.j.mu.Unlock()
	d.j.flow, d.j.step = flow, n
	d.j.fired = make(chan struct{})
}

// Crashed is closed once the armed crash (CrashAfter) has happened.
func (d *Durable) Crashed() <-chan struct{} {
	d.j.mu.Lock()
	defer d.j.mu.Unlock()
	return d.j.fired
}

// Runs returns the runs of flow, oldest first.
func (d *Durable) Runs(t testing.TB, flow string) []driver.Run {
	t.Helper()
	runs, err := d.Journal.ListRuns(context.Background(), driver.RunFilter{Flow: flow}, 0)
	if err != nil {
		t.Fatalf("oketest: list runs of %s: %v", flow, err)
	}
	return runs
}

// Steps returns the saved steps of run id, in order.
func (d *Durable) Steps(t testing.TB, id string) []driver.Step {
	t.Helper()
	_, steps, err := d.Journal.GetRun(context.Background(), id)
	if err != nil {
		t.Fatalf("oketest: get run %s: %v", id, err)
	}
	return steps
}

// AwaitFlow waits until flow has a run and its newest run has finished
// (completed or failed), and returns it. It fails the test after 30 s of
// real time: a run that waits for the clock must be given Clock.Advance
// first.
func (d *Durable) AwaitFlow(t testing.TB, flow string) driver.Run {
	t.Helper()
	return d.AwaitStatus(t, flow, driver.RunCompleted, driver.RunFailed)
}

// AwaitStatus waits until the newest run of flow is in one of statuses
// (e.g. driver.RunSleeping: parked, so that advancing the clock now ends
// its sleep), and returns it; it fails the test after 30 s of real time.
func (d *Durable) AwaitStatus(t testing.TB, flow string, statuses ...driver.RunStatus) driver.Run {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		runs := d.Runs(t, flow)
		if n := len(runs); n > 0 && slices.Contains(statuses, runs[n-1].Status) {
			return runs[n-1]
		}
		if time.Now().After(deadline) {
			last := "none"
			if len(runs) > 0 {
				r := runs[len(runs)-1]
				last = fmt.Sprintf("%s %s, wakes %s, owner %q", r.ID, r.Status, r.WakeAt.Format(time.RFC3339Nano), r.Owner)
			}
			t.Fatalf("oketest: no run of %s is %v after 30 s (newest: %s; the clock is at %s)", flow, statuses, last, d.Clock.Now().Format(time.RFC3339Nano))
		}
		time.Sleep(time.Millisecond)
	}
}

// crashJournal is the memory driver behind the crash switch.
type crashJournal struct {
	*memory.Driver
	mu    sync.Mutex
	flow  string // armed: a run of this flow saving step
	step  int
	fired chan struct{}
	dead  map[string]bool // owners whose execution died
}

func (j *crashJournal) isDead(owner string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.dead[owner]
}

func (j *crashJournal) SaveStep(ctx context.Context, id, owner string, step driver.Step) error {
	if j.isDead(owner) {
		return driver.ErrNotOwner
	}
	if err := j.Driver.SaveStep(ctx, id, owner, step); err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.flow == "" || step.Seq != j.step {
		return nil
	}
	if run, _, err := j.Driver.GetRun(ctx, id); err != nil || run.Flow != j.flow {
		return nil
	}
	j.flow = ""
	j.dead[owner] = true
	close(j.fired)
	return driver.ErrNotOwner // the process is gone: nothing it does counts
}

func (j *crashJournal) RenewRun(ctx context.Context, id, owner string, lease time.Duration) error {
	if j.isDead(owner) {
		return driver.ErrNotOwner
	}
	return j.Driver.RenewRun(ctx, id, owner, lease)
}

func (j *crashJournal) FinishRun(ctx context.Context, id, owner string, f driver.Finish) error {
	if j.isDead(owner) {
		return driver.ErrNotOwner
	}
	return j.Driver.FinishRun(ctx, id, owner, f)
}
