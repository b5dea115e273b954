package drivertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
)

// The rules of retries and dead letters: the run's Strikes (failed pick-ups
// in a row), the NextAttempts and Error a release carries, the RunDead
// status (never due), and the optional driver.RunResumer. A driver without
// RunResumer skips that rule, saying so; oke's three drivers implement it.
func init() {
	journalRules = append(journalRules,
		journalRule{"AcquireRunFromALapsedHolderCountsAStrikeAndFinishRunSetsThem", testStrikes},
		journalRule{"FinishRunReleaseKeepsNextAttemptsAndTheLastError", testReleaseNextAttempts},
		journalRule{"DeadRunIsNeverDueAndResumeRunMakesItDueWithAttemptsReset", testDeadRun},
		journalRule{"CancelRunFailsADeadRun", testCancelDeadRun},
	)
}

// wantStrikes checks run id's Strikes as GetRun and ListRuns give them.
func wantStrikes(t *testing.T, j journal, what, id string, want int) {
	t.Helper()
	run, _ := getRun(t, j, id)
	runs, err := j.ListRuns(t.Context(), driver.RunFilter{}, many)
	if err != nil {
		t.Fatalf("%s: ListRuns: %v", what, err)
	}
	listed := -1
	for _, r := range runs {
		if r.ID == id {
			listed = r.Strikes
		}
	}
	if run.Strikes != want || listed != want {
		t.Errorf("%s: Strikes %d (GetRun), %d (ListRuns); want %d", what, run.Strikes, listed, want)
	}
}

func testStrikes(t *testing.T, j journal) {
	lapsedRun(t, j, "run-1", "worker-1", 1) // saved step 1, then died
	wantStrikes(t, j, "run whose holder died (not picked up yet)", "run-1", 0)
	if run, _ := acquire(t, j, "run-1", "worker-2", hold); run.Strikes != 1 {
		t.Errorf("AcquireRun from a lapsed holder returned Strikes %d, want 1", run.Strikes)
	}
	lapse(t, j, "run-1", "worker-2")
	if run, _ := acquire(t, j, "run-1", "worker-3", hold); run.Strikes != 2 {
		t.Errorf("second AcquireRun from a lapsed holder returned Strikes %d, want 2", run.Strikes)
	}
	wantStrikes(t, j, "run taken over twice", "run-1", 2)
	// The engine counts a release after a store failure: FinishRun sets it.
	finishRun(t, j, "run-1", "worker-3", driver.Finish{Status: driver.RunRunning, Strikes: 3, Error: "store down"})
	wantStrikes(t, j, "run released with Strikes 3", "run-1", 3)
	// An unowned run's pick-up is no strike.
	if run, _ := acquire(t, j, "run-1", "worker-4", hold); run.Strikes != 3 {
		t.Errorf("AcquireRun of a released run returned Strikes %d, want 3 (no lapse)", run.Strikes)
	}
	// A clean end resets them.
	finishRun(t, j, "run-1", "worker-4", driver.Finish{Status: driver.RunSleeping, WakeAt: time.Now().Add(-time.Second)})
	wantStrikes(t, j, "run parked by a sleep", "run-1", 0)
	if run, _ := acquire(t, j, "run-1", "worker-5", hold); run.Strikes != 0 {
		t.Errorf("AcquireRun of a woken run returned Strikes %d, want 0", run.Strikes)
	}
}

func testReleaseNextAttempts(t *testing.T, j journal) {
	createHeld(t, j, "run-1", "worker-1", hold)
	saveStep(t, j, "run-1", "worker-1", stepN(1))
	// Step 2 failed three times in process; its retry waits in the journal.
	wake := time.Now().Add(-time.Second)
	finishRun(t, j, "run-1", "worker-1", driver.Finish{Status: driver.RunRunning, WakeAt: wake,
		NextAttempts: 3, Error: `step "two" attempt 3: timeout`})
	wantNext(t, j, "run released after 3 attempts of step 2", "run-1", 3)
	run, _ := getRun(t, j, "run-1")
	if run.Error != `step "two" attempt 3: timeout` {
		t.Errorf("released run's Error = %q, want the last attempt's error", run.Error)
	}
	wantDue(t, j, "run-1", "released run due at its WakeAt")
	if run, _ := acquire(t, j, "run-1", "worker-2", hold); run.NextAttempts != 4 {
		t.Errorf("AcquireRun after the release returned NextAttempts %d, want 4 (the 4th attempt of step 2)", run.NextAttempts)
	}
	// A release without NextAttempts leaves the count as it is.
	finishRun(t, j, "run-1", "worker-2", driver.Finish{Status: driver.RunRunning})
	wantNext(t, j, "run released with NextAttempts 0", "run-1", 4)
}

