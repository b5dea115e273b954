package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/okengine/oke/driver"
)

// runEntry is a run with its steps and per-step attempt counts.
type runEntry struct {
	run      driver.Run
	steps    []driver.Step
	attempts []int // attempts[seq-1]: attempts started of step seq
}

func copyRun(r *driver.Run) driver.Run {
	c := *r
	c.Input = slices.Clone(r.Input)
	if r.IdemKey != nil {
		k := *r.IdemKey
		c.IdemKey = &k
	}
	if r.Result != nil {
		res := *r.Result
		res.Body = slices.Clone(res.Body)
		c.Result = &res
	}
	return c
}

func copySteps(steps []driver.Step) []driver.Step {
	out := make([]driver.Step, len(steps))
	for i, s := range steps {
		out[i] = s
		out[i].Result = slices.Clone(s.Result)
		out[i].Failure = slices.Clone(s.Failure)
	}
	return out
}

// due reports whether AcquireRun would take e at now.
func (e *runEntry) due(now time.Time) bool {
	r := &e.run
	if r.Status.Finished() {
		return false
	}
	if r.Owner != "" && now.Before(r.LeaseUntil) {
		return false
	}
	return !now.Before(r.WakeAt)
}

// dueSince is when the run became due, for ordering.
func (e *runEntry) dueSince() time.Time {
	r := &e.run
	t := r.WakeAt
	if r.Owner != "" && r.LeaseUntil.After(t) {
		t = r.LeaseUntil
	}
	if t.IsZero() {
		t = r.CreatedAt
	}
	return t
}

// CreateRun implements driver.Journal.
func (d *Driver) CreateRun(ctx context.Context, run driver.Run, lease time.Duration) (driver.Run, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return driver.Run{}, err
	}
	if run.DedupeKey != "" {
		if id, ok := d.dedupe[run.DedupeKey]; ok {
			return copyRun(&d.runs[id].run), driver.ErrDuplicate
		}
	}
	if run.ID == "" {
		return driver.Run{}, errors.New("memory: create run: empty ID")
	}
	if _, ok := d.runs[run.ID]; ok {
		return driver.Run{}, fmt.Errorf("memory: create run: ID %q is taken", run.ID)
	}
	now := d.now()
	run.CreatedAt, run.UpdatedAt = now, now
	if run.Status == 0 {
		run.Status = driver.RunRunning
	}
	if run.Owner != "" {
		run.LeaseUntil = now.Add(lease)
		run.Attempts = 1
	}
	e := &runEntry{run: copyRun(&run), steps: make([]driver.Step, 0, 16), attempts: make([]int, 0, 16)}
	d.runs[run.ID] = e
	if run.DedupeKey != "" {
		d.dedupe[run.DedupeKey] = run.ID
	}
	return copyRun(&e.run), nil
}

// GetRun implements driver.Journal.
func (d *Driver) GetRun(ctx context.Context, id string) (driver.Run, []driver.Step, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return driver.Run{}, nil, err
	}
	e, ok := d.runs[id]
	if !ok {
		return driver.Run{}, nil, driver.ErrNotFound
	}
	return copyRun(&e.run), copySteps(e.steps), nil
}

