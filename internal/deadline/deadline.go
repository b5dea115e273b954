// Package deadline bounds oke's calls to its store: every claim, lookup,
// completion, journal write and the flow's transaction's BEGIN and COMMIT
// as oke issues them. A store that stops answering (a hung server, a
// stalled disk) then fails each call after the app's StoreTimeout instead
// of holding the request, and its goroutine, for as long as the store
// hangs; the caller answers an honest 503.
//
// A bound costs little, because it is on every request's path: calls on a
// context nothing cancels (a request's context.WithoutCancel, the
// background) that share a duration share one timer (Bound), and a flow's
// statement's deadline ends with the statement, or with the flow's
// function when its rows are read after (Statement), not when its timer
// fires.
package deadline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/internal/tracing"
)

// ErrTimeout is what a store call that did not answer within its deadline
// fails with (wrapped with the call's own error). It is also
// driver.ErrUnavailable: whether the call took effect is unknown, and
// callers fail closed as for any store failure.
var ErrTimeout = &timeoutError{}

type timeoutError struct{}

func (*timeoutError) Error() string        { return "the store did not answer in time" }
func (*timeoutError) Is(target error) bool { return target == driver.ErrUnavailable }

// Bound returns ctx with a deadline d from now (none when d is zero or
// less), and end, which the caller must call with the call's error once the
// call returned: it releases the deadline and returns the error, marked
// ErrTimeout when the deadline, not the caller's ctx, ended the call. Once
// end is called the context is done (context.Canceled). On a ctx that
// nothing cancels, the calls in flight bounded by the same d share one
// timer, set for the oldest one's deadline (see watch): a call costs its
// context and end, not a timer of its own.
//
//	ctx, end := deadline.Bound(ctx, timeout)
//	row, err := d.Get(ctx, key)
//	err = end(err)
func Bound(ctx context.Context, d time.Duration) (context.Context, func(error) error) {
	if d <= 0 {
		return ctx, func(err error) error { return err }
	}
	if ctx.Done() == nil {
		// Nothing cancels ctx (a request's context.WithoutCancel, the
		// background): the call joins the calls in flight bounded by d,
		// which share one timer (watch).
		b := watchOf(d).start(ctx)
		return b, b.end
	}
	bctx, cancel := context.WithTimeout(ctx, d)
	return bctx, func(err error) error {
		cancel()
		return mark(ctx, bctx, d, err)
	}
}

func mark(ctx, bctx context.Context, d time.Duration, err error) error {
	if err == nil || ctx.Err() != nil || !errors.Is(bctx.Err(), context.DeadlineExceeded) {
		return err
	}
	return markTimeout(d, err)
}

// markTimeout marks err, which a call's deadline d ended, ErrTimeout.
func markTimeout(d time.Duration, err error) error {
	if err == nil || errors.Is(err, ErrTimeout) {
		return err
	}
	return fmt.Errorf("%w (%v): %w", ErrTimeout, d, err)
}

// Call is Bound for the store call op ("claim", "get", "save_step", …),
// traced: when ctx's span records, the call gets a span of its own
// (tracing.Store), ended with the call's error by end.
func Call(ctx context.Context, d time.Duration, op string) (context.Context, func(error) error) {
	tctx, done := tracing.Store(ctx, op)
	if done == nil {
		return Bound(ctx, d)
	}
	bctx, end := Bound(tctx, d)
	return bctx, func(err error) error { return done(end(err)) }
}
