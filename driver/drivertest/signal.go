package drivertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
)

// RunSignals runs the rules of driver.Signaler — each a parallel subtest
// named after its rule — and, end to end through an oke.App, the rules of
// oke.AwaitSignal and App.Signal. Run calls it, under "Signals", for every
// driver that implements driver.Signaler.
func RunSignals(t *testing.T, newDriver func(t *testing.T) driver.Driver) {
	t.Helper()
	for _, r := range signalRules {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			d := newDriver(t)
			t.Cleanup(func() { _ = d.Close() })
			s, ok := d.(signaler)
			if !ok {
				t.Fatalf("%T does not implement driver.Signaler", d)
			}
			r.test(t, s)
		})
	}
	runRules(t, newDriver, signalFlowRules)
}

type signaler interface {
	journal
	driver.Signaler
}

var signalRules = []struct {
	name string
	test func(t *testing.T, s signaler)
}{
	{"SendSignalKeepsSignalsInSendOrder", testSendOrder},
	{"SendSignalWithATakenKeyChangesNothing", testSendDuplicate},
	{"SendSignalToAMissingOrFinishedRunKeepsNothing", testSendNoRun},
	{"SendSignalMakesASleepingRunDueAndLeavesAHeldOneAlone", testSendWakes},
	{"TakeSignalTakesTheOldestOfTheNameWithItsStep", testTakeOldest},
	{"TakeSignalIsFencedAndInOrder", testTakeFenced},
	{"WakeForSignalWakesOnlyARunSleepingWithThatSignal", testWakeForSignal},
}

func send(t *testing.T, s signaler, runID, name, key, payload string) driver.Signal {
	t.Helper()
	sig, err := s.SendSignal(t.Context(), driver.Signal{RunID: runID, Name: name, Key: key, Payload: []byte(payload)})
	if err != nil {
		t.Fatalf("SendSignal(%q, %q, key %q): %v", runID, name, key, err)
	}
	return sig
}

func signals(t *testing.T, s signaler, runID string) []driver.Signal {
	t.Helper()
	list, err := s.Signals(t.Context(), runID)
	if err != nil {
		t.Fatalf("Signals(%q): %v", runID, err)
	}
	return list
}

// describe is a signal as "name key payload step".
func describe(list []driver.Signal) string {
	var b strings.Builder
	for i, s := range list {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "#%d %s %s %s step=%d", s.Seq, s.Name, s.Key, s.Payload, s.Step)
	}
	return b.String()
}

func testSendOrder(t *testing.T, s signaler) {
	createHeld(t, s, "run_sig", "me", hold)
	a := send(t, s, "run_sig", "approve", "k1", `{"n":1}`)
	b := send(t, s, "run_sig", "cancel", "k2", `{"n":2}`)
	c := send(t, s, "run_sig", "approve", "k3", `{"n":3}`)
	if !(a.Seq < b.Seq && b.Seq < c.Seq) || a.SentAt.IsZero() {
		t.Fatalf("Seq %d, %d, %d and SentAt %v: want increasing Seq in send order and SentAt set", a.Seq, b.Seq, c.Seq, a.SentAt)
	}
	got := describe(signals(t, s, "run_sig"))
	want := describe([]driver.Signal{a, b, c})
	if got != want {
		t.Fatalf("Signals:\n got %s\nwant %s", got, want)
	}
	if n := len(signals(t, s, "run_other")); n != 0 {
		t.Fatalf("Signals of a run with none: %d, want 0", n)
	}
}

func testSendDuplicate(t *testing.T, s signaler) {
	createHeld(t, s, "run_dup", "me", hold)
	first := send(t, s, "run_dup", "approve", "same-key", `{"first":true}`)
	again, err := s.SendSignal(t.Context(), driver.Signal{RunID: "run_dup", Name: "approve", Key: "same-key", Payload: []byte(`{"first":false}`)})
	wantErr(t, "a second send with the key", err, driver.ErrSignalDuplicate)
	if again.Seq != first.Seq || string(again.Payload) != `{"first":true}` {
		t.Fatalf("the duplicate send returned #%d %s, want the kept signal #%d %s", again.Seq, again.Payload, first.Seq, first.Payload)
	}
	if list := signals(t, s, "run_dup"); len(list) != 1 {
		t.Fatalf("after a duplicate send the run holds %s, want one signal", describe(list))
	}
	// The same key on another run is another signal.
	createHeld(t, s, "run_dup2", "me", hold)
	send(t, s, "run_dup2", "approve", "same-key", `{}`)
}

