package oke

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"time"

	"github.com/okengine/oke/internal/deadline"
	"github.com/okengine/oke/internal/flowtx"
	"github.com/okengine/oke/internal/journal"
	"github.com/okengine/oke/internal/tracing"
)

// runState is what a journal run's context carries.
type runState struct {
	x  *journal.Exec
	fx *Fx
	// The transaction a step opened with Fx.Tx (steps run one at a time),
	// and that step: Step ends it with the step's save.
	tx     *flowtx.Tx
	txStep *stepCtx
}

type runStateKey struct{}

type stepInfoKey struct{}

// stepInfo is what a step's context carries (its stepCtx).
type stepInfo = stepCtx

// runCtx is a journal run's context: its parent's, plus the run's state. It
// also holds the run's Fx and the contexts of its first steps, so that an
// execution allocates them all at once.
type runCtx struct {
	context.Context
	st    runState
	fx    Fx
	steps [runCtxSteps]stepCtx
}

// runCtxSteps is how many steps' contexts a runCtx holds; later steps
// allocate their own. Ten keep an execution (see runs.go) within the
// allocator's 1 536-byte size class (eleven did until the run and its
// response kept their trace: driver.Run.Trace, driver.Response.Trace).
const runCtxSteps = 10

func (c *runCtx) Value(key any) any {
	if _, ok := key.(runStateKey); ok {
		return &c.st
	}
	return c.Context.Value(key)
}

// init makes c the context of x's execution under parent.
func (c *runCtx) init(parent context.Context, x *journal.Exec, app *App, f *flow, id Identity) {
	c.Context = parent
	c.fx.app, c.fx.flow, c.fx.identity, c.fx.run = app, f, id, x
	c.st = runState{x: x, fx: &c.fx}
}

// stepCtx is a step's context: the run's (or whatever context the step was
// called with), plus the step. Its own Value is found first, so the run's
// state is reached through it too.
type stepCtx struct {
	parent context.Context
	name   string
	emits  int // Emit/Run calls inside this step, for their dedupe keys
}

func (c *stepCtx) Deadline() (time.Time, bool) { return c.parent.Deadline() }
func (c *stepCtx) Done() <-chan struct{}       { return c.parent.Done() }
func (c *stepCtx) Err() error                  { return c.parent.Err() }

func (c *stepCtx) Value(key any) any {
	if _, ok := key.(stepInfoKey); ok {
		return c
	}
	return c.parent.Value(key)
}

// key is the step's stable key (StepKey).
func (c *stepCtx) key() string { return runFrom(c.parent).x.StepKey(c.name) }

// stepContext returns the context for step seq (1-based) named name, run
// under ctx.
func (st *runState) stepContext(ctx context.Context, seq int, name string) *stepCtx {
	var c *stepCtx
	if rc, ok := ctx.(*runCtx); ok && &rc.st == st && seq <= runCtxSteps {
		c = &rc.steps[seq-1]
	} else {
		c = new(stepCtx)
	}
	c.parent, c.name = ctx, name
	return c
}

func runFrom(ctx context.Context) *runState {
	s, _ := ctx.Value(runStateKey{}).(*runState)
	return s
}

func stepFrom(ctx context.Context) *stepCtx {
	s, _ := ctx.Value(stepInfoKey{}).(*stepCtx)
	return s
}

