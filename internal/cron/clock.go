package cron

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Clock is where a schedule's loop reads the time and waits for its next
// tick: the real clock in an app, a Fake in tests (so that a test moves
// time instead of waiting for it).
type Clock interface {
	Now() time.Time
	// At returns a channel that receives once the clock has reached t, and
	// a function that releases the wait.
	At(t time.Time) (<-chan struct{}, func())
}

// Real is the system clock.
type Real struct{}

// Now is time.Now.
func (Real) Now() time.Time { return time.Now() }

// At arms a timer for t.
func (Real) At(t time.Time) (<-chan struct{}, func()) {
	c := make(chan struct{})
	timer := time.AfterFunc(time.Until(t), func() { close(c) })
	return c, func() { timer.Stop() }
}

// UseClock makes app (an *oke.App, before its Start) read its schedules'
// time from c. Package oke sets it; tests in this module call it. It is not
// part of oke's API.
var UseClock func(app any, c Clock)

// Fake is a clock that moves only when told (Set, Add). Safe for
// concurrent use.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waits   []*fakeWait
	changed chan struct{} // closed and replaced whenever waits changes
}

type fakeWait struct {
	at time.Time
	c  chan struct{}
}

// NewFake returns a fake clock that reads now.
func NewFake(now time.Time) *Fake {
	return &Fake{now: now, changed: make(chan struct{})}
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// At returns a channel closed once the fake time reaches t.
func (f *Fake) At(t time.Time) (<-chan struct{}, func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := &fakeWait{at: t, c: make(chan struct{})}
	if !t.After(f.now) {
		close(w.c)
		return w.c, func() {}
	}
	f.waits = append(f.waits, w)
	f.signal()
	return w.c, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for i, x := range f.waits {
			if x == w {
				f.waits = append(f.waits[:i], f.waits[i+1:]...)
				f.signal()
				return
			}
		}
	}
}

func (f *Fake) signal() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// Set moves the fake time to t (forward or back) and releases every wait
// for a time at or before it.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = t
	keep := f.waits[:0]
	for _, w := range f.waits {
		if t.Before(w.at) {
			keep = append(keep, w)
		} else {
			close(w.c)
		}
	}
	f.waits = keep
	f.signal()
}

// Add moves the fake time on by d.
func (f *Fake) Add(d time.Duration) { f.Set(f.Now().Add(d)) }

// Waits returns the times waited for now, earliest first.
func (f *Fake) Waits() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]time.Time, len(f.waits))
	for i, w := range f.waits {
		out[i] = w.at
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

// WaitFor blocks until at least n waits for times after the fake time are
// armed (the loops under test have done their work and wait for their next
// tick), or ctx ends.
func (f *Fake) WaitFor(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		armed, changed := len(f.waits), f.changed
		f.mu.Unlock()
		if armed >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
