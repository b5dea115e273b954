package deadline

import (
	"context"
	"sync"
	"time"
)

// Armed is a context that ends when its parent does, or when a deadline
// set with Arm passes before Disarm clears it. It is for a store call whose
// context outlives the call — a transaction that database/sql keeps its
// BEGIN's context for until COMMIT, rows read after their query returned —
// where Bound's deadline would end more than the call.
type Armed struct {
	parent context.Context
	done   chan struct{}

	mu    sync.Mutex
	err   error
	timer *time.Timer
	d     time.Duration
}

// NewArmed returns an Armed context on parent, with no deadline yet.
func NewArmed(parent context.Context) *Armed {
	a := &Armed{parent: parent, done: make(chan struct{})}
	context.AfterFunc(parent, func() { a.end(parent.Err()) })
	return a
}

// Arm sets the deadline d from now (none when d is zero or less), for the
// call about to be made.
func (a *Armed) Arm(d time.Duration) {
	if d <= 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil {
		return
	}
	if a.timer != nil {
		a.timer.Stop()
	}
	a.d = d
	a.timer = time.AfterFunc(d, func() { a.end(context.DeadlineExceeded) })
}

// Disarm clears the deadline once the call returned. It returns err, marked
// ErrTimeout when the deadline ended the call.
func (a *Armed) Disarm(err error) error {
	a.mu.Lock()
	if a.timer != nil {
		a.timer.Stop()
		a.timer = nil
	}
	timedOut := a.err == context.DeadlineExceeded && a.parent.Err() == nil
	d := a.d
	a.mu.Unlock()
	if timedOut {
		return markTimeout(d, err)
	}
	return err
}

func (a *Armed) end(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil {
		return
	}
	a.err = err
	close(a.done)
}

// Deadline implements context.Context: the parent's (an armed deadline is
// not reported, since Disarm may clear it).
func (a *Armed) Deadline() (time.Time, bool) { return a.parent.Deadline() }

// Done implements context.Context.
func (a *Armed) Done() <-chan struct{} { return a.done }

// Err implements context.Context.
func (a *Armed) Err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// Value implements context.Context.
func (a *Armed) Value(key any) any { return a.parent.Value(key) }
