package driver

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Signal is a message sent to a journal run (oke's App.Signal), kept until
// a wait of the run for its Name takes it (oke.AwaitSignal).
type Signal struct {
	RunID string
	Name  string
	// Key dedupes sends: a run holds at most one signal per Key, whatever
	// its name. Required.
	Key     string
	Payload []byte // JSON; never empty ("null" for none)
	// Seq orders a run's signals in send order: the driver assigns it, one
	// more than the run's previous signal's.
	Seq    int64
	SentAt time.Time
	// Step is the Seq of the run's step that took the signal (0 while
	// undelivered).
	Step int
}

// Signal errors, besides ErrNotFound (no such run) and ErrRunFinished.
var (
	// ErrSignalDuplicate: SendSignal found a signal with the same key for
	// the run; the signal kept is returned with it, and nothing changed.
	ErrSignalDuplicate = errors.New("driver: a signal with this key was sent to the run already")
)

// Signaler is optional on a Journal: it keeps the signals sent to runs, for
// durable waits (oke.AwaitSignal). This interface is not stable yet.
//
// A wait is two steps of the run: the engine saves the wait's deadline as
// one (SaveStep), then takes the oldest undelivered signal of the name
// atomically with saving the step that records it (TakeSignal): a signal is
// delivered to exactly one wait, exactly once, and a pick-up after that
// replays the saved step. A wait that finds no signal parks the run
// (FinishRun, RunSleeping until its deadline); then WakeForSignal closes the
// race with a send that came while the run was held.
type Signaler interface {
	// SendSignal keeps s (RunID, Name, Key, Payload) for its run, durably,
	// and assigns its Seq and SentAt. If the run sleeps, it becomes due now
	// (WakeAt = now; on a shared store, other processes are notified as
	// for any parked run that becomes due): a sleeping run re-checks its
	// wait (a run parked by a plain sleep just parks again). A run that is
	// held (running) is not touched. The send is serialized with the run's
	// FinishRun: a send that a held run could not see when it parked is
	// found by the WakeForSignal that follows that FinishRun.
	//
	// A signal with the same RunID and Key as a kept one changes nothing:
	// that one is returned with ErrSignalDuplicate. An unknown run is
	// ErrNotFound; a finished one ErrRunFinished (nothing kept).
	SendSignal(ctx context.Context, s Signal) (Signal, error)
	// TakeSignal takes the run's oldest (lowest Seq) undelivered signal
	// named name and saves step with it, in one atomic, durable write: the
	// signal's Step becomes step.Seq, and step is saved as SaveStep would
	// (fenced by owner, in order, NextAttempts set to 1) with its Result
	// set to SignalStepResult of the signal. It returns the signal and
	// true. When no undelivered signal has the name it changes nothing and
	// returns false. Errors are SaveStep's (ErrNotOwner, ErrStepOrder).
	TakeSignal(ctx context.Context, id, owner, name string, step Step) (Signal, bool, error)
	// WakeForSignal makes run id due now (WakeAt = now, with a notification
	// on a shared store) if it sleeps and has an undelivered signal named
	// name; it reports whether it did. The engine calls it after parking a
	// run whose wait found no signal.
	WakeForSignal(ctx context.Context, id, name string) (bool, error)
	// Signals returns the signals sent to run id, in Seq order (for the
	// console and tools).
	Signals(ctx context.Context, id string) ([]Signal, error)
}

// SignalOutcome is the saved result of the step that ends a wait: the
// signal it received, or that it timed out. It is the step's Result, as
// JSON; drivers make it with SignalStepResult.
type SignalOutcome struct {
	Received bool            `json:"received"`
	Seq      int64           `json:"seq,omitempty"`
	Key      string          `json:"key,omitempty"`
	SentAt   time.Time       `json:"sentAt,omitzero"`
	Payload  json.RawMessage `json:"payload,omitempty"`
}

// SignalStepResult is the Result of the step that took s (TakeSignal).
func SignalStepResult(s Signal) []byte {
	b, err := json.Marshal(SignalOutcome{Received: true, Seq: s.Seq, Key: s.Key, SentAt: s.SentAt.UTC(), Payload: s.Payload})
	if err != nil {
		// Payload is not valid JSON: SendSignal callers validate it, so
		// keep what was sent, quoted.
		b, _ = json.Marshal(SignalOutcome{Received: true, Seq: s.Seq, Key: s.Key, SentAt: s.SentAt.UTC(), Payload: quote(s.Payload)})
	}
	return b
}

func quote(b []byte) json.RawMessage {
	q, _ := json.Marshal(string(b))
	return q
}