// storedError is a declared failure as saved in a step.
type storedError struct {
	Status  int    `json:"status"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Step runs fn once per journal run: its result is saved (as JSON), and
// when the run picks up again — after a crash, a deploy, a lost connection,
// or a durable sleep — the saved result is returned without running fn.
// A declared failure (*Error, e.g. from Fx.Fail) is saved and returned again
// too, and never retried.
//
// Any other error is not saved: the step runs again by its retry policy
// (oke.Retry(policy) among opts, else the flow's Options.Retry, else
// DefaultRetryPolicy), after a backoff that is waited in process when short
// (Config.RetryInline) and parks the run in the journal when longer — then
// Step returns an error the flow must return (the run goes on after the
// wait). A permanent error (RetryPolicy.Permanent) or the last allowed
// attempt's error is returned as a *StepFailedError: return it, and the run
// fails with it. Attempts are saved with the step (oke runs show).
//
// Steps are taken in order, one at a time; names are unique within a run.
// Code outside steps runs again on every pick-up, so put every effect —
// a write, a fetch, Run, Emit — inside a step. In a flow that is not
// durable, Step simply calls fn.
func Step[T any](ctx context.Context, name string, fn func(ctx context.Context) (T, error), opts ...StepOption) (_ T, err error) {
	var zero T
	st := runFrom(ctx)
	if st == nil {
		return fn(ctx)
	}
	if inParallelStep(ctx, st) {
		return zero, fmt.Errorf("step %q: a step started with oke.Go (or a function of oke.First) cannot take steps of its own", name)
	}
	saved, p, err := st.x.Next(ctx, name)
	if err != nil {
		return zero, err
	}
	if saved != nil {
		return savedOutcome[T](name, saved.Result, saved.Failure)
	}
	// The step's span, when the flow's records: its attempts and its save
	// are its children.
	ctx, span := stepSpan(ctx, name, p.Seq)
	defer func() { tracing.End(span, err) }()
	sc := st.stepContext(ctx, p.Seq, name)
	var (
		v  T
		tx *flowtx.Tx
	)
	for {
		sc.emits = 0 // each attempt's Run and Emit calls dedupe with the last attempt's
		v, err = attempt(sc, p.Attempts, fn)
		if err != nil && st.fx.co != nil {
			// A coalesced run: the error may have aborted its one
			// transaction. The request runs again the usual way, where
			// retries apply.
			return zero, st.fx.co.fail(fmt.Errorf("step %q: %w", name, err))
		}
		if st.tx != nil && st.txStep == sc {
			tx, st.tx, st.txStep = st.tx, nil, nil
			if err != nil {
				tx.Rollback() // a failing step's writes are undone
				tx = nil
			}
		}
		var e *Error
		if err == nil || errors.As(err, &e) {
			break
		}
		// A plain error: not saved. Retry (here, or later: the run parks),
		// or give up.
		if err = st.retryStep(ctx, name, &p, err, opts); err != nil {
			return zero, err
		}
	}
	var result, failure []byte
	if err != nil {
		var e *Error
		errors.As(err, &e)
		if failure, err = json.Marshal(storedError{Status: e.Status, Code: e.Code, Message: e.Message}); err != nil {
			return zero, fmt.Errorf("step %q: encode failure: %w", name, err)
		}
	} else if result, err = json.Marshal(v); err != nil {
		return zero, fmt.Errorf("step %q: encode result: %w", name, err)
	}
	if tx != nil {
		if err := st.saveWithTx(ctx, p, result, tx); err != nil {
			return zero, err
		}
		return v, nil
	}
	if err := st.x.Save(ctx, p, result, failure); err != nil {
		return zero, err
	}
	if failure != nil {
		return savedOutcome[T](name, nil, failure)
	}
	return v, nil // this attempt ran the step: no need to decode what it saved
}

// retryStep decides what becomes of step p's attempt that failed with the
// plain error err: nil to run the step again now (after waiting its backoff
// here), or the error Step returns — err itself when the execution cannot
// go on (the store failed, the lease was lost, the context ended), a
// *StepFailedError when the error is permanent or the attempts are used up,
// or ErrRetrying after parking the run until its retry.
func (st *runState) retryStep(ctx context.Context, name string, p *journal.Pending, err error, opts []StepOption) error {
	x := st.x
	var mismatch *StepMismatchError
	switch {
	case x.Failure() != nil, ctx.Err() != nil:
		return err // not the step's failure: the run is retried (or cut off) as a whole
	case errors.Is(err, ErrKeyNotClaimed), errors.Is(err, ErrSleeping), errors.Is(err, ErrRetrying), errors.As(err, &mismatch):
		return err // the engine's own answers: running the step again cannot change them
	case errors.Is(err, deadline.ErrTimeout), errors.Is(err, context.DeadlineExceeded) && st.fx.app.unavailable(err):
		// A database that did not answer in time (Config.StoreTimeout, or
		// its connect timeout): an attempt more would wait as long again,
		// and the request with it. The run is retried as a whole later
		// (the request gets 503), as after a failed save.
		return err
	}
	pol := st.policy(opts)
	fail := &StepFailedError{RunID: x.Run.ID, Step: name, Attempts: p.Attempts, Err: err}
	if pol.Permanent != nil && pol.Permanent(err) {
		fail.Permanent = true
		return fail
	}
	if p.Attempts >= pol.MaxAttempts {
		return fail // when err says a database was unreachable, the run is retried later (runs.go)
	}
	wait := pol.Backoff(p.Attempts, mrand.Float64())
	if inline := st.fx.app.cfg.RetryInline; inline >= 0 && pol.nominal(p.Attempts) <= inline {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		if x.Failure() != nil {
			return err
		}
		p.Attempts++
		return nil
	}
	x.ParkRetry(journal.RetryPark{Step: name, WakeAt: st.fx.app.cfg.Clock().Add(wait), Attempts: p.Attempts, Err: err})
	return fmt.Errorf("run %s: step %q attempt %d failed, retrying in %v: %w (%v)", x.Run.ID, name, p.Attempts, wait.Round(time.Millisecond), ErrRetrying, err)
}

// policy is the retry policy of a step called with opts.
func (st *runState) policy(opts []StepOption) RetryPolicy {
	var o stepOptions
	for _, opt := range opts {
		opt(&o)
	}
	switch {
	case o.retry != nil:
		return o.retry.withDefaults(DefaultRetryPolicy)
	case st.fx.flow != nil && st.fx.flow.opts.Retry != nil:
		return st.fx.flow.opts.Retry.withDefaults(DefaultRetryPolicy)
	}
	return DefaultRetryPolicy
}

// savedOutcome decodes a saved step's result or declared failure.
func savedOutcome[T any](name string, result, failure []byte) (T, error) {
	var v T
	if failure != nil {
		var se storedError
		if err := json.Unmarshal(failure, &se); err != nil {
			return v, fmt.Errorf("step %q: decode saved failure: %w", name, err)
		}
		return v, &Error{Status: se.Status, Code: se.Code, Message: se.Message}
	}
	if err := json.Unmarshal(result, &v); err != nil {
		return v, fmt.Errorf("step %q: decode saved result into %T: %w", name, v, err)
	}
	return v, nil
}

// Sleep parks the run for d, durably: the first time it is reached it saves
// the wake time and returns ErrSleeping — return it from the flow; the
// request gets 204 No Content (stored, so a retry replays it) and the
// scheduler continues the run after d, even across restarts. When the run
// picks up after the wake time, Sleep returns nil and the flow goes on.
// name is a step name (unique in the run).
func Sleep(ctx context.Context, name string, d time.Duration) error {
	return sleepUntil(ctx, name, func(now time.Time) time.Time { return now.Add(d) })
}

// SleepUntil is Sleep until t.
func SleepUntil(ctx context.Context, name string, t time.Time) error {
	return sleepUntil(ctx, name, func(time.Time) time.Time { return t })
}

// sleepUntil parks the run until until(now), on the app's clock.
func sleepUntil(ctx context.Context, name string, until func(now time.Time) time.Time) error {
	st := runFrom(ctx)
	if st == nil {
		return fmt.Errorf("sleep %q: %w", name, ErrNotDurable)
	}
	if inParallelStep(ctx, st) {
		return fmt.Errorf("sleep %q: a step started with oke.Go (or a function of oke.First) cannot sleep", name)
	}
	return st.x.Sleep(ctx, name, until, st.fx.app.cfg.Clock)
}

// StepKey returns a key that is stable across every attempt of the current
// step of the current run ("run_…/step name"): pass it to providers that
// dedupe on an idempotency key. Outside a step it returns "". Fx.Fetch and
// Fx.Send attach it for you.
func StepKey(ctx context.Context) string {
	if s := stepFrom(ctx); s != nil {
		return s.key()
	}
	return ""
}

// NewID draws a random ID (a UUID v4) in a step of its own, named name: the
// run gets the same ID on every pick-up, so later steps can create things
// with it and find them again.
func NewID(ctx context.Context, name string) (string, error) {
	return Step(ctx, name, func(context.Context) (string, error) { return newUUID(), nil })
}

func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	const hexd = "0123456789abcdef"
	out := make([]byte, 0, 36)
	for i, c := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out = append(out, '-')
		}
		out = append(out, hexd[c>>4], hexd[c&0xf])
	}
	return string(out)
}

// Claim lets the first run that asks claim a business key ("order:"+id) in
// the store: it returns true for that run (every time it asks again, so a
// pick-up sees the same answer) and false for every other run. Use it so
// that a duplicate webhook or event stops instead of doing the work twice.
func Claim(ctx context.Context, key string) (bool, error) {
	st := runFrom(ctx)
	if st == nil {
		return false, fmt.Errorf("claim %q: %w", key, ErrNotDurable)
	}
	if co := st.fx.co; co != nil {
		return false, co.fail(fmt.Errorf("claim %q: a business-key claim is not in the run's transaction", key))
	}
	winner, err := st.fx.app.runs.ClaimKey(context.WithoutCancel(ctx), key, st.x.Run.ID)
	if err != nil {
		return false, fmt.Errorf("claim %q: %w", key, err)
	}
	return winner == st.x.Run.ID, nil
}

// Run starts a journal run of flow f with input in and returns its ID; the
// app's scheduler executes it. It is a call effect. Inside a step it starts
// the run exactly once, however often the step runs again; outside one,
// every call starts another run. f must be bound to the app (any binding,
// e.g. Internal()).
func Run[In, Out any](ctx context.Context, fx *Fx, f *Flow[In, Out], in In) (string, error) {
	if err := fx.record(EffectCall); err != nil {
		return "", err
	}
	a := fx.app
	if a.journal == nil {
		return "", fmt.Errorf("run %s: %w", f.f.name, ErrNotDurable)
	}
	if a.flows[f.f.name] != f.f {
		return "", fmt.Errorf("run %s: the flow is not bound to this app; bind it (e.g. app.Handle(oke.Internal(), flow)) so its runs can be picked up", f.f.name)
	}
	input, err := json.Marshal(in)
	if err != nil {
		return "", fmt.Errorf("run %s: encode input: %w", f.f.name, err)
	}
	dedupe := ""
	if s := stepFrom(ctx); s != nil {
		s.emits++
		dedupe = "run:" + s.key() + "#" + strconv.Itoa(s.emits) + ":" + f.f.name
	}
	return a.startRun(ctx, f.f, input, fx.identity, fx.runID(), "", dedupe)
}

// runID is the ID of the journal run fx belongs to, or "".
func (fx *Fx) runID() string {
	if fx.run != nil {
		return fx.run.Run.ID
	}
	return ""
}
