package oke

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/internal/deadline"
	"github.com/okengine/oke/internal/idem"
	"github.com/okengine/oke/internal/journal"
	"github.com/okengine/oke/internal/token"
	"github.com/okengine/oke/internal/tracing"
)

// startRun creates an unowned run of f, due now, for the scheduler.
func (a *App) startRun(ctx context.Context, f *flow, input []byte, id Identity, parent, event, dedupe string) (string, error) {
	run, err := a.runs.CreateRun(context.WithoutCancel(ctx), driver.Run{
		ID: token.RunID(), Flow: f.name, Input: input, Tenant: id.Tenant, Principal: id.Principal,
		Parent: parent, Event: event, DedupeKey: dedupe, Trace: tracing.FromContext(ctx),
	}, 0)
	if errors.Is(err, driver.ErrDuplicate) {
		return run.ID, nil // started already, by an earlier attempt of the same step
	}
	if err != nil {
		return "", fmt.Errorf("start a run of %s: %w", f.name, err)
	}
	a.wake()
	return run.ID, nil
}

// wake nudges the scheduler to look for due runs now.
func (a *App) wake() { a.sched.Wake() }

// resume acquires a due run and executes it (the scheduler's Run).
// It is traced as a root span, "oke.resume", linked to the span that
// created the run.
func (a *App) resume(ctx context.Context, id string) {
	span := tracing.Span(ctx)
	if tr := a.tracing(); tr != nil {
		ctx, span = tr.Start(ctx, "oke.resume")
		defer span.End()
	}
	owner := token.Owner()
	run, steps, err := a.runs.AcquireRun(ctx, id, owner, a.cfg.Lease)
	if err != nil {
		if !errors.Is(err, driver.ErrNotDue) {
			a.log.ErrorContext(ctx, "oke: acquire run", "run", id, "err", err)
		}
		return
	}
	if span.IsRecording() {
		span.SetAttributes(tracing.Flow.String(run.Flow), tracing.RunID.String(run.ID))
		tracing.Link(ctx, run.Trace, "created_run")
	}
	if a.deadLetter(ctx, run, owner) {
		return
	}
	f := a.flows[run.Flow]
	if f == nil || f.shape != shapeUnary {
		a.log.Error("oke: a due run's flow is not bound to this app; retrying later", "run", id, "flow", run.Flow)
		a.runs.FinishRun(ctx, id, owner, driver.Finish{Status: driver.RunRunning, WakeAt: a.cfg.Clock().Add(a.cfg.RetryDelay)})
		return
	}
	a.execute(ctx, f, a.newExecution(run, steps, owner, time.Now()), nil)
}

// deadLetter dead-letters run, just acquired by owner, when its failed
// pick-ups in a row (Run.Strikes) reached Config.DeadLetterAfter: it
// becomes RunDead, with the reason as its error, and is not executed.
func (a *App) deadLetter(ctx context.Context, run driver.Run, owner string) bool {
	n := a.cfg.DeadLetterAfter
	if n < 0 || run.Strikes < n {
		return false
	}
	msg := fmt.Sprintf("dead-lettered after %d failed pick-ups in a row (crashes, lapsed leases or store failures); resume it with oke runs resume %s once the cause is fixed", run.Strikes, run.ID)
	if run.Error != "" {
		msg += "; the last error: " + run.Error
	}
	ctx = context.WithoutCancel(ctx)
	if err := a.runs.FinishRun(ctx, run.ID, owner, driver.Finish{Status: driver.RunDead, Error: msg, Strikes: run.Strikes}); err != nil {
		a.log.Error("oke: dead-letter journal run", "run", run.ID, "err", err)
		return true // not executed: its lease lapses and the next pick-up tries again
	}
	a.log.Error("oke: journal run dead-lettered", "run", run.ID, "flow", run.Flow, "strikes", run.Strikes, "last_error", run.Error)
	return true
}

// execution is one execution of a journal run and what it needs: its Exec,
// its context (with its Fx and its first steps' contexts), its final
// response. One allocation.
type execution struct {
	x    journal.Exec
	rc   runCtx
	resp driver.Response
}

