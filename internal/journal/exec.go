// Package journal executes durable runs over a driver.Journal: it replays
// saved steps in order, saves new ones, keeps the run's lease, and detects
// code that no longer matches its journal. It knows nothing of HTTP or of
// flows' types; package oke drives it.
package journal

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/internal/deadline"
	"github.com/okengine/oke/internal/lease"
)

// Errors of an execution.
var (
	// ErrParked is returned by every step after a durable sleep parked the
	// run: the flow must return (Sleep's error says so).
	ErrParked = errors.New("journal: run parked by a durable sleep")
	// ErrSaveFailed: a step ran but its result could not be saved (the
	// store was unreachable). The run is retried later; the step runs again.
	ErrSaveFailed = errors.New("journal: step result could not be saved")
	// ErrLostLease: another owner took the run (this one's lease lapsed).
	ErrLostLease = errors.New("journal: the run's lease was lost to another owner")
	// ErrRetrying is returned by every step after a step's failed attempt
	// parked the run until its retry (ParkRetry): the flow must return.
	ErrRetrying = errors.New("journal: run parked until a step's retry")
)

// RetryPark is a run parked by a step's failed attempt until its retry.
type RetryPark struct {
	Step     string
	WakeAt   time.Time
	Attempts int   // the step's attempts so far (the failed one included)
	Err      error // the failed attempt's error
}

// MismatchError: the code called a step that is not the one the journal saved
// at that position, or called one name twice.
type MismatchError struct {
	RunID   string
	Seq     int
	Saved   string // the step saved at Seq ("" for a duplicate name)
	Called  string
	Message string
}

func (e *MismatchError) Error() string { return e.Message }

// Exec is one execution (one pick-up) of a run. Steps are taken in order;
// a run's steps must not be called concurrently.
type Exec struct {
	J     driver.Journal
	Run   driver.Run
	Owner string
	Lease time.Duration
	// StoreTimeout bounds each store call the execution makes itself (a
	// save in the caller's transaction, a signal's take; the journal's own
	// calls are bounded by the journal given, deadline.Journal). Zero or
	// less: no bound.
	StoreTimeout time.Duration
	report       Reporter

	mu        sync.Mutex
	saved     []driver.Step
	next      int      // steps taken so far in this execution
	taken     []string // names taken so far (small runs), in takeBuf
	takeBuf   [14]string
	takenBits uint64 // a bit per name in taken, at nameHash
	// last is when this execution last saved a step (after its start):
	// where the next step's time begins. One clock read per step.
	last   time.Duration
	names  map[string]bool // the same, once there are many
	parked bool
	wakeAt time.Time
	retry  *RetryPark // set by ParkRetry
	failed error      // ErrSaveFailed / ErrLostLease once hit
	keeper lease.Keeper
	base   time.Time // when the execution began, with a monotonic reading
	par    *order    // set once steps run at the same time (Parallel)
}

// Reporter is told of the store failures an execution hits (a failed save,
// a failed lease renewal), for logs.
type Reporter interface {
	ReportRun(runID, op string, err error)
}

// Start wraps an acquired or created run for execution and starts renewing
// its lease. report may be nil.
func Start(p *lease.Pool, j driver.Journal, run driver.Run, saved []driver.Step, owner string, lease time.Duration, report Reporter) *Exec {
	x := new(Exec)
	x.Init(p, j, run, saved, owner, lease, report, time.Now())
	return x
}

// Init is Start for an Exec the caller allocated (as part of a larger
// struct): it must be new, and must not move or be copied afterwards. now is
// the time now, read by the caller (with its monotonic reading, as
// time.Now gives it): the step timings count from it.
func (x *Exec) Init(p *lease.Pool, j driver.Journal, run driver.Run, saved []driver.Step, owner string, lease time.Duration, report Reporter, now time.Time) {
	x.J, x.Run, x.Owner, x.Lease, x.saved, x.report = j, run, owner, lease, saved, report
	x.taken = x.takeBuf[:0]
	x.base = now
	x.keeper.Start(p, lease, (*holder)(x))
}

// holder is the Exec as the lease.Holder of its run's lease.
type holder Exec

func (h *holder) Renew(ctx context.Context, d time.Duration) error {
	return h.J.RenewRun(ctx, h.Run.ID, h.Owner, d)
}

func (h *holder) Lost() {
	h.mu.Lock()
	if h.failed == nil {
		h.failed = ErrLostLease
	}
	h.mu.Unlock()
}

func (h *holder) RenewFailed(err error) {
	if h.report != nil {
		h.report.ReportRun(h.Run.ID, "renew run lease", err)
	}
}