func testSendNoRun(t *testing.T, s signaler) {
	_, err := s.SendSignal(t.Context(), driver.Signal{RunID: "run_missing", Name: "x", Key: "k", Payload: []byte(`1`)})
	wantErr(t, "a send to a missing run", err, driver.ErrNotFound)
	createHeld(t, s, "run_done", "me", hold)
	finishRun(t, s, "run_done", "me", driver.Finish{Status: driver.RunCompleted, Result: &driver.Response{Status: 200}})
	_, err = s.SendSignal(t.Context(), driver.Signal{RunID: "run_done", Name: "x", Key: "k", Payload: []byte(`1`)})
	wantErr(t, "a send to a finished run", err, driver.ErrRunFinished)
	if list := signals(t, s, "run_done"); len(list) != 0 {
		t.Fatalf("a finished run kept %s", describe(list))
	}
}

func testSendWakes(t *testing.T, s signaler) {
	createHeld(t, s, "run_sleeps", "me", hold)
	finishRun(t, s, "run_sleeps", "me", driver.Finish{Status: driver.RunSleeping, WakeAt: time.Now().Add(time.Hour)})
	wantNotDue(t, s, "run_sleeps", "a run asleep for an hour")
	send(t, s, "run_sleeps", "approve", "k", `true`)
	wantDue(t, s, "run_sleeps", "a sleeping run sent a signal")
	run, _ := acquire(t, s, "run_sleeps", "waker", hold)
	if run.NextAttempts != 1 {
		t.Errorf("a run woken from its sleep by a signal has NextAttempts %d, want 1 (a wake is no new attempt)", run.NextAttempts)
	}

	createHeld(t, s, "run_held", "me", hold)
	send(t, s, "run_held", "approve", "k", `true`)
	run, _ = getRun(t, s, "run_held")
	wantState(t, "a held run sent a signal", run, driver.RunRunning, "me", 1)
	wantNotDue(t, s, "run_held", "a held run sent a signal")
}

func testTakeOldest(t *testing.T, s signaler) {
	createHeld(t, s, "run_take", "me", hold)
	saveStep(t, s, "run_take", "me", stepN(1))
	a1 := send(t, s, "run_take", "a", "k1", `"first"`)
	send(t, s, "run_take", "b", "k2", `"other"`)
	a2 := send(t, s, "run_take", "a", "k3", `"second"`)

	st := stepN(2)
	st.Result = nil
	got, ok, err := s.TakeSignal(t.Context(), "run_take", "me", "a", st)
	if err != nil || !ok {
		t.Fatalf("TakeSignal: %v, %v", ok, err)
	}
	if got.Seq != a1.Seq || string(got.Payload) != `"first"` || got.Step != 2 {
		t.Fatalf("TakeSignal took #%d %s (step %d), want the oldest a, #%d \"first\", taken by step 2", got.Seq, got.Payload, got.Step, a1.Seq)
	}
	_, steps := getRun(t, s, "run_take")
	want := st
	want.Result = driver.SignalStepResult(a1)
	sameSteps(t, "steps after TakeSignal", steps, []driver.Step{stepN(1), want})
	var out driver.SignalOutcome
	if err := json.Unmarshal(steps[1].Result, &out); err != nil || !out.Received || string(out.Payload) != `"first"` || out.Key != "k1" {
		t.Fatalf("the taking step's result %s (%v), want the signal k1 \"first\" received", steps[1].Result, err)
	}
	wantNext(t, s, "after TakeSignal", "run_take", 1)

	st3 := stepN(3)
	st3.Result = nil
	got, ok, err = s.TakeSignal(t.Context(), "run_take", "me", "a", st3)
	if err != nil || !ok || got.Seq != a2.Seq {
		t.Fatalf("second TakeSignal: #%d %v %v, want #%d", got.Seq, ok, err, a2.Seq)
	}
	st4 := stepN(4)
	_, ok, err = s.TakeSignal(t.Context(), "run_take", "me", "a", st4)
	if err != nil || ok {
		t.Fatalf("TakeSignal with no signal of the name left: %v, %v; want false, nil", ok, err)
	}
	if _, steps = getRun(t, s, "run_take"); len(steps) != 3 {
		t.Fatalf("a TakeSignal that found nothing saved a step: %q", stepNames(steps))
	}
	list := signals(t, s, "run_take")
	if d := describe(list); !strings.Contains(d, `#1 a k1 "first" step=2`) || !strings.Contains(d, `b k2 "other" step=0`) || !strings.Contains(d, `"second" step=3`) {
		t.Fatalf("signals after two takes: %s", d)
	}
}

