package deadline

import (
	"context"
	"sync"
	"time"
)

// A watch bounds the calls in flight that share one duration d with one
// timer, not one each: calls start in order, so their deadlines (start +
// d) are in order too, and the watch's timer is set for the oldest one's.
// A call that returns leaves the list, which costs a lock and two
// pointers, not a runtime timer's start and stop; the timer, once it
// fires, ends the calls whose deadlines passed and is set again for the
// oldest left. Calls return long before their deadline, so the timer fires
// about once per d, whatever the rate of calls.
type watch struct {
	d          time.Duration
	mu         sync.Mutex
	head, tail *bound
	timer      *time.Timer
	pending    bool // the timer is set
}

// watches holds a watch per duration (an app's StoreTimeout: one or a
// few per process).
var watches sync.Map // time.Duration → *watch

func watchOf(d time.Duration) *watch {
	if w, ok := watches.Load(d); ok {
		return w.(*watch)
	}
	w, _ := watches.LoadOrStore(d, &watch{d: d})
	return w.(*watch)
}

// bound is the context of one call a watch bounds: its parent's values,
// no cancellation of its parent's (it has none: see Bound), a deadline.
// Every store call makes one, so it is kept to 128 bytes: what only some
// calls need (AfterFunc's functions) hangs off a pointer, and its other
// faces (quiet, hushed) are the same struct under another type.
type bound struct {
	parent   context.Context
	w        *watch
	deadline time.Time
	prev     *bound // in w's list while in flight; guarded by w.mu
	next     *bound

	mu     sync.Mutex
	listed bool          // in w's list; guarded by w.mu
	cut    bool          // the deadline set sock's deadline to the past
	stmt   bool          // a flow's statement's (Statement): its Err says statementTimeout
	done   chan struct{} // made when asked for
	err    error         // DeadlineExceeded once the deadline passed, Canceled once ended
	afters *afters       // AfterFunc's, called when b ends
	sock   Socket        // the call's socket, while Attach ties it to b
}

// afters are the functions of AfterFunc's, to call when their bound ends.
type afters struct {
	nextID uint64
	fs     []after
}

// after is a function of AfterFunc's, to call when its bound ends.
type after struct {
	id uint64
	f  func()
}

// start returns a bound of parent, which has no Done channel, for a call
// starting now.
func (w *watch) start(parent context.Context) *bound {
	b := &bound{parent: parent, w: w}
	w.mu.Lock()
	b.deadline = time.Now().Add(w.d)
	b.prev, b.listed = w.tail, true
	if w.tail != nil {
		w.tail.next = b
	} else {
		w.head = b
	}
	w.tail = b
	if !w.pending {
		// The timer is set for no earlier call's deadline: set it for
		// this one's.
		if w.timer == nil {
			w.timer = time.AfterFunc(w.d, w.fire)
		} else {
			w.timer.Reset(w.d)
		}
		w.pending = true
	}
	w.mu.Unlock()
	return b
}

// unlist takes b out of w's list; w.mu is held.
func (w *watch) unlist(b *bound) {
	if !b.listed {
		return
	}
	if b.prev != nil {
		b.prev.next = b.next
	} else {
		w.head = b.next
	}
	if b.next != nil {
		b.next.prev = b.prev
	} else {
		w.tail = b.prev
	}
	b.prev, b.next, b.listed = nil, nil, false
}

// fire ends the calls whose deadlines passed, and sets the timer for the
// oldest call left.
func (w *watch) fire() {
	var over []*bound
	w.mu.Lock()
	now := time.Now()
	for b := w.head; b != nil && !b.deadline.After(now); b = w.head {
		w.unlist(b)
		over = append(over, b)
	}
	if w.head != nil {
		w.timer.Reset(w.head.deadline.Sub(now))
	} else {
		w.pending = false
	}
	w.mu.Unlock()
	for _, b := range over {
		b.stop(context.DeadlineExceeded)
	}
}

// stop ends b with err, unless it ended already, and calls its AfterFunc
// functions.
func (b *bound) stop(err error) {
	b.mu.Lock()
	if b.err != nil {
		b.mu.Unlock()
		return
	}
	b.err = err
	if err == context.DeadlineExceeded {
		b.cutLocked()
	}
	if b.done != nil {
		close(b.done)
	}
	var fs []after
	if b.afters != nil {
		fs = b.afters.fs
		b.afters.fs = nil
	}
	b.mu.Unlock()
	for _, a := range fs {
		a.f()
	}
}

// AfterFunc arranges for f to be called once b ends, and returns stop,
// which keeps it from being called if it was not yet. The context package
// looks for this method on a parent (context.AfterFunc, and a
// context.WithCancel of b, as pgx's watch of a query's context is):
// without it, each would start a goroutine to wait for b's Done. f is
// called on the goroutine that ends b; the context package's functions
// only cancel a context there (context.AfterFunc's own function runs on a
// goroutine of its own).
func (b *bound) AfterFunc(f func()) (stop func() bool) {
	b.mu.Lock()
	if b.err != nil {
		b.mu.Unlock()
		f()
		return func() bool { return false }
	}
	if b.afters == nil {
		b.afters = &afters{}
	}
	as := b.afters
	as.nextID++
	id := as.nextID
	as.fs = append(as.fs, after{id: id, f: f})
	b.mu.Unlock()
	return func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		for i, a := range as.fs {
			if a.id == id {
				as.fs = append(as.fs[:i], as.fs[i+1:]...)
				return true
			}
		}
		return false
	}
}

// end ends b's call with its error: b leaves its watch's list, its context
// ends (context.Canceled, as a released context.WithTimeout's), and err is
// returned marked ErrTimeout when the deadline ended the call.
func (b *bound) end(err error) error {
	b.w.mu.Lock()
	b.w.unlist(b)
	b.w.mu.Unlock()
	b.mu.Lock()
	timedOut := b.err == context.DeadlineExceeded
	b.mu.Unlock()
	b.stop(context.Canceled)
	if timedOut {
		return markTimeout(b.w.d, err)
	}
	return err
}

// Deadline implements context.Context.
func (b *bound) Deadline() (time.Time, bool) { return b.deadline, true }

// Done implements context.Context.
func (b *bound) Done() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done == nil {
		b.done = make(chan struct{})
		if b.err != nil {
			close(b.done)
		}
	}
	return b.done
}

// Err implements context.Context. A statement's bound (Statement) ended
// by its deadline says statementTimeout, which is also
// context.DeadlineExceeded and ErrTimeout.
func (b *bound) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stmt && b.err == context.DeadlineExceeded {
		return statementTimeout{d: b.w.d}
	}
	return b.err
}

// Value implements context.Context.
func (b *bound) Value(key any) any { return b.parent.Value(key) }