// newExecution starts executing run, held by owner; now is the time now.
func (a *App) newExecution(run driver.Run, saved []driver.Step, owner string, now time.Time) *execution {
	e := new(execution)
	e.x.Init(a.leases, a.runs, run, saved, owner, a.cfg.Lease, (*runReporter)(a), now)
	e.x.StoreTimeout = a.cfg.StoreTimeout
	return e
}

// runReporter logs the store failures of journal runs.
type runReporter App

func (r *runReporter) ReportRun(id, op string, err error) {
	r.log.Error("oke: journal run", "run", id, "op", op, "err", err)
}

// outcome of one execution of a run.
type outcome struct {
	res     result
	err     error // the flow's error (declared or not)
	nonRead bool  // the run had a non-read effect (a step, or fx effects)
	parked  bool  // parked by a durable sleep: answer 204
	store   error // the store failed: answer 503, the run is retried later
	// started: the run's function started (or another execution holds the
	// run): a 503 then says the outcome is unknown, not that nothing ran.
	started bool
	settled bool // res is the run's stored final response: send and store it as is
	// busy: the run is held elsewhere (the scheduler) or waits for a retry;
	// answer 409 IdempotencyInProgress with this Retry-After.
	busy time.Duration
	// retry: a step's failed attempt parked the run until its retry (store
	// holds the 503 OutcomeUnknown to answer meanwhile).
	retry *journal.RetryPark
}

// execute runs the flow's function as e's run and settles the run in the
// journal. in is the decoded input, or nil to decode the run's.
func (a *App) execute(ctx context.Context, f *flow, e *execution, in any) outcome {
	x := &e.x
	defer x.Stop()
	run := x.Run
	id := Identity{Tenant: run.Tenant, Principal: run.Principal}
	if in == nil {
		var derr *Error
		if in, derr = f.decode(run.Input, input{saved: true}); derr != nil {
			err := fmt.Errorf("run %s: its saved input no longer decodes into %s: %w", run.ID, f.inType, derr)
			return a.finish(ctx, e, outcome{err: err})
		}
	}
	rc := &e.rc
	rc.init(ctx, x, a, f, id)
	fx := &rc.fx
	ctx = rc
	res, _, err := a.callUnary(ctx, f, in, fx)
	x.Drain() // steps started with Go, waited for or not, have settled
	rc.st.endStepTx()
	o := outcome{res: res, err: err, nonRead: fx.hasNonRead() || x.Taken() > 0 || x.Saved() > 0, started: true}
	if err != nil && ctx.Err() != nil && a.base.Err() != nil {
		// The app is closing and cut the run off: it has not failed. Release
		// it so that the next start picks it up at once.
		o.err = nil
		o.store = ErrShuttingDown
		x.Stop()
		a.runs.FinishRun(context.WithoutCancel(ctx), run.ID, x.Owner, driver.Finish{Status: driver.RunRunning, WakeAt: a.cfg.Clock(), Strikes: run.Strikes})
		return o
	}
	if ferr := x.Failure(); ferr != nil {
		o.store = ferr
	} else if r := x.Retrying(); r != nil {
		// A step waits for its retry, parked in the journal: as after a
		// failed save, the run goes on later and the request gets 503
		// OutcomeUnknown (a retry with the key gets the run's answer).
		o.retry, o.err = r, nil
		e := ErrOutcomeUnknown.WithCause(fmt.Errorf("run %s: step %q attempt %d failed; retrying at %s: %w", run.ID, r.Step, r.Attempts, r.WakeAt.UTC().Format(time.RFC3339), r.Err))
		e.RetryAfter = max(int(math.Ceil(time.Until(r.WakeAt).Seconds())), 1)
		o.store = e
	} else if err != nil && a.unavailable(err) {
		// The flow failed because the store (or its database, which the
		// step's transaction uses) could not be reached: not the run's
		// fault. Retry it later, as after a failed save; the request gets
		// 503.
		o.store, o.err = err, nil
	} else if _, parked := x.Parked(); parked {
		o.parked = true
		o.err = nil
	}
	return a.finish(ctx, e, o)
}