// elapsed returns the monotonic time since the execution began: one clock
// read, where time.Now makes two. A step's times are its execution's start
// plus an elapsed (at), built once when the step is saved.
func (x *Exec) elapsed() time.Duration { return time.Since(x.base) }

// at returns the wall time, in UTC, d after the execution began.
// (The execution is allocated with its run's context, in one object just
// under a size class: keep fields out of Exec that can be computed.)
func (x *Exec) at(d time.Duration) time.Time { return time.Unix(0, x.base.UnixNano()+int64(d)).UTC() }

// Stop ends lease renewal.
func (x *Exec) Stop() { x.keeper.Stop() }

// Saved reports how many steps the journal held when this execution began.
func (x *Exec) Saved() int { return len(x.saved) }

// Taken reports how many steps this execution has taken so far (replayed or
// run).
func (x *Exec) Taken() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.next
}

// Failure returns ErrSaveFailed or ErrLostLease if the execution hit one.
func (x *Exec) Failure() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.failed
}

// Parked returns the wake time when a sleep parked the run.
func (x *Exec) Parked() (time.Time, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.wakeAt, x.parked
}

// ParkRetry parks the run until r.WakeAt, when step r.Step runs again:
// every later step returns ErrRetrying, and the caller releases the run
// (FinishRun RunRunning at r.WakeAt, with r.Attempts as its NextAttempts).
func (x *Exec) ParkRetry(r RetryPark) {
	x.mu.Lock()
	x.retry = &r
	x.mu.Unlock()
}

// Retrying returns the retry ParkRetry parked the run for, or nil.
func (x *Exec) Retrying() *RetryPark {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.retry
}

// seen reports whether this execution already took a step named name, and
// remembers it. Runs have few steps: a slice scan is cheaper than a map
// until they have many.
func (x *Exec) seen(name string) bool {
	if x.names != nil {
		if x.names[name] {
			return true
		}
		x.names[name] = true
		return false
	}
	// A name whose bit is clear in takenBits was not taken: most steps
	// skip the scan.
	bit := uint64(1) << nameHash(name)
	if x.takenBits&bit != 0 {
		for _, n := range x.taken {
			if n == name {
				return true
			}
		}
	}
	x.takenBits |= bit
	x.taken = append(x.taken, name)
	if len(x.taken) > len(x.takeBuf) {
		x.names = make(map[string]bool, 32)
		for _, n := range x.taken {
			x.names[n] = true
		}
	}
	return false
}

// nameHash is a cheap hash of a step name, 0–63: its length and its first,
// middle and last bytes, which tell apart both "step 1" from "step 2" and
// "charge" from "email".
func nameHash(s string) uint {
	if s == "" {
		return 0
	}
	n := len(s)
	return uint(n*31+int(s[0])+int(s[n/2])*7+int(s[n-1])*13) & 63
}

// StepKey is the stable key of step name in this run, the same on every
// attempt: for providers' idempotency keys.
func (x *Exec) StepKey(name string) string { return x.Run.ID + "/" + name }

// Pending is a step that Next found unsaved: run it, then Save it.
type Pending struct {
	Seq      int
	Name     string
	Attempts int
	started  time.Duration // after the execution's start: when it saved its last step, or began
}

// Next takes the next step, named name. If the journal holds it, Next
// returns the saved step; otherwise it returns the step to run (then call
// Save), with its attempts counted from the run's NextAttempts: Next makes
// no driver call. Steps are taken one at a time.
func (x *Exec) Next(ctx context.Context, name string) (saved *driver.Step, p Pending, err error) {
	x.mu.Lock()
	if x.parked {
		x.mu.Unlock()
		return nil, p, ErrParked
	}
	if x.retry != nil {
		x.mu.Unlock()
		return nil, p, ErrRetrying
	}
	if x.failed != nil {
		err := x.failed
		x.mu.Unlock()
		return nil, p, err
	}
	if x.seen(name) {
		x.mu.Unlock()
		return nil, p, &MismatchError{RunID: x.Run.ID, Seq: x.next + 1, Called: name,
			Message: fmt.Sprintf("run %s: step %q is called twice; step names must be unique within a run", x.Run.ID, name)}
	}
	x.next++
	seq := x.next
	if seq <= len(x.saved) {
		s := &x.saved[seq-1]
		x.mu.Unlock()
		if s.Name != name {
			return nil, p, &MismatchError{RunID: x.Run.ID, Seq: seq, Saved: s.Name, Called: name,
				Message: fmt.Sprintf("run %s: step %d is %q in the journal, but the code now calls %q there; the flow's steps changed since the run began (replay the run to start it afresh)", x.Run.ID, seq, s.Name, name)}
		}
		return s, p, nil
	}
	last := x.last
	x.mu.Unlock()
	// Only the first unsaved step can have been begun by an earlier
	// execution: the driver counts those in Run.NextAttempts (this one
	// included). Every later step is new to this execution.
	attempts := 1
	if seq == len(x.saved)+1 {
		attempts = max(x.Run.NextAttempts, 1)
	}
	return nil, Pending{Seq: seq, Name: name, Attempts: attempts, started: last}, nil
}

