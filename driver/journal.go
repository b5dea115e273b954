package driver

import (
	"context"
	"errors"
	"time"
)

// Journal errors.
var (
	// ErrNotDue: AcquireRun found the run held by a live lease, parked until
	// later, or finished.
	ErrNotDue = errors.New("driver: run is not due")
	// ErrDuplicate: CreateRun found another run with the same DedupeKey; the
	// existing run is returned with it.
	ErrDuplicate = errors.New("driver: a run with this dedupe key exists")
	// ErrStepOrder: SaveStep was given a step whose Seq is not the next one.
	ErrStepOrder = errors.New("driver: step out of order")
	// ErrRunHeld: CancelRun found the run held by a live lease (an
	// execution is running it now).
	ErrRunHeld = errors.New("driver: run is held by a live lease")
	// ErrRunFinished: CancelRun found the run finished already.
	ErrRunFinished = errors.New("driver: run has finished")
	// ErrRunNotDead: ResumeRun found the run not dead-lettered (RunDead).
	ErrRunNotDead = errors.New("driver: run is not dead-lettered")
)

// RunStatus is where a journal run is in its life.
type RunStatus uint8

const (
	// RunRunning: executing under a lease, or waiting to be picked up
	// (unowned, or its lease lapsed), not before WakeAt.
	RunRunning RunStatus = 1
	// RunSleeping: parked by a durable sleep until WakeAt.
	RunSleeping RunStatus = 2
	// RunCompleted: finished; Result holds its response.
	RunCompleted RunStatus = 3
	// RunFailed: finished with a failure; Result holds its error envelope.
	RunFailed RunStatus = 4
	// RunDead: dead-lettered: too many pick-ups in a row failed (see
	// Run.Strikes). Not finished, never due: AcquireRun and DueRuns leave
	// it until an operator resumes it (RunResumer) or cancels it. Error
	// says why.
	RunDead RunStatus = 5
)

func (s RunStatus) String() string {
	switch s {
	case RunRunning:
		return "running"
	case RunSleeping:
		return "sleeping"
	case RunCompleted:
		return "completed"
	case RunFailed:
		return "failed"
	case RunDead:
		return "dead"
	}
	return "unknown"
}

// Finished reports whether the run has ended (completed or failed).
func (s RunStatus) Finished() bool { return s == RunCompleted || s == RunFailed }

// Run is one execution of a durable flow.
type Run struct {
	ID        string
	Flow      string
	Input     []byte // the validated input, as JSON
	Tenant    string
	Principal string

	Status     RunStatus
	Owner      string    // current holder ("" when unowned)
	LeaseUntil time.Time // holder's lease deadline
	WakeAt     time.Time // not to be picked up before this (sleep, retry delay)
	Attempts   int       // how many times the run was picked up (1 after its first start)

	// NextAttempts is how many executions have begun the run's next step —
	// the one after its last saved step (Seq = saved steps + 1) — this
	// one included. The driver keeps it, with no call of its own, by these
	// rules, each applied atomically with the call it rides on:
	//
	//   - CreateRun with an owner sets it to 1 (the creator goes on to
	//     step 1); without one, to 0 (no execution has begun yet).
	//   - SaveStep sets it to 1: the execution that saved step n goes on to
	//     step n+1.
	//   - AcquireRun adds 1 (a run whose holder's lease lapsed, one released
	//     for a retry, one enqueued), except for a run that was sleeping:
	//     the sleep is itself a saved step, so the waking execution is
	//     already counted (it is raised to 1 if it was 0).
	//
	// An execution cut off between two steps (after saving step n, before
	// step n+1 returned or even began) thus counts as an attempt of step
	// n+1. The engine passes it as the first unsaved step's Step.Attempts;
	// later steps of the same execution have 1. For a finished run it refers
	// to a step that never came (the flow ended), and means nothing. Every
	// call that returns a run (CreateRun, AcquireRun, GetRun, ListRuns)
	// carries it.
	NextAttempts int

	ReplayOf  string // the run this one replays
	Parent    string // the run that started it (Run) or emitted its event
	Event     string // the event that started it (OnEvent flows)
	DedupeKey string // unique among runs when not empty
	IdemKey   *Key   // the Idempotency-Key row that started it, if any
	// Trace names the OpenTelemetry span that created the run (a traced
	// request's, or the step's that started it), as Response.Trace does;
	// empty when none was traced. CreateRun stores it; it never changes.
	Trace string

	// Result is a Completed or Failed run's final response. Its Trace is
	// not the run's and need not be kept (the Postgres driver does not):
	// Trace above names the run's span.
	Result *Response
	// Error is what went wrong, for people: for a failed or dead run, why it
	// ended so; for an unfinished one, the last failed attempt's error (a
	// step that waits for its retry, a store failure), as FinishRun was
	// last given it.
	Error string

	// Strikes is how many pick-ups of the run in a row failed without
	// ending cleanly: AcquireRun adds 1 when it takes the run from a holder
	// whose lease lapsed (a crash, a hang, a lost lease), and FinishRun sets
	// it to Finish.Strikes (the engine counts a release after a store
	// failure as a strike; every clean end resets it). ResumeRun resets it.
	// The engine dead-letters a run whose strikes reach its limit.
	Strikes int

	CreatedAt time.Time
	UpdatedAt time.Time

	// Steps is how many steps the run has saved. ListRuns fills it in (so a
	// listing needs no GetRun per run); GetRun returns the steps themselves.
	Steps int
}

