package oke

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/internal/cron"
)

// Tick is the input of a run a schedule starts (Cron): the time the run
// was scheduled for, in the schedule's location — not when it started,
// which may be later (a catch-up after downtime, a busy scheduler). A
// flow bound with Cron takes Tick as its input, or a struct that embeds
// Tick (its other fields optional), so that its code can tell which tick it
// serves: a nightly job that sweeps "everything before the tick" does the
// same work however late it runs, and a catch-up run does not redo a newer
// tick's work.
type Tick struct {
	At time.Time `json:"at"`
}

// CatchUpPolicy is what a schedule does about the ticks no instance of the
// app was up to run (downtime, a deploy). Build one with CatchUpLatest
// (the default), CatchUpSkip or CatchUpAll.
type CatchUpPolicy struct {
	skip   bool
	allSet bool // CatchUpAll(all)
	all    int
}

// The catch-up policies.
var (
	// CatchUpLatest runs the newest missed tick once, whatever number were
	// missed: a nightly job that was down for three nights runs once, for
	// the last night. The default.
	CatchUpLatest = CatchUpPolicy{}
	// CatchUpSkip runs no missed tick: the schedule goes on with its next
	// one.
	CatchUpSkip = CatchUpPolicy{skip: true}
)

// maxCatchUp bounds CatchUpAll.
const maxCatchUp = 1000

// CatchUpAll runs every missed tick, oldest first, up to the newest n of
// them (older ones are dropped); n is from 1 to 1000.
func CatchUpAll(n int) CatchUpPolicy { return CatchUpPolicy{allSet: true, all: n} }

func (p CatchUpPolicy) String() string {
	switch {
	case p.skip:
		return "skip"
	case p.allSet:
		return "all (up to " + strconv.Itoa(p.all) + ")"
	}
	return "latest"
}

// schedule is a Cron binding's schedule.
type schedule struct {
	spec    string
	loc     *time.Location
	catchUp CatchUpPolicy
	cron    *cron.Schedule // parsed by the route's check
}

// Cron binds a flow to a schedule: a run of the flow starts at each tick of
// spec, once per tick across every instance of the app that shares its
// store — the run's dedupe key is the flow and the tick
// ("cron:FLOW:UNIX"), which the journal keeps unique, so instances that
// reach the same tick together start one run, on every driver.
//
// spec is five fields — minute, hour, day of month, month, day of week —
// with *, values, ranges (1-5), lists (1,15), steps (*/15, 0-30/10) and
// names (JAN–DEC, SUN–SAT), or a macro: @yearly, @monthly, @weekly,
// @daily, @hourly, or @every D (every D since the Unix epoch, e.g. @every
// 15m). The ticks are in UTC unless the binding says another location
// (In). A spec that does not parse stops Start, naming the field.
//
//	app.Handle(oke.Cron("0 3 * * *").In(paris).CatchUp(oke.CatchUpAll(7)), NightlySweep)
//
// The flow's input is the Tick (see Tick for the types that accept it);
// its runs are journal runs like those of OnEvent, with the identity of
// tenant "default" and principal "schedule". The scheduler executes them,
// so an instance with the scheduler off (Config.PollInterval < 0) still
// starts them for the others. After downtime the binding's catch-up policy
// decides what the missed ticks become (CatchUpLatest by default); a
// schedule the store has never run starts with its next tick. Needs a
// driver that keeps a journal.
func Cron(spec string) Binding {
	return Binding{sched: &schedule{spec: spec, loc: time.UTC}}
}

// In returns a copy of a Cron binding whose ticks are wall-clock times in
// loc (nil: UTC). Across a daylight-saving change a wall time ticks once:
// one skipped when clocks go forward ticks shifted by the gap (02:30 at
// 03:30), one repeated when they go back at its first occurrence.
func (b Binding) In(loc *time.Location) Binding {
	if b.sched == nil {
		b.badOpt = "In"
		return b
	}
	s := *b.sched
	if loc == nil {
		loc = time.UTC
	}
	s.loc = loc
	b.sched = &s
	return b
}

// CatchUp returns a copy of a Cron binding with catch-up policy p.
func (b Binding) CatchUp(p CatchUpPolicy) Binding {
	if b.sched == nil {
		b.badOpt = "CatchUp"
		return b
	}
	s := *b.sched
	s.catchUp = p
	b.sched = &s
	return b
}

func (s *schedule) String() string {
	out := "cron " + s.spec
	if s.loc != time.UTC {
		out += " (" + s.loc.String() + ")"
	}
	return out
}

// scheduleIdentity is the identity of the runs schedules start.
var scheduleIdentity = Identity{Tenant: "default", Principal: "schedule"}