func testTakeFenced(t *testing.T, s signaler) {
	createHeld(t, s, "run_fence", "me", hold)
	send(t, s, "run_fence", "a", "k1", `1`)
	_, _, err := s.TakeSignal(t.Context(), "run_fence", "intruder", "a", stepN(1))
	wantErr(t, "TakeSignal by a non-owner", err, driver.ErrNotOwner)
	_, _, err = s.TakeSignal(t.Context(), "run_fence", "me", "a", stepN(2))
	wantErr(t, "TakeSignal out of order", err, driver.ErrStepOrder)
	if list := signals(t, s, "run_fence"); len(list) != 1 || list[0].Step != 0 {
		t.Fatalf("a refused TakeSignal delivered the signal: %s", describe(list))
	}
	if _, steps := getRun(t, s, "run_fence"); len(steps) != 0 {
		t.Fatalf("a refused TakeSignal saved %q", stepNames(steps))
	}
}

func testWakeForSignal(t *testing.T, s signaler) {
	createHeld(t, s, "run_w", "me", hold)
	send(t, s, "run_w", "a", "k1", `1`)
	if woke, err := s.WakeForSignal(t.Context(), "run_w", "a"); err != nil || woke {
		t.Fatalf("WakeForSignal of a held run: %v, %v; want false (it is not asleep)", woke, err)
	}
	finishRun(t, s, "run_w", "me", driver.Finish{Status: driver.RunSleeping, WakeAt: time.Now().Add(time.Hour)})
	if woke, err := s.WakeForSignal(t.Context(), "run_w", "b"); err != nil || woke {
		t.Fatalf("WakeForSignal for a signal never sent: %v, %v; want false", woke, err)
	}
	wantNotDue(t, s, "run_w", "a run asleep with no signal of the name it waits for")
	if woke, err := s.WakeForSignal(t.Context(), "run_w", "a"); err != nil || !woke {
		t.Fatalf("WakeForSignal with a kept signal: %v, %v; want true", woke, err)
	}
	wantDue(t, s, "run_w", "after WakeForSignal")
	if woke, err := s.WakeForSignal(t.Context(), "run_missing", "a"); err != nil || woke {
		t.Fatalf("WakeForSignal of a missing run: %v, %v; want false, nil", woke, err)
	}
}

// The rules of oke.AwaitSignal and App.Signal, end to end.
var signalFlowRules = []rowRule{
	{"SignalSentBeforeTheWaitIsKept", testSignalBeforeWait},
	{"SignalWakesAWaitingRun", testSignalWakes},
	{"WaitTimesOutWithoutASignal", testSignalTimeout},
	{"DuplicateSendDeliversOnceAndSignalsComeInSendOrder", testSignalOnceInOrder},
	{"SignalToAMissingOrFinishedRunIsASignalError", testSignalErrors},
	{"FxSignalNeedsTheRunsCallerOverHTTP", testFxSignalIdentity},
}

type approval struct {
	By string `json:"by"`
}

// waiter is a durable flow that waits for "approve" for wait (then, when
// twice is set, once more as step "again", for a moment) and answers what it
// got. count counts how often its step before the wait ran.
type waiter struct {
	app    *oke.App
	before atomic.Int64
}

func newWaiter(t *testing.T, d driver.Driver, wait time.Duration, twice bool) *waiter {
	t.Helper()
	return newWaiterPolling(t, d, wait, twice, 10*time.Millisecond)
}

