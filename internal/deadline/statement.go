package deadline

import (
	"context"
	"errors"
	"time"

	"github.com/okengine/oke/driver"
)

// Statement returns ctx bounded by d for a statement of the flow's own
// (fx.Store, Fx.Tx) whose rows may be read after the call returns, so the
// deadline cannot be released when it does: its timer ends it, at most d
// from now. A statement the deadline ends fails with an error that is both
// context.DeadlineExceeded and ErrTimeout (so driver.ErrUnavailable): the
// database did not answer in time. ctx is returned as is when it has a
// deadline of its own (the caller chose one) or d is zero or less.
func Statement(ctx context.Context, d time.Duration) context.Context {
	if d <= 0 {
		return ctx
	}
	if _, ok := ctx.Deadline(); ok {
		return ctx
	}
	c, cancel := context.WithTimeout(ctx, d)
	return &statement{Context: c, parent: ctx, cancel: cancel, d: d}
}

type statement struct {
	context.Context
	parent context.Context
	cancel context.CancelFunc // called by the timer of Context; kept for vet
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
