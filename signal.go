package oke

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/internal/deadline"
)

// AwaitSignal waits, durably, for the signal named name sent to the current
// run (App.Signal, Fx.Signal, the admin API, `oke runs signal`), for at
// most timeout. It returns the signal's payload decoded into T and true, or
// the zero T and false when timeout passed first.
//
// The wait is two steps of the run: name, which saves the deadline the first
// time it is reached, and "name (outcome)", which saves what the wait got —
// the signal, taken from the store atomically with that save, or the
// timeout. While no signal has come, the run parks like a durable sleep:
// AwaitSignal returns ErrSleeping (return it from the flow; a request gets
// 204 No Content), and the run wakes when a signal arrives — at once, in
// this process or, on Postgres, any instance — or at the deadline. A
// pick-up after the outcome was saved gets it again.
//
// A signal sent before the wait is kept and delivered when the wait comes;
// a run's signals of one name are delivered in send order, each to exactly
// one wait. name is a step name (unique in the run): to wait for the same
// signal twice, use AwaitSignalStep with two step names.
func AwaitSignal[T any](ctx context.Context, name string, timeout time.Duration) (T, bool, error) {
	return AwaitSignalStep[T](ctx, name, name, timeout)
}

// AwaitSignalStep is AwaitSignal for the signal named signal, in the steps
// named step and "step (outcome)".
func AwaitSignalStep[T any](ctx context.Context, step, signal string, timeout time.Duration) (T, bool, error) {
	var zero T
	st := runFrom(ctx)
	if st == nil {
		return zero, false, fmt.Errorf("await signal %q: %w", signal, ErrNotDurable)
	}
	if co := st.fx.co; co != nil {
		// A signal arrives in the store, which this run is not in yet.
		return zero, false, co.fail(fmt.Errorf("await signal %q: a wait for a signal is not in the run's transaction", signal))
	}
	a := st.fx.app
	sg, ok := a.journal.(driver.Signaler)
	if !ok {
		return zero, false, fmt.Errorf("await signal %q: %w", signal, ErrCannotSignal)
	}
	payload, received, err := st.x.AwaitSignal(ctx, sg, step, signal, timeout)
	if errors.Is(err, ErrSleeping) {
		a.signalWaits.Store(st.x.Run.ID, signal)
	}
	if err != nil || !received {
		return zero, false, err
	}
	var v T
	if len(payload) == 0 {
		return v, true, nil // sent with no payload
	}
	if err := json.Unmarshal(payload, &v); err != nil {
		return zero, false, fmt.Errorf("run %s: signal %q: decode its payload into %T: %w", st.x.Run.ID, signal, v, err)
	}
	return v, true, nil
}

// afterPark closes the race of a run parked by AwaitSignal with a signal
// sent while the run was held (which could not wake it): runs.go's finish
// calls it once the run is parked.
func (a *App) afterPark(ctx context.Context, runID string, parked bool) {
	v, ok := a.signalWaits.LoadAndDelete(runID)
	if !ok || !parked {
		return
	}
	sg, _ := a.journal.(driver.Signaler)
	wctx, end := a.bound(ctx, "wake_for_signal")
	woke, err := sg.WakeForSignal(wctx, runID, v.(string))
	err = end(err)
	if err != nil {
		a.log.Error("oke: wake a run parked for a signal", "run", runID, "signal", v, "err", err)
		return // it wakes at its deadline, or when polled after the next send
	}
	if woke {
		a.wake()
	}
}

// A SignalOption configures a send (App.Signal, Fx.Signal).
type SignalOption func(*signalOpts)

type signalOpts struct {
	key       string
	authorize func(ctx context.Context, sender Identity, run driver.Run) error
}

// SignalKey dedupes the send on key: a run keeps one signal per key, so a
// send retried with the same key (a client's retry, a webhook delivered
// twice) delivers once. Without it every send is a new signal — except
// Fx.Signal inside a step, whose key is derived from the step's.
func SignalKey(key string) SignalOption { return func(o *signalOpts) { o.key = key } }