// ListRuns implements driver.Journal.
func (d *Driver) ListRuns(ctx context.Context, f driver.RunFilter, limit int) ([]driver.Run, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	var out []driver.Run
	for id, e := range d.runs {
		if f.After != "" && id <= f.After {
			continue
		}
		if f.Flow != "" && e.run.Flow != f.Flow {
			continue
		}
		if len(f.Status) > 0 && !slices.Contains(f.Status, e.run.Status) {
			continue
		}
		out = append(out, copyRun(&e.run))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// AcquireRun implements driver.Journal.
func (d *Driver) AcquireRun(ctx context.Context, id, owner string, lease time.Duration) (driver.Run, []driver.Step, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return driver.Run{}, nil, err
	}
	if owner == "" {
		return driver.Run{}, nil, errors.New("memory: acquire run: empty owner")
	}
	e, ok := d.runs[id]
	if !ok {
		return driver.Run{}, nil, driver.ErrNotFound
	}
	now := d.now()
	if !e.due(now) {
		return driver.Run{}, nil, driver.ErrNotDue
	}
	r := &e.run
	r.Status = driver.RunRunning
	r.Owner = owner
	r.LeaseUntil = now.Add(lease)
	r.Attempts++
	r.UpdatedAt = now
	return copyRun(r), copySteps(e.steps), nil
}

// heldRun returns the run id held by owner.
func (d *Driver) heldRun(id, owner string) (*runEntry, error) {
	e, ok := d.runs[id]
	if !ok || e.run.Owner != owner || owner == "" || e.run.Status.Finished() {
		return nil, driver.ErrNotOwner
	}
	return e, nil
}

// RenewRun implements driver.Journal.
func (d *Driver) RenewRun(ctx context.Context, id, owner string, lease time.Duration) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return err
	}
	e, err := d.heldRun(id, owner)
	if err != nil {
		return err
	}
	e.run.LeaseUntil = d.now().Add(lease)
	return nil
}

// StartStep implements driver.Journal.
func (d *Driver) StartStep(ctx context.Context, id, owner string, seq int, name string) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return 0, err
	}
	e, err := d.heldRun(id, owner)
	if err != nil {
		return 0, err
	}
	if seq < 1 {
		return 0, fmt.Errorf("memory: start step: seq %d", seq)
	}
	for len(e.attempts) < seq {
		e.attempts = append(e.attempts, 0)
	}
	e.attempts[seq-1]++
	return e.attempts[seq-1], nil
}

// SaveStep implements driver.Journal.
func (d *Driver) SaveStep(ctx context.Context, id, owner string, step driver.Step) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return err
	}
	e, err := d.heldRun(id, owner)
	if err != nil {
		return err
	}
	if step.Seq != len(e.steps)+1 {
		return driver.ErrStepOrder
	}
	step.Result = slices.Clone(step.Result)
	step.Failure = slices.Clone(step.Failure)
	e.steps = append(e.steps, step)
	if e.run.UpdatedAt = step.FinishedAt; step.FinishedAt.IsZero() {
		e.run.UpdatedAt = d.now()
	}
	return nil
}

// FinishRun implements driver.Journal.
func (d *Driver) FinishRun(ctx context.Context, id, owner string, f driver.Finish) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return err
	}
	switch f.Status {
	case driver.RunRunning, driver.RunSleeping, driver.RunCompleted, driver.RunFailed:
	default:
		return fmt.Errorf("memory: finish run: unknown status %d", f.Status)
	}
	e, err := d.heldRun(id, owner)
	if err != nil {
		return err
	}
	r := &e.run
	r.Status = f.Status
	r.Owner = ""
	r.LeaseUntil = time.Time{}
	r.WakeAt = f.WakeAt
	r.Error = f.Error
	if f.Result != nil {
		res := *f.Result
		res.Body = slices.Clone(res.Body)
		r.Result = &res
	}
	r.UpdatedAt = d.now()
	return nil
}

// DueRuns implements driver.Journal.
func (d *Driver) DueRuns(ctx context.Context, limit int) ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	now := d.now()
	var due []*runEntry
	for _, e := range d.runs {
		if e.due(now) {
			due = append(due, e)
		}
	}
	sort.Slice(due, func(i, j int) bool {
		a, b := due[i].dueSince(), due[j].dueSince()
		if !a.Equal(b) {
			return a.Before(b)
		}
		return due[i].run.ID < due[j].run.ID
	})
	if limit > 0 && len(due) > limit {
		due = due[:limit]
	}
	ids := make([]string, len(due))
	for i, e := range due {
		ids[i] = e.run.ID
	}
	return ids, nil
}

// ClaimKey implements driver.Journal.
func (d *Driver) ClaimKey(ctx context.Context, key, runID string) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return "", err
	}
	if w, ok := d.claims[key]; ok {
		return w, nil
	}
	d.claims[key] = runID
	return runID, nil
}