// checkSchedule parses a Cron binding's spec and checks that its flow takes
// a Tick.
func (rt *route) checkSchedule() error {
	f, b := rt.f, rt.b
	s := b.sched
	c, err := cron.Parse(s.spec, s.loc)
	if err != nil {
		return fmt.Errorf("flow %q: binding oke.Cron(%q): %v; fix: write five fields (minute hour day-of-month month day-of-week), e.g. \"0 3 * * *\", or @daily, @every 15m", f.name, s.spec, err)
	}
	if p := s.catchUp; p.allSet && (p.all < 1 || p.all > maxCatchUp) {
		return fmt.Errorf("flow %q: binding %s: CatchUpAll(%d): n must be from 1 to %d; fix: e.g. oke.CatchUpAll(24), or oke.CatchUpLatest", f.name, s, p.all, maxCatchUp)
	}
	if f.shape != shapeUnary {
		return fmt.Errorf("flow %q: binding %s: only a flow made with oke.NewFlow runs on a schedule", f.name, s)
	}
	if _, derr := f.decode(tickInput(time.Unix(0, 0).In(s.loc)), input{}); derr != nil {
		return fmt.Errorf("flow %q: binding %s: its input %s does not take a tick {\"at\": TIME} (%s); fix: make the input oke.Tick, or embed oke.Tick in it with its other fields optional", f.name, s, f.inType, derr.Message)
	}
	// The route's own copy: a Binding value (and its schedule) may be
	// shared by the routes of several apps.
	own := *s
	own.cron = c
	rt.b.sched = &own
	return nil
}

// tickInput is the saved input of the run of the tick at.
func tickInput(at time.Time) []byte {
	b, _ := json.Marshal(Tick{At: at})
	return b
}

// tickKey is the dedupe key of the run of flow's tick at: unique in the
// journal, so a tick starts one run whatever number of instances reach it.
func tickKey(flow string, at time.Time) string {
	return "cron:" + flow + ":" + strconv.FormatInt(at.Unix(), 10)
}

