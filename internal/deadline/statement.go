package deadline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/okengine/oke/driver"
)

// Statement returns ctx bounded by d for a statement of the flow's own
// (fx.Store, Fx.Tx) whose rows may be read after the call returns, so the
// deadline cannot end when the call does; and release, which ends the
// bound (stops its timer) once the statement's rows are read or can no
// longer be. Until release, the timer ends the statement at most d from
// now. The caller must call release: a bound left to its timer keeps the
// context, its timer and what they hold alive for d after the statement,
// which at thousands of requests a second is megabytes of heap for the
// garbage collector to scan. oke releases a statement that returns no rows
// when it returns, and the others when the flow's function does.
//
// A statement the deadline ends fails with an error that is both
// context.DeadlineExceeded and ErrTimeout (so driver.ErrUnavailable): the
// database did not answer in time. ctx is returned as is, and release is
// nil, when ctx has a deadline of its own (the caller chose one) or d is
// zero or less.
func Statement(ctx context.Context, d time.Duration) (_ context.Context, release func()) {
	if d <= 0 {
		return ctx, nil
	}
	if _, ok := ctx.Deadline(); ok {
		return ctx, nil
	}
	if ctx.Done() == nil {
		// Nothing cancels ctx (a flow's context, which outlives its
		// request): the statement joins the calls bounded by d, which
		// share one timer (watch), instead of starting a timer of its own.
		b := watchOf(d).start(ctx)
		b.stmt = true
		return b, b.release
	}
	c, cancel := context.WithTimeout(ctx, d)
	return &statement{Context: c, parent: ctx, d: d}, cancel
}

// release ends a statement's bound (Statement).
func (b *bound) release() { b.end(nil) }

type statement struct {
	context.Context
	parent context.Context
	d      time.Duration
}

// Err is the deadline's ErrTimeout (also context.DeadlineExceeded) when it
// ended the context, else the parent's error.
func (s *statement) Err() error {
	err := s.Context.Err()
	if errors.Is(err, context.DeadlineExceeded) && s.parent.Err() == nil {
		return statementTimeout{d: s.d}
	}
	return err
}

// Marked returns err, from a statement sent on a context of Statement's,
// marked ErrTimeout when the statement's deadline ended it (whatever error
// the database's driver made of that).
func Marked(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, ErrTimeout) {
		return err
	}
	var cerr error
	switch s := ctx.(type) {
	case *statement:
		cerr = s.Err()
	case *bound:
		if !s.stmt {
			return err
		}
		cerr = s.Err()
	default:
		return err
	}
	if t, ok := cerr.(statementTimeout); ok {
		return fmt.Errorf("%w: %w", t, err)
	}
	return err
}

// statementTimeout is the error of a statement its deadline ended.
type statementTimeout struct{ d time.Duration }

func (e statementTimeout) Error() string {
	return "the database did not answer in time (" + e.d.String() + "): " + context.DeadlineExceeded.Error()
}

func (statementTimeout) Is(target error) bool {
	return target == context.DeadlineExceeded || target == ErrTimeout || target == driver.ErrUnavailable
}

// Timeout reports true like context.DeadlineExceeded's (a net.Error-style
// timeout).
func (statementTimeout) Timeout() bool { return true }