func testCancelDeadRun(t *testing.T, j journal) {
	c := canceller(t, j)
	createHeld(t, j, "run-1", "worker-1", hold)
	finishRun(t, j, "run-1", "worker-1", driver.Finish{Status: driver.RunDead, Error: "dead", Strikes: 2})
	got, err := c.CancelRun(t.Context(), "run-1", cancelResult, "cancelled")
	if err != nil {
		t.Fatalf("CancelRun of a dead run: %v", err)
	}
	if got.Status != driver.RunFailed || got.Error != "cancelled" {
		t.Errorf("cancelled dead run: status %v, error %q; want failed, cancelled", got.Status, got.Error)
	}
	wantNotDue(t, j, "run-1", "cancelled dead run")
}

func testDeadRun(t *testing.T, j journal) {
	createHeld(t, j, "run-1", "worker-1", hold)
	saveStep(t, j, "run-1", "worker-1", stepN(1))
	const why = "dead-lettered after 3 failed pick-ups"
	finishRun(t, j, "run-1", "worker-1", driver.Finish{Status: driver.RunDead, Error: why, Strikes: 3})
	run, steps := getRun(t, j, "run-1")
	wantState(t, "dead run", run, driver.RunDead, "", 1)
	if run.Error != why || run.Strikes != 3 {
		t.Errorf("dead run: Error %q, Strikes %d; want %q, 3", run.Error, run.Strikes, why)
	}
	if run.Status.Finished() {
		t.Errorf("RunDead.Finished() = true; a dead run has not ended")
	}
	sameSteps(t, "dead run's steps", steps, []driver.Step{stepN(1)})
	wantNotDue(t, j, "run-1", "dead run")
	if got := listRunIDs(t, j, driver.RunFilter{Status: []driver.RunStatus{driver.RunDead}}, many); len(got) != 1 || got[0] != "run-1" {
		t.Errorf("ListRuns(status dead) = %q, want [run-1]", got)
	}
	if err := j.RenewRun(t.Context(), "run-1", "worker-1", hold); err == nil {
		t.Errorf("RenewRun of a dead run by its last holder succeeded; want ErrNotOwner")
	}

	r, ok := j.(driver.RunResumer)
	if !ok {
		t.Skipf("%T does not implement the optional driver.RunResumer", j)
	}
	resumed, err := r.ResumeRun(t.Context(), "run-1")
	if err != nil {
		t.Fatalf("ResumeRun of a dead run: %v", err)
	}
	wantState(t, "resumed run", resumed, driver.RunRunning, "", 1)
	if resumed.Strikes != 0 || resumed.NextAttempts != 0 || resumed.Steps != 1 {
		t.Errorf("ResumeRun returned Strikes %d, NextAttempts %d, Steps %d; want 0, 0, 1",
			resumed.Strikes, resumed.NextAttempts, resumed.Steps)
	}
	wantStrikes(t, j, "resumed run", "run-1", 0)
	wantNext(t, j, "resumed run", "run-1", 0)
	wantDue(t, j, "run-1", "resumed run")
	got, steps := acquire(t, j, "run-1", "worker-2", hold)
	if got.NextAttempts != 1 || got.Strikes != 0 {
		t.Errorf("AcquireRun of a resumed run: NextAttempts %d, Strikes %d; want 1, 0 (a fresh start of step 2)", got.NextAttempts, got.Strikes)
	}
	sameSteps(t, "resumed run's steps", steps, []driver.Step{stepN(1)})

	_, err = r.ResumeRun(t.Context(), "run-1")
	wantErr(t, "ResumeRun of a running run", err, driver.ErrRunNotDead)
	_, err = r.ResumeRun(t.Context(), "no-such-run")
	wantErr(t, "ResumeRun of a missing run", err, driver.ErrNotFound)
}

func init() {
	durableRules = append(durableRules,
		rowRule{"StepRetryParkedInTheJournalSurvivesARestart", testRetryParkedSurvivesRestart},
		rowRule{"RunDeadLettersAfterNFailedPickUpsAndResumeFinishesIt", testDeadLetterAndResume},
	)
}

// ResumeRun passes App.Resume through to the driver under test.
func (j *journalFault) ResumeRun(ctx context.Context, id string) (driver.Run, error) {
	r, ok := j.Journal.(driver.RunResumer)
	if !ok {
		return driver.Run{}, fmt.Errorf("%T does not implement driver.RunResumer", j.Journal)
	}
	return r.ResumeRun(ctx, id)
}

// flakyFlow is a durable flow with one step, "flaky", whose function fails
// with "provider down" while fail says so, under policy.
func flakyFlow(name string, policy oke.RetryPolicy, ran *atomic.Int64, fail func() bool) *oke.Flow[pipeIn, string] {
	return oke.NewFlow(name, oke.Options{Durable: true, Retry: &policy},
		func(ctx context.Context, in pipeIn, fx *oke.Fx) (oke.Response[string], error) {
			v, err := oke.Step(ctx, "flaky", func(ctx context.Context) (string, error) {
				ran.Add(1)
				if fail() {
					return "", errors.New("provider down")
				}
				return "ok " + in.Tag, nil
			})
			if err != nil {
				return oke.Response[string]{}, err
			}
			return oke.Created(v, ""), nil
		})
}

