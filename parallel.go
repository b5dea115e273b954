package oke

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/okengine/oke/internal/journal"
)

// ErrEarlierStepUnsaved: a step started with Go ran, but its result was not
// saved, because a step started before it ended without a saved result (a
// plain error). Steps are saved in the order they were started; both run
// again on the run's next attempt.
var ErrEarlierStepUnsaved = journal.ErrEarlierStepUnsaved

// Future is a step started with Go: it runs while the flow goes on, and
// Wait returns its result once it has run and been saved.
type Future[T any] struct {
	name string
	done chan struct{}
	v    T
	err  error
}

// Waiter is a Future of any type, for WaitAll.
type Waiter interface {
	// Wait waits for the step and returns its error (its value is the
	// Future's Wait).
	wait(ctx context.Context) error
	stepName() string
}

// inParallelStep reports whether ctx is (inside) a step started with Go or
// a function of First, in an execution st that started one.
func inParallelStep(ctx context.Context, st *runState) bool {
	return st.x.InParallel() && ctx.Value(parallelKey{}) != nil
}

// parallelKey marks the context of a step that runs at the same time as
// others (Go): it may not take steps of its own, open Fx.Tx, or sleep.
type parallelKey struct{}

// Go starts step name, running fn at the same time as the flow and its
// other such steps, and returns its Future: start several, then wait for
// them all (WaitAll, or each Future's Wait).
//
//	rate := oke.Go(ctx, "fx rate", fetchRate)
//	stock := oke.Go(ctx, "stock", checkStock)
//	if err := oke.WaitAll(ctx, rate, stock); err != nil {
//		return oke.Response[Quote]{}, err
//	}
//	r, _ := rate.Wait(ctx)
//
// Each is a step of its own, journaled as Step journals one: run once per
// run, its saved result returned on every pick-up without running fn. The
// steps take their places in the journal in the order Go was called,
// whatever order they finish in — a step that finishes first waits for the
// saves of the steps started before it — so a pick-up replays them the
// same way every time. A declared failure is saved and returned again; a
// plain error is not, and neither are the results of the steps started
// after it (their Wait says ErrEarlierStepUnsaved): they run again on the
// run's next attempt.
//
// A step started with Go runs on a context of its own, and may not take
// steps of its own (Step, Sleep, Go inside fn), nor open Fx.Tx: its writes
// are its own, like a step's outside the flow's transaction. The execution
// waits for every Future it started before it ends or parks, waited for or
// not. Outside a durable flow, Go runs fn in a goroutine.
func Go[T any](ctx context.Context, name string, fn func(ctx context.Context) (T, error)) *Future[T] {
	f := &Future[T]{name: name, done: make(chan struct{})}
	if ctx.Value(parallelKey{}) != nil {
		f.err = fmt.Errorf("step %q: a step started with oke.Go cannot start steps of its own", name)
		close(f.done)
		return f
	}
	st := runFrom(ctx)
	if st == nil {
		go func() {
			defer close(f.done)
			f.v, f.err = fn(context.WithValue(ctx, parallelKey{}, true))
		}()
		return f
	}
	running := st.x.Parallel()
	saved, p, err := st.x.Next(ctx, name)
	switch {
	case err != nil:
		f.err = err
		close(f.done)
		return f
	case saved != nil:
		f.v, f.err = savedOutcome[T](name, saved.Result, saved.Failure)
		close(f.done)
		return f
	}
	sc := context.WithValue(st.stepContext(ctx, p.Seq, name), parallelKey{}, true)
	running.Add(1)
	go func() {
		defer running.Done()
		defer close(f.done)
		v, err := fn(sc)
		if err != nil && st.fx.co != nil {
			st.x.Abandon(p)
			f.err = st.fx.co.fail(fmt.Errorf("step %q: %w", name, err))
			return
		}
		var result, failure []byte
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				st.x.Abandon(p) // not saved: the step runs again on the next attempt
				f.err = err
				return
			}
			if failure, err = json.Marshal(storedError{Status: e.Status, Code: e.Code, Message: e.Message}); err != nil {
				st.x.Abandon(p)
				f.err = fmt.Errorf("step %q: encode failure: %w", name, err)
				return
			}
		} else if result, err = json.Marshal(v); err != nil {
			st.x.Abandon(p)
			f.err = fmt.Errorf("step %q: encode result: %w", name, err)
			return
		}
		if err := st.x.Save(context.WithoutCancel(ctx), p, result, failure); err != nil {
			f.err = fmt.Errorf("step %q: %w", name, err)
			return
		}
		if failure != nil {
			f.v, f.err = savedOutcome[T](name, nil, failure)
			return
		}
		f.v = v
	}()
	return f
}

