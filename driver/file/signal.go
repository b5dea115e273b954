package file

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/okengine/oke/driver"
)

var _ driver.Signaler = (*Driver)(nil)

// signalRecord is signal s of run id: a SendSignal's (wake: the run's new
// WakeAt when the send woke it, else zero) or compaction's (with the step
// that took it).
func signalRecord(id string, s *driver.Signal, wake time.Time) *jrecord {
	return &jrecord{Op: jopSignal, ID: id, Name: s.Name, Key: s.Key, Out: s.Payload, Seq: int(s.Seq),
		At: s.SentAt, WakeAt: wake, Took: s.Step}
}

// deliver marks signal seq of e as taken by step. An error names a record
// that does not fit the run.
func (e *jrun) deliver(seq int64, step int) error {
	for i := range e.signals {
		if s := &e.signals[i]; s.Seq == seq {
			if s.Step != 0 {
				return fmt.Errorf("signal %d of run %q taken twice (by steps %d and %d)", seq, e.run.ID, s.Step, step)
			}
			s.Step = step
			return nil
		}
	}
	return fmt.Errorf("step %d of run %q took signal %d, which was never sent", step, e.run.ID, seq)
}

// addSignal keeps s for e (a SendSignal, or a record read at Open).
func (j *journal) addSignal(e *jrun, s driver.Signal, size int) {
	e.signals = append(e.signals, s)
	j.liveRecs++
	j.liveBytes += int64(size)
	e.signalBytes += int64(size)
}

// wakeSleeping makes e, which sleeps, due at wake.
func (j *journal) wakeSleeping(e *jrun, wake time.Time) {
	e.run.WakeAt = wake
	j.moved(e)
}

// replaySignal applies a signal or wake record read at Open.
func (j *journal) replaySignal(e *jrun, rec *jrecord, size int) error {
	r := &e.run
	if rec.Op == jopWake {
		if r.Status == driver.RunSleeping {
			j.wakeSleeping(e, rec.WakeAt)
		}
		return nil
	}
	if n := len(e.signals); n > 0 && int64(rec.Seq) <= e.signals[n-1].Seq {
		return fmt.Errorf("signal %d of run %q follows signal %d", rec.Seq, r.ID, e.signals[n-1].Seq)
	}
	j.addSignal(e, driver.Signal{RunID: r.ID, Name: rec.Name, Key: rec.Key, Payload: rec.Out,
		Seq: int64(rec.Seq), SentAt: rec.At, Step: rec.Took}, size)
	if !rec.WakeAt.IsZero() && r.Status == driver.RunSleeping {
		j.wakeSleeping(e, rec.WakeAt)
	}
	return nil
}

// SendSignal implements driver.Signaler. It returns once the signal is
// fsynced.
func (d *Driver) SendSignal(ctx context.Context, s driver.Signal) (driver.Signal, error) {
	if d.ro {
		return driver.Signal{}, readOnlyError("send signal", d.dir)
	}
	if err := checkUTF8("send signal", "name", s.Name, "key", s.Key); err != nil {
		return driver.Signal{}, err
	}
	j := &d.jr
	j.mu.Lock()
	if err := j.usable(ctx); err != nil {
		j.mu.Unlock()
		return driver.Signal{}, err
	}
	e := j.runs[s.RunID]
	if e == nil {
		j.mu.Unlock()
		return driver.Signal{}, driver.ErrNotFound
	}
	for i := range e.signals {
		if e.signals[i].Key == s.Key {
			kept, seq := copySignal(&e.signals[i]), e.durable
			j.mu.Unlock()
			if err := j.waitDurable(seq); err != nil {
				return driver.Signal{}, err
			}
			return kept, driver.ErrSignalDuplicate
		}
	}
	if e.run.Status.Finished() {
		j.mu.Unlock()
		return driver.Signal{}, driver.ErrRunFinished
	}
	t := now()
	s.Seq, s.SentAt, s.Step = 1, t, 0
	if n := len(e.signals); n > 0 {
		s.Seq = e.signals[n-1].Seq + 1
	}
	s.Payload = slices.Clone(s.Payload)
	var wake time.Time
	if e.run.Status == driver.RunSleeping {
		wake = t
	}
	seq, size, err := j.write(signalRecord(s.RunID, &s, wake))
	if err != nil {
		j.mu.Unlock()
		return driver.Signal{}, err
	}
	j.addSignal(e, s, size)
	e.durable = seq
	if !wake.IsZero() {
		j.wakeSleeping(e, wake)
	}
	j.maintain()
	j.mu.Unlock()
	if err := j.waitDurable(seq); err != nil {
		return driver.Signal{}, err
	}
	return copySignal(&s), nil
}