// newWaiterPolling is newWaiter with the scheduler polling every poll
// (negative: no scheduler).
func newWaiterPolling(t *testing.T, d driver.Driver, wait time.Duration, twice bool, poll time.Duration) *waiter {
	t.Helper()
	w := &waiter{}
	w.app = oke.New(oke.Config{Driver: d, PollInterval: poll, SweepInterval: -1,
		Logger: quietLogger(), Gate: testGate})
	w.app.Handle(oke.POST("/wait"), signalFlow(&w.before, wait, twice))
	w.app.Handle(oke.POST("/approve/{run}"), oke.NewFlow("t.approve", oke.Options{},
		func(ctx context.Context, in approveIn, fx *oke.Fx) (oke.Response[string], error) {
			err := fx.Signal(ctx, in.Run, "approve", approval{By: in.By})
			return oke.OK("sent"), err
		}))
	if err := w.app.Start(context.Background()); err != nil {
		t.Fatalf("start app: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		w.app.Close(ctx)
	})
	return w
}

type approveIn struct {
	Run string `json:"run"`
	By  string `json:"by"`
}

// signalFlow is the flow t.awaitSignal of newWaiter.
func signalFlow(before *atomic.Int64, wait time.Duration, twice bool) *oke.Flow[pipeIn, string] {
	return oke.NewFlow("t.awaitSignal", oke.Options{Durable: true}, func(ctx context.Context, in pipeIn, fx *oke.Fx) (oke.Response[string], error) {
		if _, err := oke.Step(ctx, "before", func(context.Context) (int, error) { before.Add(1); return 1, nil }); err != nil {
			return oke.Response[string]{}, err
		}
		a, ok, err := oke.AwaitSignal[approval](ctx, "approve", wait)
		if err != nil {
			return oke.Response[string]{}, err
		}
		got := "timeout"
		if ok {
			got = "by " + a.By
		}
		if twice {
			b, ok, err := oke.AwaitSignalStep[approval](ctx, "again", "approve", nap)
			if err != nil {
				return oke.Response[string]{}, err
			}
			if ok {
				got += ", by " + b.By
			} else {
				got += ", timeout"
			}
		}
		return oke.Created(got, ""), nil
	})
}

// start starts a run of t.awaitSignal over HTTP, as user:1, without a key.
func (w *waiter) start(t *testing.T) {
	t.Helper()
	r := httptest.NewRequest("POST", "/wait", strings.NewReader(`{"tag":"w"}`))
	r.Header.Set("Authorization", "Bearer user:1")
	rec := httptest.NewRecorder()
	w.app.ServeHTTP(rec, r)
	if rec.Code != 204 && rec.Code != 201 {
		t.Fatalf("POST /wait: %d %s", rec.Code, rec.Body)
	}
}

// runOf returns the only run of t.awaitSignal.
func runOf(t *testing.T, j driver.Journal) driver.Run {
	t.Helper()
	runs, err := j.ListRuns(context.Background(), driver.RunFilter{Flow: "t.awaitSignal"}, 0)
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs of t.awaitSignal: %d, %v; want 1", len(runs), err)
	}
	return runs[0]
}

// finalAnswer waits for the run to finish and returns its body.
func finalAnswer(t *testing.T, j driver.Journal, id string) string {
	t.Helper()
	var run driver.Run
	eventually(t, "run "+id+" to finish", func() bool {
		var err error
		run, _, err = j.GetRun(context.Background(), id)
		return err == nil && run.Status.Finished()
	})
	if run.Result == nil {
		t.Fatalf("run %s finished %s with no result", id, run.Status)
	}
	var s string
	if err := json.Unmarshal(run.Result.Body, &s); err != nil {
		t.Fatalf("run %s result %s: %v", id, run.Result.Body, err)
	}
	return s
}

// sleepingRun waits until run id is parked.
func sleepingRun(t *testing.T, j driver.Journal, id string) {
	t.Helper()
	eventually(t, "run "+id+" to park", func() bool {
		run, _, err := j.GetRun(context.Background(), id)
		return err == nil && run.Status == driver.RunSleeping
	})
}

// WaitStepNames are the steps a wait named "approve" leaves in the journal.
var waitStepNames = []string{"1:before", "2:approve", "3:approve (outcome)"}