// setLast records that a step ends now (where the next one's time begins)
// and returns the time since the execution began. Under the lock: steps
// running at the same time end in their own goroutines.
func (x *Exec) setLast() time.Duration {
	finished := x.elapsed()
	x.mu.Lock()
	x.last = finished
	x.mu.Unlock()
	return finished
}

// Save saves the outcome of a step Next returned as pending: the JSON of its
// result, or the JSON of a declared failure.
func (x *Exec) Save(ctx context.Context, p Pending, result, failure []byte) error {
	finished := x.setLast()
	step := driver.Step{Seq: p.Seq, Name: p.Name, Result: result, Failure: failure, Attempts: p.Attempts,
		StartedAt: x.at(p.started), FinishedAt: x.at(finished)}
	if x.par != nil {
		if err := x.par.turn(p.Seq); err != nil {
			return err
		}
	}
	err := x.J.SaveStep(ctx, x.Run.ID, x.Owner, step)
	if x.par != nil {
		x.par.settled(p.Seq, err == nil)
	}
	if err != nil {
		return x.fail(err)
	}
	return nil
}

// SaveIn is Save with save in place of the journal's SaveStep: for a step
// whose result is saved in the caller's transaction, with the step's own
// writes (driver.TxDriver.CommitStep).
func (x *Exec) SaveIn(ctx context.Context, p Pending, result, failure []byte, save func(ctx context.Context, id, owner string, step driver.Step) error) error {
	finished := x.setLast()
	step := driver.Step{Seq: p.Seq, Name: p.Name, Result: result, Failure: failure, Attempts: p.Attempts,
		StartedAt: x.at(p.started), FinishedAt: x.at(finished)}
	if x.par != nil {
		if err := x.par.turn(p.Seq); err != nil {
			return err
		}
	}
	// The save outlives the step's cancellation (its timeout must not cut
	// the commit of a step that returned) but not the store's deadline.
	sctx, end := deadline.Bound(context.WithoutCancel(ctx), x.StoreTimeout)
	err := end(save(sctx, x.Run.ID, x.Owner, step))
	if x.par != nil {
		x.par.settled(p.Seq, err == nil)
	}
	if err != nil {
		return x.fail(err)
	}
	return nil
}

// Step runs fn as step name, or returns its saved outcome: Next, fn, Save.
// fn returns the JSON of the result, or the JSON of a declared failure
// (saved and replayed too), or a plain error (not saved: the step runs again
// on a later attempt).
func (x *Exec) Step(ctx context.Context, name string, fn func(ctx context.Context) (result, failure []byte, err error)) (result, failure []byte, err error) {
	saved, p, err := x.Next(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	if saved != nil {
		return saved.Result, saved.Failure, nil
	}
	if result, failure, err = fn(ctx); err != nil {
		return nil, nil, err
	}
	if err := x.Save(ctx, p, result, failure); err != nil {
		return nil, nil, err
	}
	return result, failure, nil
}

// fail records a store failure of the execution and returns the error to
// give the flow.
func (x *Exec) fail(err error) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.failed == nil {
		if errors.Is(err, driver.ErrNotOwner) {
			x.failed = ErrLostLease
		} else {
			x.failed = fmt.Errorf("%w: %v", ErrSaveFailed, err)
		}
	}
	if x.report != nil {
		x.report.ReportRun(x.Run.ID, "save step", err)
	}
	return x.failed
}

// Sleep is the durable sleep: a step named name saves the wake time the
// first time it is reached; while that time is ahead, the run parks
// (ErrParked); once it has passed, Sleep returns nil.
//
// now is the clock the sleep counts on (time.Now, or a test's).
func (x *Exec) Sleep(ctx context.Context, name string, until func(now time.Time) time.Time, now func() time.Time) error {
	res, _, err := x.Step(ctx, name, func(context.Context) ([]byte, []byte, error) {
		b, err := until(now()).UTC().MarshalJSON()
		return b, nil, err
	})
	if err != nil {
		return err
	}
	var wake time.Time
	if err := wake.UnmarshalJSON(res); err != nil {
		return fmt.Errorf("run %s: sleep %q: saved wake time: %w", x.Run.ID, name, err)
	}
	if now().Before(wake) {
		x.mu.Lock()
		x.parked = true
		x.wakeAt = wake
		x.mu.Unlock()
		return ErrParked
	}
	return nil
}