// Step is one saved step of a run.
type Step struct {
	Seq      int    // 1-based position in the run
	Name     string // unique within the run
	Result   []byte // JSON of the step's result; nil when Failure is set
	Failure  []byte // JSON of a declared failure the step returned (replayed as an error)
	Attempts int    // how many times the step's function started, this save included
	// StartedAt is where the step's time begins: when the execution that
	// saved it saved its previous step, or when that execution began (a
	// start or pick-up) for the first step it ran. Code the flow runs
	// between two steps counts toward the later one; in the usual flow,
	// where steps follow one another, it is when the step's function was
	// called. (oke reads the clock once per step, when the step ends.)
	StartedAt time.Time
	// FinishedAt is when the step's function returned.
	FinishedAt time.Time
}

// Finish says how FinishRun ends or parks a run.
type Finish struct {
	Status RunStatus // RunCompleted, RunFailed, RunSleeping, or RunRunning (release for a retry)
	WakeAt time.Time // RunSleeping / RunRunning: not to be picked up before this
	Result *Response // RunCompleted / RunFailed
	Error  string    // RunFailed, RunDead: why; RunRunning / RunSleeping: the last attempt's error, or ""
	// Strikes becomes the run's Strikes (zero: a clean end resets them).
	Strikes int
	// NextAttempts, when above zero, becomes the run's NextAttempts
	// (RunRunning: an execution that retried its step in process counts
	// those attempts, so the next pick-up's is one more).
	NextAttempts int
}

// RunFilter narrows ListRuns. Every field set narrows the list further
// (they combine with AND); the zero RunFilter lists every run.
//
// After and Before are keyset cursors: a console pages through a large
// journal with After (ascending) or Before with Desc (newest first), never
// with an offset, so every page costs the same however deep it is.
type RunFilter struct {
	After  string      // IDs after this one (exclusive)
	Before string      // IDs before this one (exclusive)
	Flow   string      // only this flow
	Status []RunStatus // only these statuses
	Tenant string      // only runs of this tenant
	// ReplayOf: only runs that replay this run (Run.ReplayOf).
	ReplayOf string
	// CreatedAfter and CreatedBefore bound Run.CreatedAt to the half-open
	// range [CreatedAfter, CreatedBefore); a zero time leaves that end open.
	CreatedAfter  time.Time
	CreatedBefore time.Time
	// Desc lists in descending ID order (run IDs made by oke sort by
	// creation time, so: newest first); the default is ascending.
	Desc bool
}

// Match reports whether r passes f's filters other than the cursors
// (After, Before), for drivers that filter in Go (memory, file).
func (f *RunFilter) Match(r *Run) bool {
	switch {
	case f.Flow != "" && r.Flow != f.Flow,
		f.Tenant != "" && r.Tenant != f.Tenant,
		f.ReplayOf != "" && r.ReplayOf != f.ReplayOf,
		!f.CreatedAfter.IsZero() && r.CreatedAt.Before(f.CreatedAfter),
		!f.CreatedBefore.IsZero() && !r.CreatedAt.Before(f.CreatedBefore):
		return false
	}
	if len(f.Status) > 0 {
		for _, s := range f.Status {
			if s == r.Status {
				return true
			}
		}
		return false
	}
	return true
}

// InRange reports whether id lies between f's cursors (After, Before).
func (f *RunFilter) InRange(id string) bool {
	return (f.After == "" || id > f.After) && (f.Before == "" || id < f.Before)
}

// RunCanceller is optional on a Journal: it cancels a run that no
// execution is running now. The admin surface's Cancel (oke's
// App.Cancel) needs it. This interface is not stable yet.
type RunCanceller interface {
	// CancelRun ends run id as RunFailed with result and msg (Run.Result,
	// Run.Error), and clears its owner, in one atomic step — but only while
	// the run is unfinished and no live lease holds it: sleeping, or
	// waiting to be picked up (unowned, parked for a retry, or its holder's
	// lease lapsed). A holder whose lease lapsed is fenced out by it: its
	// later SaveStep or FinishRun fails with ErrNotOwner. It returns the
	// run as cancelled. Otherwise it changes nothing and returns
	// ErrRunHeld (a live lease holds the run: its execution is running it
	// now), ErrRunFinished, or ErrNotFound. Durable when it returns.
	CancelRun(ctx context.Context, id string, result Response, msg string) (Run, error)
}

// RunResumer is optional on a Journal: it makes a dead-lettered run
// (RunDead) due again. The admin surface's Resume (oke's App.Resume) needs
// it. This interface is not stable yet.
type RunResumer interface {
	// ResumeRun makes run id, which must be RunDead, RunRunning, unowned
	// and due now, with Strikes and NextAttempts reset to 0 (its next
	// pick-up is the first attempt of its next step again), in one atomic
	// step, and returns it. Otherwise it changes nothing and returns
	// ErrRunNotDead or ErrNotFound. Durable when it returns; on a shared
	// store it wakes the schedulers as a release does.
	ResumeRun(ctx context.Context, id string) (Run, error)
}