func testSignalBeforeWait(t *testing.T, d driver.Driver) {
	j := d.(driver.Journal)
	// A run created held by a "dead" process that never reached the wait;
	// the signal comes first; then the run picks up and waits.
	ctx := context.Background()
	if _, err := j.CreateRun(ctx, driver.Run{ID: "run_early", Flow: "t.awaitSignal", Input: []byte(`{"tag":"e"}`),
		Tenant: "default", Principal: "user:1", Owner: "dead-process"}, short); err != nil {
		t.Fatal(err)
	}
	w := newWaiter(t, d, time.Hour, false)
	if err := w.app.Signal(ctx, "run_early", "approve", approval{By: "ann"}); err != nil {
		t.Fatalf("Signal before the wait: %v", err)
	}
	if got := finalAnswer(t, j, "run_early"); got != "by ann" {
		t.Fatalf("the run answered %q, want %q (the kept signal)", got, "by ann")
	}
	_, steps, _ := j.GetRun(ctx, "run_early")
	if got := stepNames(steps); strings.Join(got, "|") != strings.Join(waitStepNames, "|") {
		t.Fatalf("steps %q, want %q", got, waitStepNames)
	}
}

func testSignalWakes(t *testing.T, d driver.Driver) {
	j := d.(driver.Journal)
	w := newWaiter(t, d, time.Hour, false)
	w.start(t)
	run := runOf(t, j)
	sleepingRun(t, j, run.ID)
	// The wait is an hour: only the signal can end it within the test.
	r := httptest.NewRequest("POST", "/approve/"+run.ID, strings.NewReader(`{"by":"bob"}`))
	r.Header.Set("Authorization", "Bearer user:1")
	rec := httptest.NewRecorder()
	w.app.ServeHTTP(rec, r)
	if rec.Code != 200 {
		t.Fatalf("POST /approve: %d %s", rec.Code, rec.Body)
	}
	if got := finalAnswer(t, j, run.ID); got != "by bob" {
		t.Fatalf("the run answered %q, want %q", got, "by bob")
	}
	if n := w.before.Load(); n != 1 {
		t.Fatalf("the step before the wait ran %d times, want 1", n)
	}
	_, steps, _ := j.GetRun(context.Background(), run.ID)
	var out driver.SignalOutcome
	if len(steps) != 3 || json.Unmarshal(steps[2].Result, &out) != nil || !out.Received || string(out.Payload) != `{"by":"bob"}` {
		t.Fatalf("the journal's wait: %q, outcome %s; want the signal received", stepNames(steps), steps[len(steps)-1].Result)
	}
	// A pick-up after the wait returned gets the saved outcome: a replay
	// that reuses the wait's two steps (and has no signal of its own)
	// answers the same.
	again, err := w.app.ReplayFrom(context.Background(), run.ID, 4)
	if err != nil {
		t.Fatalf("ReplayFrom step 4: %v", err)
	}
	if got := finalAnswer(t, j, again); got != "by bob" {
		t.Fatalf("the replay from after the wait answered %q, want %q (the saved outcome)", got, "by bob")
	}
}

func testSignalTimeout(t *testing.T, d driver.Driver) {
	j := d.(driver.Journal)
	w := newWaiter(t, d, nap, false)
	w.start(t)
	run := runOf(t, j)
	if got := finalAnswer(t, j, run.ID); got != "timeout" {
		t.Fatalf("the run answered %q, want timeout", got)
	}
	// A signal that comes after the timeout is kept for no one: the run has
	// finished.
	err := w.app.Signal(context.Background(), run.ID, "approve", approval{By: "late"})
	if !errors.Is(err, oke.ErrSignalRunFinished) {
		t.Fatalf("a signal after the run finished: %v, want ErrSignalRunFinished", err)
	}
}

func testSignalOnceInOrder(t *testing.T, d driver.Driver) {
	j := d.(driver.Journal)
	ctx := context.Background()
	if _, err := j.CreateRun(ctx, driver.Run{ID: "run_twice", Flow: "t.awaitSignal", Input: []byte(`{"tag":"t"}`),
		Tenant: "default", Principal: "user:1", Owner: "dead-process"}, short); err != nil {
		t.Fatal(err)
	}
	w := newWaiter(t, d, time.Hour, true)
	for _, by := range []string{"first", "first", "second"} {
		if err := w.app.Signal(ctx, "run_twice", "approve", approval{By: by}, oke.SignalKey("key-"+by)); err != nil {
			t.Fatalf("Signal %s: %v", by, err)
		}
	}
	if got := finalAnswer(t, j, "run_twice"); got != "by first, by second" {
		t.Fatalf("two waits got %q, want %q (the duplicate delivered once, in send order)", got, "by first, by second")
	}
	list, err := w.app.Signals(ctx, "run_twice")
	if err != nil || len(list) != 2 {
		t.Fatalf("signals kept: %s (%v), want 2", describe(list), err)
	}
}