// TakeSignal implements driver.Signaler: one step record, with the signal it
// took, fsynced before it returns.
func (d *Driver) TakeSignal(ctx context.Context, id, owner, name string, step driver.Step) (driver.Signal, bool, error) {
	if d.ro {
		return driver.Signal{}, false, readOnlyError("take signal", d.dir)
	}
	if err := checkUTF8("take signal", "name", step.Name); err != nil {
		return driver.Signal{}, false, err
	}
	j := &d.jr
	j.mu.Lock()
	if err := j.usable(ctx); err != nil {
		j.mu.Unlock()
		return driver.Signal{}, false, err
	}
	e, err := j.held(id, owner)
	if err != nil {
		j.mu.Unlock()
		return driver.Signal{}, false, err
	}
	if step.Seq != len(e.steps)+1 {
		j.mu.Unlock()
		return driver.Signal{}, false, fmt.Errorf("oke file driver: take signal in step %d of run %q after step %d: %w", step.Seq, id, len(e.steps), driver.ErrStepOrder)
	}
	i := slices.IndexFunc(e.signals, func(s driver.Signal) bool { return s.Name == name && s.Step == 0 })
	if i < 0 {
		j.mu.Unlock()
		return driver.Signal{}, false, nil
	}
	sig := &e.signals[i]
	s := step
	s.Result, s.Failure = driver.SignalStepResult(*sig), nil
	s.StartedAt, s.FinishedAt = utc(s.StartedAt), utc(s.FinishedAt)
	t := now()
	rec := stepRecord(id, &s, t)
	rec.Signal = sig.Seq
	seq, size, err := j.write(rec)
	if err != nil {
		j.mu.Unlock()
		return driver.Signal{}, false, err
	}
	j.addStep(e, s, t, seq, size)
	sig.Step = s.Seq
	out := copySignal(sig)
	j.maintain()
	j.mu.Unlock()
	if err := j.waitDurable(seq); err != nil {
		return driver.Signal{}, false, err
	}
	return out, true, nil
}

// WakeForSignal implements driver.Signaler.
func (d *Driver) WakeForSignal(ctx context.Context, id, name string) (bool, error) {
	if d.ro {
		return false, readOnlyError("wake run", d.dir)
	}
	j := &d.jr
	j.mu.Lock()
	if err := j.usable(ctx); err != nil {
		j.mu.Unlock()
		return false, err
	}
	e := j.runs[id]
	if e == nil || e.run.Status != driver.RunSleeping ||
		!slices.ContainsFunc(e.signals, func(s driver.Signal) bool { return s.Name == name && s.Step == 0 }) {
		j.mu.Unlock()
		return false, nil
	}
	t := now()
	seq, _, err := j.write(&jrecord{Op: jopWake, ID: id, WakeAt: t})
	if err != nil {
		j.mu.Unlock()
		return false, err
	}
	j.wakeSleeping(e, t)
	e.durable = seq
	j.maintain()
	j.mu.Unlock()
	return true, j.waitDurable(seq)
}

// Signals implements driver.Signaler.
func (d *Driver) Signals(ctx context.Context, id string) ([]driver.Signal, error) {
	j := &d.jr
	j.mu.Lock()
	if err := j.usable(ctx); err != nil {
		j.mu.Unlock()
		return nil, err
	}
	var out []driver.Signal
	var seq uint64
	if e := j.runs[id]; e != nil {
		out = make([]driver.Signal, len(e.signals))
		for i := range e.signals {
			out[i] = copySignal(&e.signals[i])
		}
		seq = e.durable
	}
	j.mu.Unlock()
	if err := j.waitDurable(seq); err != nil {
		return nil, err
	}
	return out, nil
}

func copySignal(s *driver.Signal) driver.Signal {
	c := *s
	c.Payload = slices.Clone(s.Payload)
	return c
}