// Wait waits until the step has run and been saved, or ctx ends, and
// returns its result.
func (f *Future[T]) Wait(ctx context.Context) (T, error) {
	select {
	case <-f.done:
		return f.v, f.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// Done is closed once the step has run and its save has ended.
func (f *Future[T]) Done() <-chan struct{} { return f.done }

func (f *Future[T]) wait(ctx context.Context) error {
	_, err := f.Wait(ctx)
	return err
}

func (f *Future[T]) stepName() string { return f.name }

// WaitAll waits for every step of fs and returns the first error among
// them in the order given, nil when all succeeded (or ctx's error once it
// ends). It waits for them all even after an error.
func WaitAll(ctx context.Context, fs ...Waiter) error {
	var first error
	for _, f := range fs {
		if err := f.wait(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// firstResult is what First saves: which function won, and its result.
type firstResult struct {
	Index int             `json:"index"`
	Value json.RawMessage `json:"value"`
}

// First runs fns at the same time, as one step named name, and returns the
// index and result of the first to succeed; the others' contexts are
// cancelled then. The winner is saved as the step's result, so a pick-up
// returns the same index and value whatever would finish first now. A
// declared failure (*Error) counts as an answer, and wins as one (saved,
// returned again); when every function fails with a plain error, First
// returns them joined and saves nothing: the step runs again on the next
// attempt. The functions share the step (one StepKey): what each does
// outside the winner's result is not saved — give the losers nothing to do
// that must happen once, or dedupe it with the step's key.
func First[T any](ctx context.Context, name string, fns ...func(ctx context.Context) (T, error)) (int, T, error) {
	var zero T
	if len(fns) == 0 {
		return -1, zero, fmt.Errorf("step %q: oke.First needs at least one function", name)
	}
	r, err := Step(ctx, name, func(ctx context.Context) (firstResult, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		type answer struct {
			i   int
			v   T
			err error
		}
		answers := make(chan answer, len(fns))
		var wg sync.WaitGroup
		for i, fn := range fns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				v, err := fn(context.WithValue(ctx, parallelKey{}, true))
				answers <- answer{i, v, err}
			}()
		}
		defer wg.Wait()
		var errs []error
		for range fns {
			a := <-answers
			var e *Error
			if a.err != nil && !errors.As(a.err, &e) {
				errs = append(errs, fmt.Errorf("function %d: %w", a.i, a.err))
				continue
			}
			cancel()
			if a.err != nil {
				return firstResult{}, a.err
			}
			b, err := json.Marshal(a.v)
			if err != nil {
				return firstResult{}, fmt.Errorf("function %d: encode result: %w", a.i, err)
			}
			return firstResult{Index: a.i, Value: b}, nil
		}
		return firstResult{}, errors.Join(errs...)
	})
	if err != nil {
		return -1, zero, err
	}
	var v T
	if err := json.Unmarshal(r.Value, &v); err != nil {
		return -1, zero, fmt.Errorf("step %q: decode saved result into %T: %w", name, v, err)
	}
	return r.Index, v, nil
}