func testSignalErrors(t *testing.T, d driver.Driver) {
	w := newWaiter(t, d, time.Hour, false)
	err := w.app.Signal(context.Background(), "run_nobody", "approve", nil)
	var se *oke.SignalError
	if !errors.As(err, &se) || !errors.Is(err, oke.ErrSignalNoRun) || se.RunID != "run_nobody" {
		t.Fatalf("a signal to a missing run: %v, want a *SignalError with ErrSignalNoRun", err)
	}
}

func testFxSignalIdentity(t *testing.T, d driver.Driver) {
	j := d.(driver.Journal)
	w := newWaiter(t, d, time.Hour, false)
	w.start(t)
	run := runOf(t, j)
	sleepingRun(t, j, run.ID)
	r := httptest.NewRequest("POST", "/approve/"+run.ID, strings.NewReader(`{"by":"mallory"}`))
	r.Header.Set("Authorization", "Bearer user:2")
	rec := httptest.NewRecorder()
	w.app.ServeHTTP(rec, r)
	if rec.Code != 404 || !strings.Contains(rec.Body.String(), "RunNotFound") {
		t.Fatalf("another principal's signal: %d %s, want 404 RunNotFound", rec.Code, rec.Body)
	}
	if list, _ := w.app.Signals(context.Background(), run.ID); len(list) != 0 {
		t.Fatalf("a refused signal was kept: %s", describe(list))
	}
}

// RunSignalRestart checks that a run waiting for a signal survives a
// restart: an app parks a run in its wait and closes; a new app on the same
// store (open returns a driver on it each time it is called — the same
// folder, the same schema) is sent the signal and finishes the run, whose
// step before the wait ran once.
func RunSignalRestart(t *testing.T, open func(t *testing.T) driver.Driver) {
	t.Helper()
	d1 := open(t)
	w1 := newWaiter(t, d1, time.Hour, false)
	w1.start(t)
	run := runOf(t, d1.(driver.Journal))
	sleepingRun(t, d1.(driver.Journal), run.ID)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w1.app.Close(ctx); err != nil {
		t.Fatalf("close the first app: %v", err)
	}
	if err := d1.Close(); err != nil {
		t.Fatalf("close the first driver: %v", err)
	}

	d2 := open(t)
	t.Cleanup(func() { _ = d2.Close() })
	w2 := newWaiter(t, d2, time.Hour, false)
	if err := w2.app.Signal(ctx, run.ID, "approve", approval{By: "after restart"}); err != nil {
		t.Fatalf("Signal after the restart: %v", err)
	}
	if got := finalAnswer(t, d2.(driver.Journal), run.ID); got != "by after restart" {
		t.Fatalf("the run answered %q after the restart", got)
	}
	if n := w1.before.Load() + w2.before.Load(); n != 1 {
		t.Fatalf("the step before the wait ran %d times across the restart, want 1", n)
	}
}

// RunSignalInstances checks that a signal sent through one app wakes a run
// another app on the same store parked, at once: open returns a driver on
// the same store each time (two are open together; Postgres). The waiting
// app polls once an hour and its run waits an hour, so only the store's
// notification (driver.Notifier) can wake it within the test; the sending
// app runs no scheduler.
func RunSignalInstances(t *testing.T, open func(t *testing.T) driver.Driver) {
	t.Helper()
	d1, d2 := open(t), open(t)
	t.Cleanup(func() { _ = d1.Close(); _ = d2.Close() })
	waiting := newWaiterPolling(t, d1, time.Hour, false, time.Hour)
	sending := newWaiterPolling(t, d2, time.Hour, false, -1)
	waiting.start(t)
	j := d1.(driver.Journal)
	run := runOf(t, j)
	sleepingRun(t, j, run.ID)
	if err := sending.app.Signal(context.Background(), run.ID, "approve", approval{By: "the other instance"}); err != nil {
		t.Fatalf("Signal from the other instance: %v", err)
	}
	if got := finalAnswer(t, j, run.ID); got != "by the other instance" {
		t.Fatalf("the run answered %q", got)
	}
}