// unavailable is the 503 of an outcome whose store failed: StoreUnavailable
// when the run's function never started, else OutcomeUnknown (the run goes
// on later, and a retry with the key gets its answer); ShuttingDown as is.
func (o outcome) unavailable() *Error {
	var e *Error
	switch {
	case errors.As(o.store, &e) && e.Status == http.StatusServiceUnavailable:
		return e
	case o.started:
		return ErrOutcomeUnknown.WithCause(o.store)
	}
	return ErrStoreUnavailable.WithCause(o.store)
}

// finish records the outcome of an execution in the journal.
func (a *App) finish(ctx context.Context, ex *execution, o outcome) outcome {
	x := &ex.x
	if ctx.Done() != nil { // a context that has no Done channel is never cancelled
		ctx = context.WithoutCancel(ctx)
	}
	run := x.Run
	var f driver.Finish
	switch {
	case o.retry != nil:
		// Released for the step's retry: a clean end (no strike); the
		// attempts so far are the run's NextAttempts, so the next pick-up
		// runs attempt Attempts+1.
		r := o.retry
		f = driver.Finish{Status: driver.RunRunning, WakeAt: r.WakeAt, NextAttempts: r.Attempts,
			Error: fmt.Sprintf("step %q attempt %d: %v", r.Step, r.Attempts, r.Err)}
	case o.store != nil:
		if errors.Is(o.store, journal.ErrLostLease) {
			return o // another owner has the run
		}
		// A failed pick-up: it counts toward dead-lettering the run.
		f = driver.Finish{Status: driver.RunRunning, WakeAt: a.cfg.Clock().Add(a.cfg.RetryDelay),
			Error: o.store.Error(), Strikes: run.Strikes + 1}
	case o.parked:
		wake, _ := x.Parked()
		f = driver.Finish{Status: driver.RunSleeping, WakeAt: wake}
	case o.err != nil:
		e, declared := asError(o.err)
		if !declared {
			a.logFailure(ctx, a.flows[run.Flow], o.err)
		}
		f = driver.Finish{Status: driver.RunFailed, Error: o.err.Error(),
			Result: &driver.Response{Status: e.Status, ContentType: "application/json", Body: envelopeBytes(e)}}
	default:
		ex.resp = driver.Response{Status: o.res.status, ContentType: o.res.contentType, Location: o.res.location, Body: o.res.body}
		f = driver.Finish{Status: driver.RunCompleted, Result: &ex.resp}
	}
	fctx, end := ctx, func(err error) error { return err }
	if f.Status == driver.RunRunning {
		// A release (a retry's park, or a failed pick-up) only hands the
		// run back sooner: should it fail, the run's lease lapses and the
		// scheduler takes it up all the same. It gets releaseTimeout at
		// most, not a whole StoreTimeout, so that a request that met a
		// hung store in its steps is answered sooner (docs/RELIABILITY.md,
		// known limits).
		fctx, end = deadline.Bound(ctx, min(releaseTimeout, a.cfg.StoreTimeout))
	}
	err := end(a.runs.FinishRun(fctx, run.ID, x.Owner, f))
	if err != nil {
		a.log.Error("oke: settle journal run", "run", run.ID, "err", err)
		if o.store == nil {
			o.store = err
		}
	} else if f.Status.Finished() {
		a.ended.done(run.ID) // results.go: waiters for its result
	}
	if o.parked {
		a.afterPark(ctx, run.ID, err == nil) // signal.go
	}
	if f.Status == driver.RunSleeping || f.Status == driver.RunRunning {
		a.wake()
		a.wakeAt(f.WakeAt)
	}
	return o
}

// releaseTimeout bounds the release of a run that is not done (finish): the
// store call whose failure costs least, since the run's lease lapses anyway.
const releaseTimeout = 2 * time.Second

// wakeAt nudges the scheduler when a run this process parked becomes due.
func (a *App) wakeAt(t time.Time) {
	if a.cfg.PollInterval > 0 {
		a.sched.WakeAt(t)
	}
}

