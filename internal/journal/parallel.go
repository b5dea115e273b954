package journal

import (
	"errors"
	"fmt"
	"sync"
)

// ErrEarlierStepUnsaved: a step's result was not saved because a step
// before it — one running at the same time — ended without a saved result
// (a plain error, or a failed save). Saves keep the steps' order, so that a
// pick-up replays them in the order the code took them; the run goes on from
// the first unsaved step on its next attempt.
var ErrEarlierStepUnsaved = errors.New("journal: an earlier step running at the same time was not saved")

// order keeps saves in step order once steps run at the same time
// (Exec.Parallel): the save of step n waits until step n-1's has settled.
type order struct {
	mu      sync.Mutex
	cond    sync.Cond
	through int // every step up to this one is saved
	broken  int // the first step that will not be saved; 0: none
	running sync.WaitGroup
}

// Parallel prepares x for steps that run at the same time and returns the
// WaitGroup the caller adds each one's goroutine to (Drain waits for them).
// Call it from the flow's goroutine, before a step runs concurrently; it is
// cheap to call again.
func (x *Exec) Parallel() *sync.WaitGroup {
	if x.par == nil {
		o := &order{}
		o.cond.L = &o.mu
		x.mu.Lock()
		o.through = x.next // every step taken so far is saved or settled by now
		if len(x.saved) > o.through {
			o.through = len(x.saved)
		}
		x.mu.Unlock()
		x.par = o
	}
	return &x.par.running
}

// InParallel reports whether steps of this execution have run at the same
// time (Parallel was called).
func (x *Exec) InParallel() bool { return x.par != nil }

// Drain waits until every step started to run at the same time has returned
// and settled its save: the execution may then end or park.
func (x *Exec) Drain() {
	if x.par != nil {
		x.par.running.Wait()
	}
}

// Abandon says that pending step p will not be saved (its function failed
// with a plain error): later steps running at the same time cannot be saved
// before it, and fail with ErrEarlierStepUnsaved.
func (x *Exec) Abandon(p Pending) {
	if o := x.par; o != nil {
		o.mu.Lock()
		if o.broken == 0 || p.Seq < o.broken {
			o.broken = p.Seq
		}
		o.cond.Broadcast()
		o.mu.Unlock()
	}
}

// turn waits until step seq may be saved: every step before it is saved.
// The steps before it belong to this execution, which waits for them all
// (Drain), so the wait ends.
func (o *order) turn(seq int) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for o.through < seq-1 {
		if o.broken != 0 && o.broken < seq {
			return fmt.Errorf("%w (step %d)", ErrEarlierStepUnsaved, o.broken)
		}
		o.cond.Wait()
	}
	return nil
}

// settled records that step seq's save ended: saved, or not (then the
// steps after it are not saved either).
func (o *order) settled(seq int, saved bool) {
	o.mu.Lock()
	if saved && seq == o.through+1 {
		o.through = seq
	} else if !saved && (o.broken == 0 || seq < o.broken) {
		o.broken = seq
	}
	o.cond.Broadcast()
	o.mu.Unlock()
}