// SignalAuthorize replaces Fx.Signal's rule of who may signal a run (the
// sender's tenant and principal are the run's) with fn: the send goes on
// when fn returns nil; its error is returned as is (an *Error is the HTTP
// answer, e.g. Fail(403, "Forbidden", "…")).
func SignalAuthorize(fn func(ctx context.Context, sender Identity, run driver.Run) error) SignalOption {
	return func(o *signalOpts) { o.authorize = fn }
}

// Errors of a send, in a *SignalError.
var (
	// ErrSignalNoRun: no run has that ID (or, through Fx.Signal, none the
	// sender may see).
	ErrSignalNoRun = &Error{Status: http.StatusNotFound, Code: "RunNotFound", Message: "No such run."}
	// ErrSignalRunFinished: the run has completed or failed; it waits for
	// nothing any more.
	ErrSignalRunFinished = &Error{Status: http.StatusConflict, Code: "RunFinished", Message: "This run has finished; it takes no more signals."}
	// ErrCannotSignal: the app's journal driver keeps no signals (it does
	// not implement driver.Signaler).
	ErrCannotSignal = errors.New("oke: this app's journal driver keeps no signals (it does not implement driver.Signaler)")
)

// SignalError is the error of a send that did not happen. Err is
// ErrSignalNoRun, ErrSignalRunFinished, the error of a SignalAuthorize hook,
// or the store's; over HTTP an *Error in it is the answer.
type SignalError struct {
	RunID, Name string
	Err         error
}

func (e *SignalError) Error() string {
	return fmt.Sprintf("signal %q to run %s: %v", e.Name, e.RunID, e.Err)
}

func (e *SignalError) Unwrap() error { return e.Err }

// Signal sends the signal named name, with payload (encoded as JSON), to run
// runID: the run's next AwaitSignal of that name receives it — at once if
// the run waits for it now (it wakes), or when it comes to the wait. The
// signal is stored durably before Signal returns. With SignalKey, sending
// the same key again delivers once. A run that does not exist or has
// finished gives a *SignalError (ErrSignalNoRun, ErrSignalRunFinished).
//
// Signal is for trusted code (the app's own, tools): it checks no identity.
// Handlers reached by clients send with Fx.Signal.
func (a *App) Signal(ctx context.Context, runID, name string, payload any, opts ...SignalOption) error {
	var o signalOpts
	for _, f := range opts {
		f(&o)
	}
	return a.signal(ctx, runID, name, payload, o)
}

func (a *App) signal(ctx context.Context, runID, name string, payload any, o signalOpts) error {
	if a.journal == nil {
		return &SignalError{RunID: runID, Name: name, Err: ErrNotDurable}
	}
	if err := sendSignal(ctx, a.journal, a.cfg.StoreTimeout, runID, name, payload, o); err != nil {
		return err
	}
	a.wake()
	return nil
}

// SignalRun is App.Signal on a journal of its own, for tools that open a
// store without an app (oke runs signal -data DIR). A run it wakes is picked
// up by an app's scheduler: at once on Postgres (the driver notifies every
// instance), else when an app next polls or opens the store.
func SignalRun(ctx context.Context, j driver.Journal, runID, name string, payload any, opts ...SignalOption) error {
	var o signalOpts
	for _, f := range opts {
		f(&o)
	}
	return sendSignal(ctx, j, DefaultStoreTimeout, runID, name, payload, o)
}