// runDurable serves a durable flow over HTTP: it starts a journal run (or,
// for a retried key whose earlier attempt lapsed, resumes that run) and
// executes it. claim is nil for a request without a key.
func (a *App) runDurable(ctx context.Context, f *flow, in any, input []byte, id Identity, claim *idem.Claim) outcome {
	owner := token.Owner()
	now := time.Now()
	runID := token.RunIDAt(now)
	var idemKey *driver.Key
	if claim != nil {
		runID = claim.Row.RunID
		k := claim.Key
		idemKey = &k
	}
	if claim != nil && claim.TookOver {
		// The same request was cut off before: resume its run.
		run, steps, err := a.runs.AcquireRun(ctx, runID, owner, a.cfg.Lease)
		switch {
		case err == nil:
			if a.deadLetter(ctx, run, owner) {
				return outcome{store: ErrOutcomeUnknown.WithCause(ErrRunDead), started: true}
			}
			return a.execute(ctx, f, a.newExecution(run, steps, owner, time.Now()), nil)
		case errors.Is(err, driver.ErrNotDue):
			return a.awaitRun(ctx, runID)
		case !errors.Is(err, driver.ErrNotFound):
			return outcome{store: err}
		}
		// The run was never created (a crash between claim and create):
		// create it now under the same ID.
	}
	run, err := a.runs.CreateRun(ctx, driver.Run{
		ID: runID, Flow: f.name, Input: input, Tenant: id.Tenant, Principal: id.Principal,
		Owner: owner, IdemKey: idemKey, Trace: tracing.FromContext(ctx),
	}, a.cfg.Lease)
	if err != nil {
		return outcome{store: err}
	}
	return a.execute(ctx, f, a.newExecution(run, nil, owner, now), in)
}

// awaitWait bounds how long a request waits for a run held elsewhere
// before it answers 409 IdempotencyInProgress.
const awaitWait = 2 * time.Second

// awaitRun waits briefly for a run another owner (the scheduler) is
// executing to end or park, and returns its outcome; if it is still held, the
// outcome is busy, with the time until its lease or wake time.
func (a *App) awaitRun(ctx context.Context, id string) outcome {
	deadline := time.Now().Add(min(awaitWait, a.cfg.Lease))
	for {
		run, _, err := a.runs.GetRun(ctx, id)
		if err != nil {
			return outcome{store: err, started: true}
		}
		switch {
		case run.Status == driver.RunSleeping:
			return outcome{parked: true, nonRead: true}
		case run.Status == driver.RunDead:
			return outcome{store: ErrOutcomeUnknown.WithCause(fmt.Errorf("run %s: %w", id, ErrRunDead)), started: true}
		case run.Status.Finished() && run.Result != nil:
			r := run.Result
			res := result{status: r.Status, contentType: r.ContentType, location: r.Location, body: r.Body, storable: true}
			return outcome{res: res, nonRead: true, settled: true}
		}
		if now := time.Now(); now.After(deadline) {
			until := run.WakeAt
			if run.Owner != "" && run.LeaseUntil.After(until) {
				until = run.LeaseUntil
			}
			return outcome{busy: max(until.Sub(now), time.Second), started: true}
		}
		select {
		case <-time.After(25 * time.Millisecond):
		case <-a.stop:
			return outcome{store: ErrShuttingDown}
		}
	}
}

// Replay starts a new run of an old run's flow with the same input: every
// step runs again (a replay is a new run). The new run records which run it
// replays. It returns the new run's ID; the scheduler executes it.
func (a *App) Replay(ctx context.Context, runID string) (string, error) {
	return a.ReplayFrom(ctx, runID, 1)
}