// A retry whose backoff is longer than Config.RetryInline parks the run in
// the journal, due at the end of the backoff, with the attempt's error: the
// request gets 503 OutcomeUnknown with Retry-After, and a restarted app (no
// scheduler ran in the first one) picks the run up and runs the step's
// second attempt, journaled as such.
func testRetryParkedSurvivesRestart(t *testing.T, d driver.Driver) {
	var ran atomic.Int64
	var failing atomic.Bool
	failing.Store(true)
	policy := oke.RetryPolicy{MaxAttempts: 3, InitialBackoff: 50 * time.Millisecond, Jitter: -1}
	bind := func(h *durableHarness, app *oke.App) {
		app.Handle(oke.POST("/flaky"), flakyFlow("t.retrypark", policy, &ran, failing.Load))
	}
	first := newDurable(t, d, oke.Config{PollInterval: -1, RetryInline: -1}, bind)
	w := first.req("POST", "/flaky", `{"tag":"p"}`, "Idempotency-Key", key1)
	wantCode(t, "a step waiting for its retry", w, 503, "OutcomeUnknown")
	if w.Header().Get("Retry-After") == "" {
		t.Errorf("503 while the run waits for its retry has no Retry-After")
	}
	runs := first.runsOf("t.retrypark")
	if len(runs) != 1 {
		t.Fatalf("runs %+v, want one", runs)
	}
	run, steps := getRun(t, d.(journal), runs[0].ID)
	if run.Status != driver.RunRunning || run.Owner != "" || len(steps) != 0 ||
		!strings.Contains(run.Error, "provider down") || run.NextAttempts != 1 || run.Strikes != 0 ||
		!run.WakeAt.After(run.CreatedAt) {
		t.Fatalf("run parked for its retry: %+v, %d steps; want running, unowned, no steps, Error naming the attempt's error, NextAttempts 1, Strikes 0, WakeAt after its creation", run, len(steps))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first.app.Close(ctx)

	failing.Store(false)
	second := newDurable(t, d, oke.Config{}, bind)
	eventually(t, "the restarted app to retry the step and complete the run", second.finished("t.retrypark", 1))
	run, steps = getRun(t, d.(journal), runs[0].ID)
	if run.Status != driver.RunCompleted || len(steps) != 1 || steps[0].Attempts != 2 {
		t.Fatalf("run after its retry: status %v, steps %+v; want completed with step flaky saved at attempt 2", run.Status, steps)
	}
	if n := ran.Load(); n != 2 {
		t.Errorf("the step's function ran %d times, want 2", n)
	}
}

// After Config.DeadLetterAfter failed pick-ups in a row (here: the step's
// result could not be saved, twice) the run's next pick-up dead-letters it:
// RunDead, never due, its error naming why; App.Resume makes it due again
// with its attempts reset, and it completes.
func testDeadLetterAndResume(t *testing.T, d driver.Driver) {
	var ran atomic.Int64
	h := newDurable(t, d, oke.Config{DeadLetterAfter: 2}, func(h *durableHarness, app *oke.App) {
		app.Handle(oke.POST("/flaky"), flakyFlow("t.dead", oke.NoRetry, &ran, func() bool { return false }))
	})
	h.j.failSaves.Store(2)
	wantCode(t, "save failed", h.req("POST", "/flaky", `{"tag":"d"}`), 503, "OutcomeUnknown")
	dead := func() bool {
		runs := h.runsOf("t.dead")
		return len(runs) == 1 && runs[0].Status == driver.RunDead
	}
	eventually(t, "the run to be dead-lettered", dead)
	run := h.runsOf("t.dead")[0]
	if run.Strikes != 2 || !strings.Contains(run.Error, "dead-lettered after 2 failed pick-ups") {
		t.Fatalf("dead run: Strikes %d, Error %q; want 2, saying it was dead-lettered", run.Strikes, run.Error)
	}
	if n := ran.Load(); n != 2 {
		t.Fatalf("the step ran %d times before the run was dead-lettered, want 2", n)
	}
	wantNotDue(t, d.(journal), run.ID, "dead-lettered run")
	if _, err := h.app.Resume(context.Background(), run.ID); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	eventually(t, "the resumed run to complete", h.finished("t.dead", 1))
	got, steps := getRun(t, d.(journal), run.ID)
	if got.Status != driver.RunCompleted || got.Strikes != 0 || len(steps) != 1 || steps[0].Attempts != 1 {
		t.Fatalf("resumed run: status %v, Strikes %d, steps %+v; want completed, 0, step saved at attempt 1 (attempts reset)", got.Status, got.Strikes, steps)
	}
	if _, err := h.app.Resume(context.Background(), run.ID); !errors.Is(err, driver.ErrRunNotDead) {
		t.Errorf("Resume of a completed run: %v, want driver.ErrRunNotDead", err)
	}
}