// parseTickKey returns the tick of flow's run with dedupe key k, if k is
// a schedule's.
func parseTickKey(flow, k string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(k, "cron:"+flow+":")
	if !ok {
		return time.Time{}, false
	}
	u, err := strconv.ParseInt(rest, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(u, 0), true
}

// lastScan bounds how many of a flow's newest runs lastTick reads to find
// its schedule's newest run: the flow's other bindings' runs come between.
const lastScan = 200

// lastTick returns the newest tick of s the journal holds a run of flow
// for, with that run; found is false when none is among the flow's newest
// lastScan runs (a schedule never run, or a flow whose other bindings ran
// it more often since). A tick of another Cron binding of the same flow
// that is not one of s's does not count.
func (a *App) lastTick(ctx context.Context, flow string, s *schedule) (tick time.Time, run driver.Run, found bool, err error) {
	f := driver.RunFilter{Flow: flow, Desc: true}
	seen := 0
	for seen < lastScan {
		page, err := a.runs.ListRuns(ctx, f, 50)
		if err != nil {
			return time.Time{}, driver.Run{}, false, err
		}
		for _, r := range page {
			t, ok := parseTickKey(flow, r.DedupeKey)
			if !ok || found && !t.After(tick) {
				continue
			}
			if p, ok := s.cron.Prev(t); ok && p.Equal(t) {
				tick, run, found = t, r, true
			}
		}
		// Runs are listed newest first and a tick's run is made near its
		// tick: once one is found, the page holds the newest (a
		// catch-up can create an older tick's run a little after a newer
		// one, so the whole page is read, not only its first match).
		if found || len(page) < 50 {
			break
		}
		seen += len(page)
		f.Before = page[len(page)-1].ID
	}
	return tick, run, found, nil
}

// due returns the ticks of s to start now, oldest first: of the ticks in
// (after, now], the newest when the policy is Latest (or Skip while the
// loop runs: the newest is on time), the newest n with CatchUpAll(n), none
// for Skip at start.
func (s *schedule) due(after, now time.Time, starting bool) []time.Time {
	p := s.catchUp
	if p.skip && starting {
		return nil
	}
	n := 1
	if p.allSet {
		n = p.all
	}
	var out []time.Time
	for t := now; len(out) < n; {
		tick, ok := s.cron.Prev(t)
		if !ok || !tick.After(after) {
			break
		}
		out = append(out, tick)
		t = tick.Add(-time.Nanosecond)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

// startTick creates the run of rt's tick at (an existing one is that tick
// started already, by this instance or another).
func (a *App) startTick(ctx context.Context, rt *route, at time.Time) error {
	_, err := a.startRun(ctx, rt.f, tickInput(at.In(rt.b.sched.loc)), scheduleIdentity, "", "", tickKey(rt.f.name, at))
	return err
}

// scheduleLoop starts the runs of a Cron binding's ticks until Close. At
// start it finds the newest tick the journal has a run of and applies the
// catch-up policy to the ticks after it; then it waits for each next tick.
// A store failure is retried with a backoff (1 s doubling to a minute),
// the tick still due then, by the policy.
func (a *App) scheduleLoop(rt *route) {
	defer a.bg.Done()
	s := rt.b.sched
	clk := a.clock
	ctx := a.base
	backoff := time.Duration(0)
	// wait waits for the clock to reach t, or Close; false on Close.
	wait := func(t time.Time) bool {
		c, release := clk.At(t)
		defer release()
		select {
		case <-c:
			return true
		case <-a.stop:
			return false
		}
	}
	retry := func(op string, err error) bool {
		backoff = min(max(2*backoff, time.Second), time.Minute)
		a.log.Error("oke: schedule: "+op+"; retrying", "flow", rt.f.name, "schedule", s.spec, "in", backoff, "err", err)
		return wait(clk.Now().Add(backoff))
	}
	var after time.Time // every tick at or before it is started (or dropped by the policy)
	for {
		now := clk.Now()
		last, _, found, err := a.lastTick(ctx, rt.f.name, s)
		if err == nil {
			after = now
			if found {
				after = last
			}
			break
		}
		if !retry("find the last tick run", err) {
			return
		}
	}
	starting := true
	for {
		now := clk.Now()
		failed := false
		for _, tick := range s.due(after, now, starting) {
			if err := a.startTick(ctx, rt, tick); err != nil {
				if !retry("start the run of the tick "+tick.UTC().Format(time.RFC3339), err) {
					return
				}
				failed = true
				break
			}
			after = tick
		}
		if failed {
			continue // the ticks due now, by the policy
		}
		backoff = 0
		if now.After(after) {
			after = now
		}
		starting = false
		next, ok := s.cron.Next(after)
		if !ok {
			a.log.Warn("oke: schedule has no further tick", "flow", rt.f.name, "schedule", s.spec)
			return
		}
		if !wait(next) {
			return
		}
	}
}

// startSchedules starts the loop of every Cron binding (Start).
func (a *App) startSchedules() {
	if a.journal == nil {
		return
	}
	if a.clock == nil {
		a.clock = cron.Real{}
	}
	for _, rt := range a.routes {
		if rt.b.sched != nil {
			a.bg.Add(1)
			go a.scheduleLoop(rt)
		}
	}
}

func init() {
	cron.UseClock = func(app any, c cron.Clock) { app.(*App).clock = c }
}

// ScheduleInfo describes one Cron binding, for consoles and the CLI.
type ScheduleInfo struct {
	Flow     string `json:"flow"`
	Spec     string `json:"spec"`
	Location string `json:"location"`
	CatchUp  string `json:"catchUp"`
	// Next is the next tick, by the app's clock.
	Next time.Time `json:"next"`
	// Last is the run of the newest tick the journal holds (nil when none
	// is among the flow's newest runs).
	Last *ScheduledRun `json:"last,omitempty"`
}

// ScheduledRun is a run a schedule started.
type ScheduledRun struct {
	Tick   time.Time `json:"tick"`
	RunID  string    `json:"runId"`
	Status string    `json:"status"`
}

// Schedules describes the app's Cron bindings, by flow name and spec. It
// reads the journal once per binding (its flow's newest runs). Call it
// after Start.
func (a *App) Schedules(ctx context.Context) ([]ScheduleInfo, error) {
	if !a.started.Load() {
		return nil, errors.New("oke: Schedules: the app has not started (call Start first)")
	}
	clk := a.clock
	if clk == nil {
		clk = cron.Real{}
	}
	now := clk.Now()
	var out []ScheduleInfo
	for _, rt := range a.routes {
		s := rt.b.sched
		if s == nil || s.cron == nil {
			continue
		}
		si := ScheduleInfo{Flow: rt.f.name, Spec: s.spec, Location: s.loc.String(), CatchUp: s.catchUp.String()}
		if next, ok := s.cron.Next(now); ok {
			si.Next = next
		}
		if a.journal != nil {
			tick, run, found, err := a.lastTick(ctx, rt.f.name, s)
			if err != nil {
				return nil, fmt.Errorf("schedules: flow %s: %w", rt.f.name, err)
			}
			if found {
				si.Last = &ScheduledRun{Tick: tick.In(s.loc), RunID: run.ID, Status: run.Status.String()}
			}
		}
		out = append(out, si)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Flow != out[j].Flow {
			return out[i].Flow < out[j].Flow
		}
		return out[i].Spec < out[j].Spec
	})
	return out, nil
}
