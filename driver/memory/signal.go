package memory

import (
	"context"
	"slices"

	"github.com/okengine/oke/driver"
)

// SendSignal implements driver.Signaler.
func (d *Driver) SendSignal(ctx context.Context, s driver.Signal) (driver.Signal, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return driver.Signal{}, err
	}
	e, ok := d.runs[s.RunID]
	if !ok {
		return driver.Signal{}, driver.ErrNotFound
	}
	list := d.signals[s.RunID]
	for i := range list {
		if list[i].Key == s.Key {
			return copySignal(&list[i]), driver.ErrSignalDuplicate
		}
	}
	if e.run.Status.Finished() {
		return driver.Signal{}, driver.ErrRunFinished
	}
	now := d.now()
	s.Seq, s.SentAt, s.Step = int64(len(list))+1, now, 0
	s.Payload = slices.Clone(s.Payload)
	if d.signals == nil {
		d.signals = make(map[string][]driver.Signal)
	}
	d.signals[s.RunID] = append(list, s)
	if e.run.Status == driver.RunSleeping {
		e.run.WakeAt = now
	}
	return copySignal(&s), nil
}

// TakeSignal implements driver.Signaler.
func (d *Driver) TakeSignal(ctx context.Context, id, owner, name string, step driver.Step) (driver.Signal, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return driver.Signal{}, false, err
	}
	e, err := d.heldRun(id, owner)
	if err != nil {
		return driver.Signal{}, false, err
	}
	if step.Seq != e.nsteps+1 {
		return driver.Signal{}, false, driver.ErrStepOrder
	}
	list := d.signals[id]
	for i := range list {
		s := &list[i]
		if s.Name != name || s.Step != 0 {
			continue
		}
		step.Result = driver.SignalStepResult(*s)
		if err := e.appendStep(&step, 0); err != nil {
			return driver.Signal{}, false, err
		}
		s.Step = step.Seq
		e.run.NextAttempts = 1
		if e.run.UpdatedAt = step.FinishedAt; step.FinishedAt.IsZero() {
			e.run.UpdatedAt = d.now()
		}
		return copySignal(s), true, nil
	}
	return driver.Signal{}, false, nil
}

// WakeForSignal implements driver.Signaler.
func (d *Driver) WakeForSignal(ctx context.Context, id, name string) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return false, err
	}
	e, ok := d.runs[id]
	if !ok || e.run.Status != driver.RunSleeping {
		return false, nil
	}
	for _, s := range d.signals[id] {
		if s.Name == name && s.Step == 0 {
			e.run.WakeAt = d.now()
			return true, nil
		}
	}
	return false, nil
}

// Signals implements driver.Signaler.
func (d *Driver) Signals(ctx context.Context, id string) ([]driver.Signal, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	list := d.signals[id]
	out := make([]driver.Signal, len(list))
	for i := range list {
		out[i] = copySignal(&list[i])
	}
	return out, nil
}

func copySignal(s *driver.Signal) driver.Signal {
	c := *s
	c.Payload = slices.Clone(s.Payload)
	return c
}