// Journal is the storage contract of durable execution: runs, their saved
// steps, their leases, and business-key claims. It is optional: a driver
// that implements it (type assertion) can run durable flows.
//
// Fenced methods (RenewRun, SaveStep, FinishRun) succeed only for
// the run's current owner and return ErrNotOwner otherwise. An owner whose
// lease lapsed still owns the run until another AcquireRun takes it. SaveStep and
// FinishRun return only once durable; CreateRun and ClaimKey too when they
// return. A limit of zero or less in ListRuns and DueRuns means no limit, as
// in Driver's List and Sweep.
type Journal interface {
	// CreateRun inserts run. Its ID is chosen by the caller and unique (a
	// taken ID is an error, not ErrDuplicate).
	// When run.Owner is set the run is created held by it for lease, with
	// Attempts 1 and NextAttempts 1; otherwise it is unowned and due at
	// run.WakeAt (zero: now), with both 0.
	// When run.DedupeKey is set and another run has it, nothing is inserted
	// and that run is returned with ErrDuplicate.
	CreateRun(ctx context.Context, run Run, lease time.Duration) (Run, error)
	// GetRun returns a run and its saved steps in order. ErrNotFound if none.
	GetRun(ctx context.Context, id string) (Run, []Step, error)
	// ListRuns returns up to limit runs in ID order, each with Steps set.
	ListRuns(ctx context.Context, f RunFilter, limit int) ([]Run, error)
	// AcquireRun takes a run that is due — not finished, not dead, not held
	// by a live lease, and WakeAt reached — for owner: Status becomes
	// RunRunning, Attempts grows by one, and so does NextAttempts unless the
	// run was sleeping (see Run.NextAttempts), and Strikes when a holder's
	// lease had lapsed (Run.Strikes). It returns the run and its saved steps, or
	// ErrNotDue (ErrNotFound if there is no such run). owner must not be
	// empty.
	AcquireRun(ctx context.Context, id, owner string, lease time.Duration) (Run, []Step, error)
	// RenewRun extends owner's lease to now+lease.
	RenewRun(ctx context.Context, id, owner string, lease time.Duration) error
	// SaveStep saves a finished step; step.Seq must be one more than the
	// last saved step's (ErrStepOrder otherwise), and sets the run's
	// NextAttempts to 1. Durable when it returns.
	SaveStep(ctx context.Context, id, owner string, step Step) error
	// FinishRun ends the run (RunCompleted, RunFailed), parks it
	// (RunSleeping until WakeAt; RunRunning unowned until WakeAt, to be
	// retried) or dead-letters it (RunDead) — any other status is an error —
	// and clears its owner; it sets Strikes and (when above zero)
	// NextAttempts from f. Durable when it returns.
	FinishRun(ctx context.Context, id, owner string, f Finish) error
	// DueRuns returns the IDs of up to limit runs that AcquireRun would take
	// now, the longest due first. When flows is not empty, only runs of
	// those flows are listed: a scheduler asks for the flows its app binds,
	// so that apps with different flows on one store never take (and
	// delay) each other's runs. An empty flows lists runs of every flow.
	DueRuns(ctx context.Context, flows []string, limit int) ([]string, error)
	// ClaimKey lets the first run claim a business key ("order:42"): it
	// returns the ID of the run that holds the key — runID itself when this
	// call (or an earlier one by the same run) won.
	ClaimKey(ctx context.Context, key, runID string) (string, error)
}

// Notifier is optional on a Journal whose store several processes share
// (Postgres): it tells the scheduler when to look for due runs, so that a
// run enqueued or released by another process, or a sleep that ends, is
// picked up at once rather than at the next poll. The scheduler still
// polls DueRuns as the fallback — a hint may be lost, and a lease that
// lapses (a crashed holder) is found only by polling. A driver that does
// not implement it (memory, file) is polled, and nudged by its own process.
// This interface is not stable yet.
type Notifier interface {
	// WatchDue returns a channel that receives a value whenever a run of
	// the store may have become due, or its next wake time may have
	// changed: a run was created unowned and due, or parked (released or
	// put to sleep), by this process or another; and after the
	// watch (re)connects, since hints may have been missed while it was
	// down. Bursts are coalesced: the channel holds at most one value. A
	// value is a hint, not a promise that DueRuns returns anything. Call
	// stop when done; the channel is never closed.
	WatchDue() (c <-chan struct{}, stop func())
	// NextDue returns how long, by the store's clock, until the earliest
	// parked run (a sleep, a release with a retry delay) of flows (every
	// flow when empty, as in DueRuns) becomes due, and false when none is
	// waiting. Runs due already, and leases, are not counted: DueRuns finds
	// the first, polling the second.
	NextDue(ctx context.Context, flows []string) (time.Duration, bool, error)
}