// ReplayFrom starts a new run of an old run's flow with the same input that
// reuses the old run's saved results of steps 1..fromStep-1 (they are not
// run again: the new run holds copies of them) and runs step fromStep and
// every later one. fromStep 1 is Replay. The old run must have saved at
// least fromStep-1 steps; steps count from 1. The new run records which
// run it replays; the scheduler executes it.
func (a *App) ReplayFrom(ctx context.Context, runID string, fromStep int) (string, error) {
	if a.journal == nil {
		return "", fmt.Errorf("replay %s: %w", runID, ErrNotDurable)
	}
	id, err := replayRun(ctx, a.runs, runID, fromStep, a.cfg.Lease, a.cfg.Clock, func(old driver.Run) error {
		if a.flows[old.Flow] == nil {
			return fmt.Errorf("replay %s: flow %q is not bound to this app", runID, old.Flow)
		}
		return nil
	})
	if err == nil {
		a.wake()
	}
	return id, err
}

// ReplayRun is App.ReplayFrom on a journal of its own, for tools that open
// a store without an app (oke runs replay -data DIR, -postgres DSN): it
// creates the new run, due now, and an app on that store executes it when
// its scheduler next looks (an app on Postgres at once). The run's flow
// need not be bound. Each store call is bounded by DefaultStoreTimeout.
// Errors: driver.ErrNotFound for an unknown run, ErrBadStep for a step the
// run cannot be replayed from.
func ReplayRun(ctx context.Context, j driver.Journal, runID string, fromStep int) (string, error) {
	return replayRun(ctx, deadline.Journal(j, DefaultStoreTimeout), runID, fromStep, idem.DefaultLease, time.Now, nil)
}

// replayRun creates the replay of run runID on j from step fromStep, held
// for lease while it copies the steps it reuses; check, when not nil,
// vets the old run first.
func replayRun(ctx context.Context, j driver.Journal, runID string, fromStep int, lease time.Duration, now func() time.Time, check func(driver.Run) error) (string, error) {
	old, steps, err := j.GetRun(ctx, runID)
	if err != nil {
		return "", fmt.Errorf("replay %s: %w", runID, err)
	}
	if check != nil {
		if err := check(old); err != nil {
			return "", err
		}
	}
	if fromStep < 1 || fromStep > len(steps)+1 {
		return "", fmt.Errorf("replay %s from step %d: %w: the run saved %d steps, so a replay may start from step 1 to %d", runID, fromStep, ErrBadStep, len(steps), len(steps)+1)
	}
	run := driver.Run{ID: token.RunID(), Flow: old.Flow, Input: old.Input,
		Tenant: old.Tenant, Principal: old.Principal, ReplayOf: old.ID, Trace: tracing.FromContext(ctx)}
	if fromStep == 1 {
		if _, err := j.CreateRun(ctx, run, 0); err != nil {
			return "", fmt.Errorf("replay %s: %w", runID, err)
		}
		return run.ID, nil
	}
	// Create the run held, copy the steps it reuses, then release it for
	// the scheduler: until then no one else can take it, and if this
	// process dies meanwhile, the run is picked up once its lease lapses
	// (with the steps copied so far: the rest run again, as after any cut).
	owner := token.Owner()
	run.Owner = owner
	if _, err := j.CreateRun(ctx, run, lease); err != nil {
		return "", fmt.Errorf("replay %s: %w", runID, err)
	}
	ctx = context.WithoutCancel(ctx)
	for _, st := range steps[:fromStep-1] {
		st.Attempts = 0 // this run never ran it
		if err := j.SaveStep(ctx, run.ID, owner, st); err != nil {
			return "", fmt.Errorf("replay %s from step %d: copy step %d: %w", runID, fromStep, st.Seq, err)
		}
	}
	if err := j.FinishRun(ctx, run.ID, owner, driver.Finish{Status: driver.RunRunning, WakeAt: now()}); err != nil {
		return "", fmt.Errorf("replay %s from step %d: release the new run: %w", runID, fromStep, err)
	}
	return run.ID, nil
}

// Journal returns the app's journal (nil when the driver keeps none), for
// tools that list and show runs (package admin).
func (a *App) Journal() driver.Journal { return a.journal }

// Driver returns the app's driver (Config.Driver, or the memory driver New
// made), for tools that list and sweep Idempotency-Key rows (package admin).
func (a *App) Driver() driver.Driver { return a.cfg.Driver }
