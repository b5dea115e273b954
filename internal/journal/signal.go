package journal

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/internal/deadline"
)

// signalWait is the saved result of a wait's first step: what it waits for,
// and until when.
type signalWait struct {
	Signal string    `json:"signal"`
	Until  time.Time `json:"until"`
}

// OutcomeStep is the name of the step that ends the wait named name: it
// records the signal the wait received, or that it timed out.
func OutcomeStep(name string) string { return name + " (outcome)" }

// AwaitSignal is a durable wait for a signal named signal, as two steps of
// the run. The first, named name, saves the wait's deadline (now + timeout)
// the first time it is reached. The second (OutcomeStep(name)) takes the
// run's oldest undelivered signal of that name atomically with its save
// (driver.Signaler.TakeSignal), or, once the deadline has passed, saves that
// the wait timed out. While neither can happen, the run parks until the
// deadline (ErrParked): a signal's arrival makes it due at once. A pick-up
// after the outcome was saved returns it again.
//
// It returns the signal's payload (JSON) and true, or nil and false when the
// wait timed out.
func (x *Exec) AwaitSignal(ctx context.Context, s driver.Signaler, name, signal string, timeout time.Duration) (payload []byte, received bool, err error) {
	res, _, err := x.Step(ctx, name, func(context.Context) ([]byte, []byte, error) {
		b, err := json.Marshal(signalWait{Signal: signal, Until: time.Now().Add(timeout).UTC()})
		return b, nil, err
	})
	if err != nil {
		return nil, false, err
	}
	var w signalWait
	if err := json.Unmarshal(res, &w); err != nil {
		return nil, false, fmt.Errorf("run %s: wait %q: saved deadline: %w", x.Run.ID, name, err)
	}
	if w.Signal != signal {
		return nil, false, &MismatchError{RunID: x.Run.ID, Seq: x.Taken(), Saved: name, Called: name,
			Message: fmt.Sprintf("run %s: wait %q waited for signal %q when the run began, but the code now waits for %q there; the flow changed since the run began (replay the run to start it afresh)", x.Run.ID, name, w.Signal, signal)}
	}
	saved, p, err := x.Next(ctx, OutcomeStep(name))
	if err != nil {
		return nil, false, err
	}
	if saved != nil {
		return decodeOutcome(x.Run.ID, name, saved.Result)
	}
	finished := x.elapsed()
	step := driver.Step{Seq: p.Seq, Name: p.Name, Attempts: p.Attempts,
		StartedAt: x.at(p.started), FinishedAt: x.at(finished)}
	tctx, end := deadline.Bound(ctx, x.StoreTimeout)
	sig, ok, err := s.TakeSignal(tctx, x.Run.ID, x.Owner, signal, step)
	err = end(err)
	if err != nil {
		return nil, false, x.fail(err)
	}
	if ok {
		x.last = finished
		return sig.Payload, true, nil
	}
	if !time.Now().Before(w.Until) {
		b, _ := json.Marshal(driver.SignalOutcome{Received: false})
		if err := x.Save(ctx, p, b, nil); err != nil {
			return nil, false, err
		}
		return nil, false, nil
	}
	x.mu.Lock()
	x.parked = true
	x.wakeAt = w.Until
	x.mu.Unlock()
	return nil, false, ErrParked
}

func decodeOutcome(runID, name string, result []byte) ([]byte, bool, error) {
	var o driver.SignalOutcome
	if err := json.Unmarshal(result, &o); err != nil {
		return nil, false, fmt.Errorf("run %s: wait %q: saved outcome: %w", runID, name, err)
	}
	if !o.Received {
		return nil, false, nil
	}
	return o.Payload, true, nil
}

// Waiting reports what a run whose saved steps are steps waits for: when
// its last saved step is the first step of a wait (AwaitSignal) — the
// wait's outcome not saved yet — the signal's name and the wait's deadline.
func Waiting(steps []driver.Step) (signal string, until time.Time, ok bool) {
	if len(steps) == 0 {
		return "", time.Time{}, false
	}
	last := steps[len(steps)-1]
	if last.Failure != nil || len(last.Result) == 0 || last.Result[0] != '{' {
		return "", time.Time{}, false
	}
	dec := json.NewDecoder(bytes.NewReader(last.Result))
	dec.DisallowUnknownFields()
	var w signalWait
	if dec.Decode(&w) != nil || w.Signal == "" || w.Until.IsZero() {
		return "", time.Time{}, false
	}
	return w.Signal, w.Until, true
}