// sendSignal sends one signal on j, the call bounded by timeout
// (deadline.Bound), and not ended by ctx's cancellation: a signal sent
// half-way is known only once the store answers.
func sendSignal(ctx context.Context, j driver.Journal, timeout time.Duration, runID, name string, payload any, o signalOpts) error {
	serr := func(err error) error { return &SignalError{RunID: runID, Name: name, Err: err} }
	sg, ok := j.(driver.Signaler)
	if !ok {
		return serr(ErrCannotSignal)
	}
	if name == "" {
		return serr(errors.New("empty signal name"))
	}
	data, err := signalPayload(payload)
	if err != nil {
		return serr(err)
	}
	if o.key == "" {
		o.key = "sig_" + newUUID()
	}
	sctx, end := deadline.Call(context.WithoutCancel(ctx), timeout, "send_signal")
	_, err = sg.SendSignal(sctx, driver.Signal{RunID: runID, Name: name, Key: o.key, Payload: data})
	err = end(err)
	switch {
	case errors.Is(err, driver.ErrSignalDuplicate):
		return nil // sent before: delivered once
	case errors.Is(err, driver.ErrNotFound):
		return serr(ErrSignalNoRun)
	case errors.Is(err, driver.ErrRunFinished):
		return serr(ErrSignalRunFinished)
	case err != nil:
		return serr(err)
	}
	return nil
}

// signalPayload is payload as JSON: json.RawMessage and []byte of valid JSON
// as they are.
func signalPayload(payload any) ([]byte, error) {
	switch p := payload.(type) {
	case json.RawMessage:
		if len(p) == 0 {
			return []byte("null"), nil
		}
		if !json.Valid(p) {
			return nil, errors.New("payload is not valid JSON")
		}
		return p, nil
	}
	b, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("encode payload: %w", err)
	}
	return b, nil
}

// Signal sends a signal to run runID from a flow, as App.Signal does, with
// the flow's caller as sender: a flow bound to a route (say POST
// /orders/{id}/approve) is how clients signal runs over HTTP, behind the
// app's gate. The sender's tenant and principal must be the run's — a run
// of another caller is ErrSignalNoRun (404), as if it did not exist —
// unless SignalAuthorize decides instead. Inside a step of a durable run
// the signal is sent exactly once however often the step runs again (its
// key comes from the step's, unless SignalKey sets one). It is a call
// effect.
func (fx *Fx) Signal(ctx context.Context, runID, name string, payload any, opts ...SignalOption) error {
	if err := fx.record(EffectCall); err != nil {
		return err
	}
	a := fx.app
	var o signalOpts
	for _, f := range opts {
		f(&o)
	}
	if a.journal == nil {
		return &SignalError{RunID: runID, Name: name, Err: ErrNotDurable}
	}
	run, _, err := a.runs.GetRun(context.WithoutCancel(ctx), runID)
	switch {
	case errors.Is(err, driver.ErrNotFound):
		return &SignalError{RunID: runID, Name: name, Err: ErrSignalNoRun}
	case err != nil:
		return &SignalError{RunID: runID, Name: name, Err: err}
	}
	if o.authorize != nil {
		if err := o.authorize(ctx, fx.identity, run); err != nil {
			return &SignalError{RunID: runID, Name: name, Err: err}
		}
	} else if run.Tenant != fx.identity.Tenant || run.Principal != fx.identity.Principal {
		return &SignalError{RunID: runID, Name: name, Err: ErrSignalNoRun}
	}
	if o.key == "" {
		if s := stepFrom(ctx); s != nil {
			s.emits++
			o.key = "step:" + s.key() + "#" + strconv.Itoa(s.emits)
		}
	}
	return a.signal(ctx, runID, name, payload, o)
}

// Signals returns the signals sent to run runID, in send order, each with
// the step that received it (0 while it waits for a wait), for tools.
func (a *App) Signals(ctx context.Context, runID string) ([]driver.Signal, error) {
	sg, ok := a.journal.(driver.Signaler)
	if !ok {
		return nil, fmt.Errorf("signals of %s: %w", runID, ErrCannotSignal)
	}
	ctx, end := a.bound(ctx, "signals")
	sigs, err := sg.Signals(ctx, runID)
	return sigs, end(err)
}
